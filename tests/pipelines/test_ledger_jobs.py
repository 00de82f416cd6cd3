"""The privacy ledger in the jobs (pipelines/common/ledger.py): a second run of a stream from
scratch is refused before its pipeline runs; a resume is accepted; every job records its
budgets and schedule; the launcher's runner handling (embedded Flink waits, the Dataflow dry run
submits and records nothing)."""

import glob
import importlib
import logging
import os
import subprocess
import sys

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from beam_dp.ledger_store import init_ledger
from beam_dp.ledger_store import open_ledger
from pipelines.common import launch
from pipelines.common.ledger import guard_stream

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KEY_VAR = 'BDP_LEDGER_TEST_KEY'
ENV = dict(os.environ, PYTHONPATH=REPO, **{KEY_VAR: '0123456789abcdef' * 4})
STREAM = 'rides-tests'


def _counts(tmp_path, out, *extra):
    # Two hourly steps of the sample data: the cheapest complete run.
    return subprocess.run(
        [sys.executable, '-m', 'pipelines.continual_counts', f'--output_avro={out}', '--plot=none',
         '--end=2024-06-02T02:00:00Z', f'--noise_key=env:{KEY_VAR}', f'--stream_id={STREAM}',
         f'--ledger={tmp_path / "ledger"}', *extra],
        cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=300)


@pytest.mark.pipeline
def test_second_run_from_scratch_is_refused_before_the_pipeline_runs(tmp_path):
    init_ledger(str(tmp_path / 'ledger'))
    first = _counts(tmp_path, tmp_path / 'first')
    assert first.returncode == 0, first.stderr[-3000:]
    assert glob.glob(str(tmp_path / 'first' / 'releases-*.avro'))
    assert 'Privacy ledger' in first.stderr and 'counted' in first.stderr

    second = _counts(tmp_path, tmp_path / 'second')
    assert second.returncode != 0
    assert f"the privacy ledger refuses this run of stream '{STREAM}'" in second.stderr
    assert '--resume' in second.stderr and '--lifetime_epsilon' in second.stderr
    assert 'rotate the noise key' in second.stderr
    assert not (tmp_path / 'second').exists()           # refused before anything ran
    assert len(open_ledger(str(tmp_path / 'ledger')).history(STREAM)) == 1

    resumed = _counts(tmp_path, tmp_path / 'resumed', '--resume')
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert 'a resume of run' in resumed.stderr
    history = open_ledger(str(tmp_path / 'ledger')).history(STREAM)
    assert [r.counted for r in history] == [True, False]
    assert history[1].resume_of == history[0].run_id


JOBS = {
    # job: (module with the run function, its name, argv, the expected budget parts)
    'continual_counts': ('pipelines.continual_counts.launcher', 'run', [], {'riders'}),
    'pmwg_queries': ('pipelines.pmwg_queries.launcher', 'run', [], {'trips'}),
    'boost_queries': ('pipelines.boost_queries.main', 'main', [], {'rows'}),
    'erm_digits': ('pipelines.erm_digits.launcher', 'run', [], {'digits', 'drift'}),
}


