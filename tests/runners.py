"""Pipeline options and pytest skip markers for running tests on Beam runners.

Helper module only (no tests here): ``streaming_options()`` for TestStream pipelines, the
options of each runner (``direct_options``, ``prism_options``, ``flink_options``) and the
skip markers of the runners that need an artefact. Usage::

    from tests.runners import prism_options, requires_prism

    @pytest.mark.prism
    @requires_prism
    def test_something():
        with beam.Pipeline(argv=prism_options(streaming=True)) as p:
            ...

Artefacts (built/fetched by the .ci scripts, never committed):

* Prism binary: ``$BEAM_DP_PRISM_BINARY``, else ``<cache>/bin/prism``
  (``bash .ci/build_prism.sh``).
* Flink job server jar: ``$BEAM_DP_FLINK_JOB_SERVER_JAR``, else the newest
  ``<cache>/flink/beam-runners-flink-*-job-server-*.jar``
  (``bash .ci/fetch_flink_job_server.sh``).

``<cache>`` is ``$BEAM_DP_CACHE``, else ``~/.cache/beam_dp``.

A missing artefact skips the tests that need it, except under ``BEAM_DP_REQUIRE_RUNNERS=1``
(set by ``.ci/run``), where those tests error with the reason instead: CI must not go green
on a silently skipped integration tier.

Always name the runner explicitly: ``DirectRunner`` is a *switching* runner
that may silently pick Prism (downloading it from GitHub, which fails here) and
fall back to another runner.  For TestStream + streaming use
``BundleBasedDirectRunner`` (what ``DIRECT_RUNNER`` below names), for a bounded
input ``BATCH_RUNNER``; ``tests/helpers.py`` builds pipelines on them
(``pipeline``, ``run``, ``run_stream``).
"""

from __future__ import annotations

import glob
import os
import shutil

import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.options.pipeline_options import StandardOptions

# The same Prism experiment as the jobs (no dynamic splits of running bundles: docs/runners.md).
from pipelines.common.launch import PRISM_NO_SPLIT

#: The DirectRunner variant that executes TestStream pipelines in streaming
#: mode (the switching DirectRunner routes TestStream pipelines to it anyway).
DIRECT_RUNNER = 'BundleBasedDirectRunner'

#: The runner of a bounded (batch) test pipeline: what the switching DirectRunner picks for one
#: after trying Prism, named so that it never tries Prism. The BundleBasedDirectRunner in batch
#: mode fails an assertion of its GroupByKey evaluator on the transforms' timer chains
#: (test_dynamic_transform's batch test).
BATCH_RUNNER = 'FnApiRunner'

FLINK_VERSION_DEFAULT = '1.19'


def cache_dir() -> str:
  return os.environ.get('BEAM_DP_CACHE') or os.path.join(
      os.path.expanduser('~'), '.cache', 'beam_dp')


def prism_binary() -> str | None:
  """Path of an executable Prism binary, or None."""
  path = os.environ.get('BEAM_DP_PRISM_BINARY') or os.path.join(
      cache_dir(), 'bin', 'prism')
  if os.path.isfile(path) and os.access(path, os.X_OK):
    return path
  return None


def flink_job_server_jar() -> str | None:
  """Path of a Flink job server jar, or None."""
  path = os.environ.get('BEAM_DP_FLINK_JOB_SERVER_JAR')
  if path:
    return path if os.path.isfile(path) else None
  jars = sorted(
      glob.glob(
          os.path.join(cache_dir(), 'flink', 'beam-runners-flink-*-job-server*.jar')))
  return jars[-1] if jars else None


def _flink_version_of(jar: str) -> str:
  base = os.path.basename(jar)
  if base.startswith('beam-runners-flink-'):
    rest = base[len('beam-runners-flink-'):]
    return rest.split('-', 1)[0]
  return FLINK_VERSION_DEFAULT


def java_available() -> bool:
  return shutil.which('java') is not None


def streaming_options(**extra) -> PipelineOptions:
  """``PipelineOptions(**extra)`` in streaming mode, for TestStream pipelines.

  The runner is not part of it: name it where the pipeline is built, e.g.
  ``beam.Pipeline(runner=DIRECT_RUNNER, options=streaming_options())``.
  """
  options = PipelineOptions(**extra)
  options.view_as(StandardOptions).streaming = True
  return options


