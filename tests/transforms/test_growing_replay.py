"""Pipeline tier: spec 000 criterion 22 for the growing-database families: under a keyed-PRF
noise key two runs of the same TestStream (what a restored worker or a retried bundle does)
release bit-identical answers and black-box runs, with different watermark batching too; with
fresh randomness the runs differ (the check has power), and another key gives other noise."""

import apache_beam as beam
import pytest

from beam_dp import noise
from beam_dp.noise import NoiseKeyRef
from beam_dp.queries import LinearQuery
from tests import families
from tests.runners import DIRECT_RUNNER
from tests.runners import streaming_options
from tests.transforms.test_pmwg_transform import make_stream
from tests.transforms.test_pmwg_transform import split

pytestmark = pytest.mark.pipeline

KEY_ENV = 'BEAM_DP_TEST_GROWING_KEY'
GROWING = [name for name in families.FAMILIES
           if families.kind(name) == 'growing' and name != 'BoostQueries']
_OUT = []
#: Families whose releases on this input are (nearly) deterministic: SmallDBG's family needs
#: ε = 40 for γ < 1 at n = 30, and its exponential mechanism then puts > 0.8 of its mass on one
#: synthetic database in every epoch. Their key dependence is checked below, on the driver.
CONCENTRATED = ('SmallDBGQueries',)


def _events():
    records = [('data', (i * 5) % families.DOMAIN, 0.5 + (i // 16) * 0.5) for i in range(140)]
    queries = [('queries', (f'q{j}', LinearQuery.range(families.DOMAIN, 0, 1 + j % 4)),
                1.25 + j * 0.5) for j in range(14)]
    return records + queries


def _collect(element, tag):
    _OUT.append((tag, repr(element)))


def _run(name, cuts, **kw):
    del _OUT[:]
    with beam.Pipeline(runner=DIRECT_RUNNER, options=streaming_options()) as p:
        streams = p | make_stream(split(_events(), cuts))
        out = (streams['data'], streams['queries']) | families.build(name, **kw)
        for tag in ('answers', 'refusals', 'releases'):
            _ = getattr(out, tag) | f'Collect{tag}' >> beam.Map(_collect, tag)
    return sorted(_OUT)


@pytest.mark.parametrize('name', GROWING)
def test_a_replay_under_one_noise_key_is_bit_identical(name, monkeypatch):
    monkeypatch.setenv(KEY_ENV, 'a7' * 32)
    noise.secret_key.clear_key_cache()
    key = dict(noise_key=NoiseKeyRef(f'env:{KEY_ENV}', 'tests'))
    first = _run(name, [2.0, 4.0], **key)
    assert any(tag == 'answers' for tag, _ in first), first
    assert _run(name, [1.1, 3.3, 6.0], **key) == first       # other batching, same key
    if name in CONCENTRATED:
        return
    # Power: fresh randomness redraws the noise (three fresh runs are not all equal to it).
    fresh = [_run(name, [2.0, 4.0]) for _ in range(3)]
    assert any(f != first for f in fresh)
    # Other keys, other noise (SmallDB's law is concentrated: one of three keys must differ).
    others = []
    for other in ('5c', '6d', '7e'):
        monkeypatch.setenv(KEY_ENV, other * 32)
        noise.secret_key.clear_key_cache()
        others.append(_run(name, [2.0, 4.0], noise_key=NoiseKeyRef(f'env:{KEY_ENV}', 'tests')))
        if others[-1] != first:
            break
    assert any(o != first for o in others)
    noise.secret_key.clear_key_cache()


def test_smalldbg_draws_depend_on_the_noise_key(monkeypatch):
    """The SmallDBG driver under a keyed source on a flat law (t = 4, ε_i small): the same key
    replays the same synthetic databases, other keys draw others."""
    from beam_dp.drivers.growing import QUERY, RECORD, run_instance   # noqa: E402
    from beam_dp.drivers.smalldbg import smalldbg_engine              # noqa: E402
    from beam_dp.mechanisms.bb_scheduler import BBScheduler           # noqa: E402
    from beam_dp.mechanisms.smalldb import SmallDB                    # noqa: E402
    queries = tuple(LinearQuery.range(families.DOMAIN, 0, b) for b in range(1, 5))
    mech = BBScheduler(mechanism=SmallDB(queries, 2), epsilon=0.5, beta=0.05, n=4,
                       domain_size=families.DOMAIN, g=0.05, lazy=True)
    items = [(i, RECORD, i % 4, i % 4) for i in range(4)]
    items += [(10 + j, QUERY, f'q{j}', (f'q{j}', queries[1])) for j in range(1)]

    def answers(secret):
        monkeypatch.setenv(KEY_ENV, secret * 32)
        noise.secret_key.clear_key_cache()
        source = noise.KeyedRandom(NoiseKeyRef(f'env:{KEY_ENV}', 'tests'))
        out = run_instance(smalldbg_engine(mech), items, source, 'L')
        return [a.value for a in out.answers]

    first = answers('a7')
    assert answers('a7') == first
    assert any(answers(k) != first for k in ('11', '22', '33', '44', '55'))
    noise.secret_key.clear_key_cache()
