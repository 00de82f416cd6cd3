"""The generic YAML job (``python -m pipelines.yaml``): the example configs of
pipelines/yaml/configs run end to end on the DirectRunner's batch runner (FnApiRunner) and
release every public (key, step); the streaming Pub/Sub config translates for Dataflow; the
pipeline budget refuses an over-spending config before anything runs; the run is recorded in the
privacy ledger, and a second run from scratch over the same stream is refused; a config cannot
bring its own noise key."""

import glob
import json
import pathlib
import subprocess
import sys

import pytest

from beam_dp.ledger_store import init_ledger
from beam_dp.ledger_store import open_ledger
from pipelines.yaml import launcher
from pipelines.yaml import options as job_options
from pipelines.yaml import page_views

ROOT = pathlib.Path(__file__).resolve().parents[2]
CONFIGS = ROOT / 'pipelines' / 'yaml' / 'configs'
KEY_VAR = 'BDP_YAML_JOB_TEST_KEY'
PAGES = {'home', 'search', 'cart'}

pytestmark = pytest.mark.pipeline


@pytest.fixture(scope='module')
def views(tmp_path_factory):
    path = tmp_path_factory.mktemp('views') / 'views.avro'
    page_views.write_example_input(str(path))
    return str(path)


def _rows(prefix, name):
    rows = []
    for path in glob.glob(f'{prefix}{name}-*'):
        with open(path, encoding='utf-8') as f:
            rows += [json.loads(line) if line.startswith('{') else line.strip() for line in f]
    return rows


def _argv(config, views, out, *extra):
    variables = json.dumps({'input': views, 'output': out})
    return [f'--config={CONFIGS / config}', f'--jinja_variables={variables}',
            '--runner=FnApiRunner', *extra]


def test_help_explains_the_job():
    result = subprocess.run([sys.executable, '-m', 'pipelines.yaml', '--help'], cwd=ROOT,
                            capture_output=True, text=True, timeout=300, check=True)
    text = ' '.join(result.stdout.split())
    for expected in ('--config', 'gs://', '--epsilon', '--rho', '--noise_key', '--stream_id',
                     '--ledger', 'ContinualQuantilesPerKey', 'SelectKeys',
                     'pipelines/yaml/configs'):
        assert expected in text, expected
    for action in job_options.build_parser()._actions:
        assert action.help, action.option_strings


def test_aggregates_config_releases_sums_histograms_quantiles_means(views, tmp_path):
    out = f'{tmp_path}/'
    launcher.run(_argv('aggregates.yaml', views, out, '--epsilon=4', '--ledger=none'))
    for name, metric in (('seconds', 'sum'), ('buckets', 'histogram'),
                         ('quantiles', 'quantiles'), ('means', 'mean')):
        rows = _rows(out, name)
        assert {(r['key'], r['step']) for r in rows} == {(k, s) for k in PAGES
                                                         for s in range(5)}, name
        assert {r['metric'] for r in rows} == {metric}, name
    dead = _rows(out, 'dead_letters')
    assert sorted(r['transform'] for r in dead) == ['Buckets', 'MeanSeconds', 'Quantiles',
                                                    'Seconds']
    assert {r['reason'] for r in dead} == {"key 'checkout' is not in the public key set"}


def test_keys_and_sparse_config(views, tmp_path):
    out = f'{tmp_path}/'
    launcher.run(_argv('keys_sparse.yaml', views, out, '--epsilon=3', '--delta=1e-6',
                       '--ledger=none'))
    assert set(_rows(out, 'keys')) <= PAGES | {'checkout'}
    sparse = _rows(out, 'views') + _rows(out, 'live')      # released above a noisy threshold
    assert sparse and {r['metric'] for r in sparse} == {'count'}
    assert {(r['key'], r['step']) for r in sparse} <= {(k, s) for k in PAGES for s in range(5)}
    dead = _rows(out, 'dead_letters')
    assert {r['transform'] for r in dead} <= {'Pages', 'Views', 'Live'} and dead


def test_over_spending_config_is_refused_before_it_runs(views, tmp_path):
    with pytest.raises(SystemExit) as info:
        launcher.run(_argv('aggregates.yaml', views, f'{tmp_path}/', '--epsilon=3.5',
                           '--ledger=none'))
    assert 'the config is refused' in str(info.value.code)
    assert 'ε=3.5' in str(info.value.code), info.value.code
    assert not list(tmp_path.iterdir())