def direct_options(streaming: bool) -> list[str]:
  args = ['--runner=%s' % DIRECT_RUNNER]
  if streaming:
    args.append('--streaming')
  return args


def prism_options(streaming: bool) -> list[str]:
  """Pipeline args for the PrismRunner using the locally built binary.

  Raises FileNotFoundError when the binary is missing (use ``requires_prism``
  to skip instead).
  """
  binary = prism_binary()
  if binary is None:
    raise FileNotFoundError(
        'Prism binary not found; run: bash .ci/build_prism.sh '
        '(or set BEAM_DP_PRISM_BINARY)')
  args = [
      '--runner=PrismRunner',
      '--prism_location=%s' % binary,
      '--environment_type=LOOPBACK',
      # Beam caches ONE Prism job server per process (PrismRunner.shared_handle): if any earlier
      # pipeline (e.g. the switching DirectRunner trying Prism) created it without
      # --prism_location, it would try to download Prism and fail. Our own server every time.
      '--experiments=disable_prism_server_singleton',
      # Beam opens the job's state stream with timeout=job_server_timeout (300 s by default): a
      # Prism pipeline running longer failed with DEADLINE_EXCEEDED in wait_until_finish
      # (benchmarks/throughput_sidebyside, 10k keys x 8,760 steps).
      '--job_server_timeout=3600',
      # Prism splits a bundle that shows no progress between two progress reports (a loaded
      # machine, a slow timer firing); a split bundle holding timers re-queues them
      # ("Unexpected split on a bundle with timers", apache/beam#35771): whole timer firings
      # and stateful inputs were delivered twice (docs/runners.md, "Known Prism differences").
      # This experiment (Prism's execute.go) turns its dynamic splitting off.
      PRISM_NO_SPLIT,
  ]
  if streaming:
    args.append('--streaming')
  return args


def flink_options(
    streaming: bool, parallelism: int = 1, master: str = '[local]') -> list[str]:
  """Pipeline args for the FlinkRunner via a local job server jar.

  ``master='[local]'`` runs an embedded Flink mini cluster inside the job
  server JVM; ``master='localhost:8081'`` submits to a running cluster
  (``bash .ci/flink_cluster.sh start``).  Raises FileNotFoundError when the
  jar is missing (use ``requires_flink`` to skip instead).
  """
  jar = flink_job_server_jar()
  if jar is None:
    raise FileNotFoundError(
        'Flink job server jar not found; run: bash .ci/fetch_flink_job_server.sh '
        '(or set BEAM_DP_FLINK_JOB_SERVER_JAR)')
  args = [
      '--runner=FlinkRunner',
      '--flink_master=%s' % master,
      '--flink_version=%s' % _flink_version_of(jar),
      '--flink_job_server_jar=%s' % jar,
      '--environment_type=LOOPBACK',
      '--parallelism=%d' % parallelism,
      # Java 17: without it a CombineGlobally with its default value (its side input) fails
      # in the job server's Flink with "InaccessibleObjectException: Unable to make field
      # private final java.lang.Object[] java.util.Arrays$ArrayList.a accessible: module
      # java.base does not "opens java.util" to unnamed module" (docs/runners.md).
      JAVA17_OPENS,
  ]
  if streaming:
    args.append('--streaming')
  return args


#: The job server JVM flag Flink needs on Java 17 (an embedded ``[local]`` job server that Beam
#: starts; a separately started job server or cluster takes it on its own command line).
JAVA17_OPENS = '--job_server_jvm_properties=--add-opens=java.base/java.util=ALL-UNNAMED'


def on_prism_with_one_rerun(run) -> None:
  """Runs ``run()`` (a Prism pipeline with its assertions); if it fails, prints why and runs it
  once more, which must pass. For the known Prism redelivery (docs/runners.md, "Known Prism
  differences": an element delivered twice to a stateful stage, about 1 run in 8-20), the
  same allowance as the runner matrix's ``PRISM_RERUN``; never on the DirectRunner or Flink."""
  try:
    run()
  except Exception as e:  # pylint: disable=broad-except  (shown, then one fresh run must pass)
    print(f'Prism, first run failed (known Prism redelivery, one rerun): {e!r:.2000}')
    run()