@pytest.mark.parametrize('job', sorted(JOBS))
def test_every_job_records_its_run_and_refuses_a_second_one(job, tmp_path, monkeypatch):
    """Graph built, ledger checked; the pipelines themselves are not run here (run_pipeline is
    replaced), which is what makes the four jobs cheap to check."""
    module_name, function, extra, parts = JOBS[job]
    module = importlib.import_module(module_name)
    ran = []
    from pipelines.common import job as common_job  # pylint: disable=import-outside-toplevel
    for target in (module, common_job):     # the jobs launched by ``run_job`` run it there
        if hasattr(target, 'run_pipeline'):
            monkeypatch.setattr(target, 'run_pipeline',
                                lambda pipeline, runner: ran.append(runner))
    monkeypatch.setenv(KEY_VAR, ENV[KEY_VAR])
    monkeypatch.chdir(tmp_path)
    ledger = str(tmp_path / 'ledger')
    init_ledger(ledger)
    argv = [f'--output_avro={tmp_path / "out"}', f'--noise_key=env:{KEY_VAR}',
            f'--stream_id={job}-stream', f'--ledger={ledger}', *extra]
    getattr(module, function)(argv)
    assert ran == ['DirectRunner']
    (record,) = open_ledger(ledger).history(f'{job}-stream')
    assert record.job == job and record.counted and record.key_fingerprint
    assert {p.name for p in record.parts} == parts
    assert all(p.entries and any(not e.cost.is_zero for e in p.entries) for p in record.parts)
    with pytest.raises(SystemExit) as refused:
        getattr(module, function)(argv)
    assert 'the privacy ledger refuses this run' in str(refused.value.code)
    assert ran == ['DirectRunner']                     # the refused run never reached the runner
    # An explicit, larger lifetime budget and a rotated key let a second run start.
    monkeypatch.setenv('BDP_LEDGER_TEST_KEY_2', 'f' * 64)
    getattr(module, function)([a.replace(KEY_VAR, 'BDP_LEDGER_TEST_KEY_2') for a in argv]
                              + ['--lifetime_epsilon=1000'])
    assert len(ran) == 2


def _args(**kw):
    from pipelines.continual_counts.options import parse_args  # pylint: disable=import-outside-toplevel
    argv = [f'--{k}={v}' for k, v in kw.items()]
    return parse_args(argv)[0]


def test_stream_id_without_ledger_is_refused():
    args = _args(stream_id='s')
    with pytest.raises(SystemExit) as info:
        guard_stream(args, [], job='j', accountants={}, start=None, end=None)
    assert '--stream_id needs --ledger=' in str(info.value.code)
    assert '--ledger=none' in str(info.value.code)


def test_ledger_none_opts_out_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING):
        assert guard_stream(_args(stream_id='s', ledger='none'), [], job='j', accountants={},
                            start=None, end=None) is None
    assert 'No privacy ledger' in caplog.text


def test_ledger_options_are_checked_when_parsed(capsys):
    # The Flex Template passes booleans as --resume=true / --resume=false.
    assert _args(resume='true').resume is True and _args(resume='false').resume is False
    for argv, message in ((dict(ledger='/tmp/x'), '--ledger needs --stream_id'),
                          (dict(lifetime_rho=1, lifetime_epsilon=1), 'either --lifetime_rho'),
                          (dict(lifetime_delta=1e-6), '--lifetime_delta needs --lifetime_eps'),
                          (dict(lifetime_epsilon=1, lifetime_delta=2), 'lifetime budget')):
        with pytest.raises(SystemExit):
            _args(**argv)
        assert message in capsys.readouterr().err, argv


def test_missing_ledger_is_refused_with_the_command_that_creates_it(tmp_path):
    from beam_dp.accounting import BudgetAccountant, PrivacyBudget  # pylint: disable=import-outside-toplevel
    args = _args(stream_id='s', ledger=str(tmp_path / 'nope'))
    with pytest.raises(SystemExit) as info:
        guard_stream(args, [], job='j', start=None, end=None,
                     accountants={'all': BudgetAccountant(PrivacyBudget(epsilon=1))})
    assert 'python -m beam_dp.ledger_store init' in str(info.value.code)


def test_unreadable_noise_key_is_refused_before_anything_is_recorded(tmp_path):
    from beam_dp.accounting import BudgetAccountant, PrivacyBudget  # pylint: disable=import-outside-toplevel
    ledger = str(tmp_path / 'ledger')
    init_ledger(ledger)
    args = _args(stream_id='s', ledger=ledger, noise_key='env:BDP_LEDGER_TEST_UNSET_VAR')
    with pytest.raises(SystemExit) as info:
        guard_stream(args, [], job='j', start=None, end=None,
                     accountants={'all': BudgetAccountant(PrivacyBudget(epsilon=1))})
    assert "records the noise key's fingerprint" in str(info.value.code)
    assert 'BDP_LEDGER_TEST_UNSET_VAR' in str(info.value.code)
    assert open_ledger(ledger).history('s') == []


