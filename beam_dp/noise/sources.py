"""Which random source a transform uses: the one decision every transform's shell delegates here.

``noise_source(owner, noise_key=None, testing_seed=None)``:

* ``noise_key='env:VAR' | 'file:/path' | 'gcpsm:projects/P/secrets/S/versions/N'`` -- a
  ``KeyedRandom``: every draw is a PRF of the secret key and its address, so replays release
  bit-identical values (docs/privacy_model.md). The reference, never the key, enters the graph.
* neither -- the key of an enclosing ``with using_noise_key(ref):`` block if any (how a launcher
  gives one key to every transform it builds), else ``SecureRandom``: fresh OS randomness for
  every draw (a re-fired timer redraws the noise of values not yet held in state).
* ``testing_seed=int`` -- a ``SeededRandom``, only inside the testing opt-in
  (``beam_dp.noise.testing``); otherwise ``InvalidParamsError`` says how to opt in.

``check_runner(owner, rng, runner, options)`` is the second gate, called where the pipeline is
known: a seeded source is refused on any runner that is not a local test runner.
"""

import contextlib
import threading
from typing import Any, Mapping, Optional

from beam_dp.errors import InvalidParamsError
from beam_dp.noise import testing
from beam_dp.noise.keyed import KeyedRandom
from beam_dp.noise.rng import RandomSource
from beam_dp.noise.rng import SeededRandom
from beam_dp.noise.rng import secure_rng
from beam_dp.noise.secret_key import NoiseKeyRef

__all__ = [
    'LOCAL_RUNNERS',
    'check_runner',
    'noise_source',
    'using_noise_key',
]

_scope = threading.local()


@contextlib.contextmanager
def using_noise_key(noise_key, stream_id: Optional[str] = None):
    """Transforms built inside this block (in this thread) use ``KeyedRandom(noise_key)`` unless
    given their own source; ``None`` changes nothing. ``stream_id`` names the stream (the root
    of every noise address: see ``NoiseKeyRef``); a key needs one. Validated here."""
    ref = None if noise_key is None else NoiseKeyRef.of(noise_key, 'using_noise_key', stream_id)
    previous = getattr(_scope, 'ref', None)
    _scope.ref = ref if ref is not None else previous
    try:
        yield ref
    finally:
        _scope.ref = previous

#: Runners that execute on this machine (tests, local runs): the only ones a seed may reach.
LOCAL_RUNNERS = frozenset({
    'DirectRunner', 'SwitchingDirectRunner', 'BundleBasedDirectRunner', 'FnApiRunner',
    'TestDirectRunner', 'InteractiveRunner', 'PrismRunner', 'TestPrismRunner',
})
#: Cluster runners are local only with an embedded or localhost master.
_MASTER_OPTION = {'FlinkRunner': 'flink_master', 'SparkRunner': 'spark_master_url',
                  'TestFlinkRunner': 'flink_master'}
_LOCAL_MASTERS = ('[local]', '[auto]', 'local', 'localhost', '127.0.0.1')

_HOW_TO_OPT_IN = (
    'testing_seed makes the noise predictable to anyone who knows or guesses the seed, so it is '
    'accepted only in tests that opt in with beam_dp.noise.testing.allow_seeded_noise() (a '
    'context manager; or enable_seeded_noise_for_tests() from a conftest). Production pipelines '
    "use noise_key='env:VAR' | 'file:/path' | 'gcpsm:projects/P/secrets/S/versions/N' "
    '(replay-identical noise) or neither (fresh OS randomness).')


def noise_source(owner: str, noise_key=None, testing_seed: Optional[int] = None) -> RandomSource:
    """The random source of a transform (see the module docstring).

    Raises:
      InvalidParamsError: for both arguments, a malformed ``noise_key``, a non-int seed, or a
        seed outside the testing opt-in.
    """
    if noise_key is not None and testing_seed is not None:
        raise InvalidParamsError(f'{owner}: give at most one of noise_key and testing_seed.')
    if testing_seed is not None:
        if isinstance(testing_seed, bool) or not isinstance(testing_seed, int):
            raise InvalidParamsError(f'{owner}: testing_seed must be an int or None, got '
                                     f'{testing_seed!r}.')
        if not testing.seeded_noise_allowed():
            raise InvalidParamsError(f'{owner}: refusing testing_seed={testing_seed}. '
                                     f'{_HOW_TO_OPT_IN}')
        return SeededRandom(testing_seed)
    scoped = getattr(_scope, 'ref', None)
    if noise_key is None:
        noise_key = scoped
    if noise_key is not None:
        ref = NoiseKeyRef.of(noise_key, owner)
        if ref.stream_id is None and scoped is not None and scoped.stream_id is not None:
            ref = NoiseKeyRef(ref.reference, scoped.stream_id)   # the enclosing block's stream
        if ref.stream_id is None:
            raise InvalidParamsError(
                f'{owner}: a noise key needs the identity of the stream it is for, so that two '
                f'jobs over different streams never draw the same noise: write '
                f"noise_key=beam_dp.noise.NoiseKeyRef({ref.reference!r}, stream_id='<stream "
                f"name>') or beam_dp.noise.using_noise_key({ref.reference!r}, "
                f"stream_id='<stream name>').")
        return KeyedRandom(ref)
    return secure_rng()


def _runner_name(runner: Any) -> Optional[str]:
    if runner is None or isinstance(runner, str):
        return runner
    return type(runner).__name__


def _is_local_master(value) -> bool:
    if not value:
        return True     # the runner's default is an embedded cluster
    host = str(value).split('://')[-1].split(':')[0].split('[')[0] or str(value)
    return str(value) in _LOCAL_MASTERS or host in _LOCAL_MASTERS or str(value).startswith(
        'local[')


def check_runner(owner: str, rng: RandomSource, runner: Any = None,
                 options: Optional[Mapping[str, Any]] = None) -> None:
    """Refuses a seeded (non-secure) source on a runner that is not a local test runner.

    Args:
      runner: the pipeline's runner (a ``PipelineRunner`` object or its name); None reads
        ``options['runner']``, and no runner at all means Beam's default, the DirectRunner.
      options: the pipeline options as a mapping (``PipelineOptions.get_all_options()``).
    """
    if getattr(rng, 'is_secure', False):
        return
    options = dict(options or {})
    name = _runner_name(runner) or _runner_name(options.get('runner')) or 'DirectRunner'
    name = name.rsplit('.', 1)[-1]
    if name in LOCAL_RUNNERS:
        return
    master = _MASTER_OPTION.get(name)
    if master is not None and _is_local_master(options.get(master)):
        return
    raise InvalidParamsError(
        f'{owner}: a seeded random source cannot run on {name}'
        + (f' with {master}={options.get(master)!r}' if master else '')
        + '; seeds are for local test runners only. Use noise_key=... (or no key) in production.')