def _prism_missing_reason() -> str:
  return ('Prism binary not found (looked at $BEAM_DP_PRISM_BINARY or '
          '%s); build it with: bash .ci/build_prism.sh' %
          os.path.join(cache_dir(), 'bin', 'prism'))


def _flink_missing_reason() -> str:
  if not java_available():
    return 'FlinkRunner needs Java on PATH (java not found)'
  return ('Flink job server jar not found (looked at '
          '$BEAM_DP_FLINK_JOB_SERVER_JAR or %s/beam-runners-flink-*-job-server*.jar); '
          'fetch it with: bash .ci/fetch_flink_job_server.sh' %
          os.path.join(cache_dir(), 'flink'))


#: Set by .ci/run: a missing artefact makes the tests that need it fail (error) instead of skip.
REQUIRE_ENV = 'BEAM_DP_REQUIRE_RUNNERS'


def runners_required() -> bool:
  return os.environ.get(REQUIRE_ENV, '').strip() not in ('', '0', 'false', 'no')


class MissingRunnerArtefact(RuntimeError):
  """Raised (as a test error) when an artefact is missing under BEAM_DP_REQUIRE_RUNNERS=1."""


def fail_missing(reason: str) -> bool:
  raise MissingRunnerArtefact('%s=1 (set by .ci/run) and %s' % (REQUIRE_ENV, reason))


def _requirement(missing: bool, reason: str):
  """A mark: skip when ``missing``; under BEAM_DP_REQUIRE_RUNNERS=1 an error instead.

  The error comes from a skipif *string* condition that raises when pytest evaluates it at
  setup ("Error evaluating 'skipif' condition ... MissingRunnerArtefact: <reason>"), so the
  same object works as a decorator and in ``pytest.param(..., marks=[...])``.
  """
  if not missing:
    return pytest.mark.skipif(False, reason=reason)
  if runners_required():
    return pytest.mark.skipif(
        "__import__('tests.runners', fromlist=['fail_missing']).fail_missing(%r)" % reason,
        reason=reason)
  return pytest.mark.skipif(True, reason=reason)


def gcloud_sdk_root() -> str | None:
  """The Google Cloud SDK root of the ``gcloud`` on PATH, or None."""
  gcloud = shutil.which('gcloud')
  if gcloud is None:
    return None
  return os.path.dirname(os.path.dirname(os.path.realpath(gcloud)))


def pubsub_emulator_missing_reason() -> str | None:
  """Why the Pub/Sub emulator test cannot run here, or None if it can."""
  root = gcloud_sdk_root()
  if root is None:
    return 'the Pub/Sub emulator needs the Google Cloud SDK (gcloud not on PATH)'
  if not os.path.isdir(os.path.join(root, 'platform', 'pubsub-emulator')):
    return ('the Google Cloud SDK at %s has no pubsub-emulator component '
            '(gcloud components install pubsub-emulator, or apt-get install '
            'google-cloud-cli-pubsub-emulator)' % root)
  if not java_available():
    return 'the Pub/Sub emulator needs Java on PATH (java not found)'
  try:
    import google.cloud.pubsub_v1  # pylint: disable=import-outside-toplevel,unused-import
  except ImportError as e:
    return ('google-cloud-pubsub is not importable (%s); install the test extra: '
            "pip install -e '.[test]'" % e)
  return None


#: Skip marker: the Prism binary is missing (error under BEAM_DP_REQUIRE_RUNNERS=1).
requires_prism = _requirement(prism_binary() is None, _prism_missing_reason())

#: Skip marker: the Flink job server jar (or Java) is missing (error under
#: BEAM_DP_REQUIRE_RUNNERS=1).
requires_flink = _requirement(
    flink_job_server_jar() is None or not java_available(), _flink_missing_reason())

#: Skip marker: gcloud's Pub/Sub emulator, Java or google-cloud-pubsub is missing (error under
#: BEAM_DP_REQUIRE_RUNNERS=1).
requires_pubsub_emulator = _requirement(
    pubsub_emulator_missing_reason() is not None, pubsub_emulator_missing_reason() or '')
