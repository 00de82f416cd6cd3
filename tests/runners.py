"""Pipeline options and pytest skip markers for running tests on real Beam runners.

Helper module only (no tests here). Usage::

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

Always name the runner explicitly: ``DirectRunner`` is a *switching* runner
that may silently pick Prism (downloading it from GitHub, which fails here) and
fall back to another runner.  For TestStream + streaming use
``BundleBasedDirectRunner`` (what ``DIRECT_RUNNER`` below names).
"""

from __future__ import annotations

import glob
import os
import shutil

import pytest

#: The DirectRunner variant that executes TestStream pipelines in streaming
#: mode (the switching DirectRunner routes TestStream pipelines to it anyway).
DIRECT_RUNNER = 'BundleBasedDirectRunner'

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
  ]
  if streaming:
    args.append('--streaming')
  return args


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


#: Skip marker: the Prism binary is missing.
requires_prism = pytest.mark.skipif(
    prism_binary() is None, reason=_prism_missing_reason())

#: Skip marker: the Flink job server jar (or Java) is missing.
requires_flink = pytest.mark.skipif(
    flink_job_server_jar() is None or not java_available(),
    reason=_flink_missing_reason())
