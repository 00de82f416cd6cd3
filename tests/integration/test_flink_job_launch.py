"""The jobs on the FlinkRunner's embedded cluster, run as docs/runners.md documents them
(``python -m pipelines.continual_counts --runner=FlinkRunner --flink_master='[local]' ...``):
the launcher waits for the job (the embedded cluster and the LOOPBACK SDK harness live and die
with it; before issue 27 it logged "Submitted to FlinkRunner." and exited 0 with nothing
written), and the outputs are complete."""

import glob
import os
import subprocess
import sys

import fastavro
import pytest

from pipelines.continual_counts import sample_data
from tests import runners

pytestmark = [pytest.mark.integration, pytest.mark.flink, runners.requires_flink]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STEPS = 3


def test_continual_counts_on_embedded_flink_waits_and_writes_its_outputs(tmp_path):
    jar = runners.flink_job_server_jar()
    version = runners._flink_version_of(jar)  # pylint: disable=protected-access
    out = tmp_path / 'out'
    end = sample_data.SAMPLE_START.timestamp() + STEPS * sample_data.SAMPLE_STEP_SECONDS
    proc = subprocess.run(
        [sys.executable, '-m', 'pipelines.continual_counts', '--runner=FlinkRunner',
         '--flink_master=[local]', f'--flink_version={version}',
         f'--flink_job_server_jar={jar}', f'--output_avro={out}', '--plot=none',
         f'--end={end:.0f}'],
        cwd=tmp_path, env=dict(os.environ, PYTHONPATH=REPO), capture_output=True, text=True,
        timeout=900, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert 'Submitted to FlinkRunner' not in proc.stderr
    assert 'waiting for the job to finish' in proc.stderr
    assert 'Pipeline finished' in proc.stderr
    (path,) = glob.glob(str(out / 'releases-*.avro'))
    with open(path, 'rb') as f:
        releases = list(fastavro.reader(f))
    stations = set(sample_data.load_stations())
    assert {r['key'] for r in releases} == stations
    assert sorted({r['step'] for r in releases}) == list(range(STEPS))
    assert len(releases) == len(stations) * STEPS        # every key, every step, once
    assert f'releases            : {len(releases)} (missing 0, duplicates 0)' in proc.stdout
