"""The boost_queries job's state bounds (--cache_capacity, --retention_blocks,
--replay_retention_seconds) and Gaussian noise (--noise gaussian --delta): validated by the
parser, passed to BoostQueries, and a small Gaussian run end to end (ledger in ε at δ)."""

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from pipelines.boost_queries import options as job_options
from pipelines.boost_queries import pipeline as job

from tests.pipelines.test_boost_queries import _records
from tests.pipelines.test_boost_queries import _run_job

pytestmark = pytest.mark.pipeline


@pytest.mark.parametrize('argv', [
    ['--cache_capacity=1'], ['--cache_capacity=x'], ['--retention_blocks=0'],
    ['--replay_retention_seconds=0'], ['--replay_retention_seconds=1.5'],
    ['--noise=gaussian'], ['--noise=gaussian', '--delta=1'], ['--delta=1e-6'],
    ['--noise=cauchy']])
def test_bad_values_are_refused_by_the_parser(argv):
    with pytest.raises(SystemExit):
        job_options.parse_args(argv)


def test_bounds_and_noise_reach_boost_queries(monkeypatch):
    made = []
    real = job.BoostQueries

    def capture(**kw):
        made.append(real(**kw))
        return made[-1]
    monkeypatch.setattr(job, 'BoostQueries', capture)
    args, beam_args = job_options.parse_args([
        '--cache_capacity=500', '--retention_blocks=8', '--replay_retention_seconds=86400',
        '--noise=gaussian', '--delta=1e-6', '--epsilon=2', '--output_avro=/tmp/unused'])
    job.build_pipeline(args, PipelineOptions(beam_args))
    driver = made[0].driver('covid')
    mech = driver.mechanism
    assert (mech.cache_capacity, mech.retention_blocks) == (500, 8)
    assert driver.replay_retention_micros == 86400 * 10 ** 6
    assert (mech.noise, driver.ledger_delta) == ('gaussian', 1e-6)
    args, _ = job_options.parse_args([])
    made.clear()
    job.build_pipeline(args, PipelineOptions([]))
    driver = made[0].driver('covid')
    assert (driver.mechanism.cache_capacity, driver.mechanism.retention_blocks,
            driver.replay_retention_micros, driver.mechanism.noise) == (None, None, None,
                                                                         'laplace')


def test_gaussian_run_end_to_end(tmp_path):
    out = tmp_path / 'g'
    proc = _run_job(tmp_path, '--noise', 'gaussian', '--delta', '1e-6', '--epsilon', '1',
                '--cache_capacity', '64', '--retention_blocks', '6', '--blocks', '3',
                '--replay_retention_seconds', str(30 * 24 * 3600), '--output_avro', str(out),
                '--no_baselines')
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert 'gaussian' in proc.stdout
    ledger = _records(out, 'ledger')
    assert ledger and {r['purpose'] for r in ledger} <= {'gaussian', 'sv_init'}
    assert all(r['consumed'] <= r['capacity'] * (1 + 1e-9) <= 1.0 + 1e-9 for r in ledger)