def test_config_without_budget_is_refused(views, tmp_path):
    with pytest.raises(SystemExit, match='no budget'):
        launcher.run(_argv('aggregates.yaml', views, f'{tmp_path}/', '--ledger=none'))


def test_run_is_recorded_in_the_ledger_and_a_rerun_refused(views, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_VAR, 'a' * 64)
    ran = []
    monkeypatch.setattr(launcher, 'run_pipeline', lambda pipeline, runner: ran.append(runner))
    ledger = str(tmp_path / 'ledger')
    init_ledger(ledger)
    argv = _argv('aggregates.yaml', views, f'{tmp_path}/out/', '--epsilon=4',
                 f'--noise_key=env:{KEY_VAR}', '--stream_id=views-agg', f'--ledger={ledger}')
    launcher.run(argv)
    (record,) = open_ledger(ledger).history('views-agg')
    assert record.job == 'yaml' and record.counted and record.key_fingerprint
    assert (record.start, record.end) == (0.0, 300.0)
    assert [p.name for p in record.parts] == ['pipeline']
    with pytest.raises(SystemExit) as refused:
        launcher.run(argv)
    assert 'the privacy ledger refuses this run' in str(refused.value.code)
    assert ran == ['FnApiRunner']


def test_noise_key_without_ledger_is_refused(views, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_VAR, 'a' * 64)
    with pytest.raises(SystemExit, match='--ledger'):
        launcher.run(_argv('aggregates.yaml', views, f'{tmp_path}/', '--epsilon=4',
                           f'--noise_key=env:{KEY_VAR}', '--stream_id=s'))


def test_a_config_cannot_bring_its_own_noise_key(views, tmp_path):
    config = tmp_path / 'own_key.yaml'
    config.write_text((ROOT / 'pipelines' / 'yaml' / 'page_views.yaml').read_text(
        encoding='utf-8'), encoding='utf-8')
    variables = json.dumps({'input': views, 'output': f'{tmp_path}/'})
    with pytest.raises(SystemExit, match='sets its own noise_key'):
        launcher.run([f'--config={config}', f'--jinja_variables={variables}', '--epsilon=2',
                      '--ledger=none', '--runner=FnApiRunner'])


def test_pubsub_config_translates_for_dataflow():
    """The streaming Pub/Sub → ContinualCountPerKey → Pub/Sub config, built for Dataflow (a
    dry-run graph: nothing submitted)."""
    variables = json.dumps({
        'subscription': 'projects/test-project/subscriptions/views',
        'output_topic': 'projects/test-project/topics/releases',
        'dead_letter_topic': 'projects/test-project/topics/dead',
        'start': '2026-01-01T00:00:00Z', 'end': '2026-01-08T00:00:00Z'})
    args, beam_args = job_options.parse_args([
        f'--config={CONFIGS / "pubsub_counts.yaml"}', f'--jinja_variables={variables}',
        '--epsilon=1', '--ledger=none', '--runner=DataflowRunner', '--dry_run=True',
        '--project=test-project', '--region=us-central1',
        '--temp_location=gs://test-bucket/tmp',
        '--staging_location=gs://test-bucket/staging'])
    pipeline, spec = launcher.build(args, beam_args)
    assert pipeline.options.get_all_options()['streaming'] is True
    assert launcher.release_schedule(spec) == (1767225600.0, 1767830400.0)
    proto = pipeline.to_runner_api()
    names = {t.unique_name.split('/')[0] for t in proto.components.transforms.values()}
    assert {'ReadViews', 'Views', 'PublishReleases', 'PublishDeadLetters'} <= names, names
    reads = [t for t in proto.components.transforms.values()
             if t.spec.urn == 'beam:transform:pubsub_read:v1']
    assert reads, 'no Pub/Sub read in the Dataflow graph'


def test_flex_template_entry_point_runs_as_a_script():
    """The Flex Template launcher runs pipelines/yaml/main.py by path: its directory (named like
    PyYAML) must not shadow ``import yaml``."""
    result = subprocess.run([sys.executable, str(ROOT / 'pipelines' / 'yaml' / 'main.py'),
                             '--help'], cwd='/', capture_output=True, text=True, timeout=300,
                            check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert '--config' in result.stdout
