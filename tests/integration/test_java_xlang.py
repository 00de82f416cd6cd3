"""From Java: java/beam-dp-from-java (Beam Java 2.62.0, Maven) applies ContinualCountPerKey by
field names through the Python expansion service, on an embedded Flink job server
(java/beam-dp-from-java/run.sh starts the services; docs/configuration.md "From Java").

Opt-in (a Maven build and three services, ~2 min): ``BEAM_DP_JAVA_XLANG=1`` (.ci/run sets it);
skipped with the reason otherwise, or when java, mvn or the Kafka-enabled Flink job server jar
of .ci/fetch_expansion_service.sh is missing (an error instead under BEAM_DP_REQUIRE_RUNNERS=1).
"""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from tests.runners import cache_dir
from tests.runners import fail_missing
from tests.runners import runners_required

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / 'java' / 'beam-dp-from-java' / 'run.sh'
JOB_SERVER = os.path.join(cache_dir(), 'kafka-xlang',
                          'beam-runners-flink-1.19-job-server-2.62.0-kafka-thin.jar')

pytestmark = [pytest.mark.pipeline, pytest.mark.integration, pytest.mark.flink]


def _missing():
    if os.environ.get('BEAM_DP_JAVA_XLANG') != '1':
        return 'opt-in: set BEAM_DP_JAVA_XLANG=1 (a Maven build and three local services)'
    for tool in ('java', 'mvn'):
        if shutil.which(tool) is None:
            return f'{tool} not on PATH'
    if not os.path.isfile(JOB_SERVER):
        return f'{JOB_SERVER} missing (bash .ci/fetch_expansion_service.sh)'
    return None


def test_java_pipeline_applies_a_beam_dp_transform(tmp_path):
    reason = _missing()
    if reason is not None:
        if reason.startswith('opt-in') or not runners_required():
            pytest.skip(reason)
        fail_missing(reason)
    env = {**os.environ, 'PYTHON': sys.executable, 'PYTHONPATH': str(ROOT),
           'BEAM_DP_NOISE_KEY': '5f3c0a9e2b7d41c68e0f1a2b3c4d5e6f'}
    result = subprocess.run(['bash', str(SCRIPT), str(tmp_path)], env=env, capture_output=True,
                            text=True, timeout=900, check=False)
    logs = ''.join(f'\n== {p.name}\n{p.read_text(errors="replace")[-3000:]}'
                   for p in sorted((tmp_path / 'logs').glob('*.log')))
    assert result.returncode == 0, result.stderr[-3000:] + logs
    lines = (tmp_path / 'releases.csv').read_text().split()
    releases = sorted((key, int(step), float(value))
                      for key, step, value in (line.split(',') for line in lines))
    # every public key at every step of the public schedule (3 one-second steps), noisy counts
    assert [(k, s) for k, s, _ in releases] == [(k, s) for k in ('home', 'search')
                                                for s in range(3)]
    assert all(v == int(v) for _, _, v in releases)