def test_update_and_savepoint_imply_a_resume(tmp_path):
    from beam_dp.accounting import BudgetAccountant, PrivacyBudget, PrivacyCost  # pylint: disable=import-outside-toplevel
    ledger = str(tmp_path / 'ledger')
    init_ledger(ledger)

    def accountants():
        acc = BudgetAccountant(PrivacyBudget(epsilon=1))
        acc.spend('T', PrivacyCost(epsilon=1))
        return {'all': acc}

    args = _args(stream_id='s', ledger=ledger)
    guard_stream(args, [], job='j', accountants=accountants(), start=0.0, end=None)
    # A job updated in place before the ledger had any run of it: --resume=false records it.
    with pytest.raises(SystemExit) as info:
        guard_stream(_args(stream_id='s3', ledger=ledger), ['--update'], job='j',
                     accountants=accountants(), start=0.0, end=None)
    assert '--update implies --resume' in str(info.value.code)
    first = guard_stream(_args(stream_id='s3', ledger=ledger, resume='false'), ['--update'],
                         job='j', accountants=accountants(), start=0.0, end=None)
    assert first.counted
    for flags in (['--update'], ['--savepoint_path=file:///tmp/sp']):
        run = guard_stream(args, flags, job='j', accountants=accountants(), start=0.0, end=None)
        assert run.resume_of is not None, flags
    with pytest.raises(SystemExit):
        guard_stream(args, ['--update=false'], job='j', accountants=accountants(), start=0.0,
                     end=None)
    # A dry run checks and records nothing.
    dry = guard_stream(_args(stream_id='s2', ledger=ledger), [], job='j',
                       accountants=accountants(), start=0.0, end=None, dry_run=True)
    assert dry is not None and open_ledger(ledger).history('s2') == []


# -- runners -----------------------------------------------------------------------------------

@pytest.mark.parametrize('argv, waits', [
    (['--runner=DirectRunner'], True),
    (['--runner=PrismRunner'], True),
    (['--runner=FlinkRunner'], True),                                 # default master: [auto]
    (['--runner=FlinkRunner', '--flink_master=[local]'], True),
    (['--runner=FlinkRunner', '--flink_master=[auto]'], True),
    (['--runner=FlinkRunner', '--flink_master=localhost:8081'], False),
    (['--runner=FlinkRunner', '--flink_master=localhost:8081', '--environment_type=LOOPBACK'],
     True),
    (['--runner=DataflowRunner'], False),
    (['--runner=DataflowRunner', '--dry_run=True'], False),
])
def test_waits_for_job(argv, waits):
    assert launch.waits_for_job(PipelineOptions(argv)) is waits


@pytest.mark.pipeline
def test_dataflow_dry_run_says_nothing_was_submitted(tmp_path, caplog, monkeypatch):
    """The dry run builds and validates the Dataflow job locally (no credentials, no network):
    the launcher says nothing was submitted and the ledger records nothing."""
    from pipelines.continual_counts import launcher  # pylint: disable=import-outside-toplevel
    monkeypatch.setenv(KEY_VAR, ENV[KEY_VAR])
    ledger = str(tmp_path / 'ledger')
    init_ledger(ledger)
    with caplog.at_level(logging.INFO):
        launcher.run(['--runner=DataflowRunner', '--dry_run=True', '--project=my-project',
                      '--region=europe-west1', '--temp_location=gs://my-bucket/tmp',
                      '--input_subscription=projects/my-project/subscriptions/rides',
                      '--output_topic=projects/my-project/topics/releases',
                      f'--noise_key=env:{KEY_VAR}', f'--stream_id={STREAM}', f'--ledger={ledger}'])
    assert 'nothing was submitted' in caplog.text
    assert 'Submitted to' not in caplog.text
    assert 'would be accepted (dry run: not recorded)' in caplog.text
    assert open_ledger(ledger).history(STREAM) == []
