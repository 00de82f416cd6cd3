"""Issue 21, item 5: a job run on the user's input prints, logs and plots only released values and
public parameters; exact figures of the input (truth, bias, error, dead-letter counts,
non-private baselines or accuracy) need ``--evaluate`` (NOT private), which is on by default only
on the embedded demo data (``pipelines.common.evaluation``).

Each job runs in a subprocess (stdout and the logs on stderr) on a small input whose exact
figures are planted distinctive numbers (e.g. 257 true rides, 93 dead letters): without
``--evaluate`` none of them appears in the output, in the plot's text or in any file other than
the releases and dead letters, and a plot draws no series computed from the raw input; with
``--evaluate`` they appear.
"""

import argparse
import os
import re
import subprocess
import sys

import fastavro
import pytest

from pipelines.boost_queries import options as boost_options
from pipelines.boost_queries import sample_data as boost_data
from pipelines.common import evaluation
from pipelines.common.plots import series_in_png
from pipelines.continual_counts import options as counts_options
from pipelines.continual_counts.events import EVENT_SCHEMA
from pipelines.continual_counts.events import event_to_avro
from pipelines.erm_digits import data as erm_data
from pipelines.erm_digits import options as erm_options
from pipelines.pmwg_queries import options as pmwg_options
from pipelines.pmwg_queries import sample_data as pmwg_data
from tests.pipelines.test_continual_counts import KEYS
from tests.pipelines.test_continual_counts import START_S
from tests.pipelines.test_continual_counts import _event

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, PYTHONPATH=REPO, BDP_TEST_NOISE_KEY='0123456789abcdef' * 4,
           MPLBACKEND='Agg')
KEY_ARGS = ('--noise_key', 'env:BDP_TEST_NOISE_KEY', '--stream_id', 'tests', '--ledger', 'none')
_LOG_PREFIX = re.compile(r'^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ ', re.MULTILINE)
_INTEGER = re.compile(r'(?<![\d.])\d+(?![\d.])')


def _run_job(module, tmp_path, *argv):
    proc = subprocess.run([sys.executable, '-m', f'pipelines.{module}', *KEY_ARGS, *argv],
                          cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc


def _integers(text, tmp_path):
    """The integer tokens of ``text`` (not parts of decimals), without the temporary paths and
    the log lines' time stamps (which could contain anything)."""
    text = _LOG_PREFIX.sub('', text.replace(str(tmp_path), '<tmp>'))
    return {int(t) for t in _INTEGER.findall(text)}


def _png_text(data: bytes) -> str:
    """Every tEXt chunk of a PNG (the plot's title is drawn, not stored; the series are)."""
    return '\n'.join(series_in_png(data))


def _other_files(directory, outputs=('releases', 'dead_letters', 'answers', 'refusals',
                                     'ledger', 'blocks', 'models')):
    """Files under ``directory`` (at any depth) that are not release or dead-letter Avro files."""
    found = []
    for root, _, names in os.walk(directory):
        for name in names:
            if not (root == str(directory) and name.endswith('.avro')
                    and name.startswith(outputs)):
                found.append(os.path.relpath(os.path.join(root, name), directory))
    return sorted(found)


def _assert_private(proc, tmp_path, planted, absent_phrases):
    text = proc.stdout + proc.stderr
    assert 'evaluation off' in proc.stdout, proc.stdout
    leaked = planted & _integers(text, tmp_path)
    assert not leaked, (leaked, text)
    for phrase in absent_phrases:
        assert phrase not in text, (phrase, text)


def _assert_evaluated(proc, tmp_path, planted):
    assert 'evaluation on: --evaluate' in proc.stdout, proc.stdout
    shown = _integers(proc.stdout, tmp_path)
    assert planted <= shown, (planted - shown, proc.stdout)


# -- the rule --------------------------------------------------------------------------------------

@pytest.mark.parametrize('demo, flag, expected', [
    (True, None, evaluation.DEMO), (True, True, evaluation.FLAG), (True, False, evaluation.OFF),
    (False, None, evaluation.OFF), (False, True, evaluation.FLAG),
    (False, False, evaluation.OFF)])
def test_the_rule(demo, flag, expected):
    args = argparse.Namespace(evaluate=flag)
    assert evaluation.resolve(args, demo_data=demo) == expected
    assert args.evaluate is (expected != evaluation.OFF)
    assert evaluation.banner(args).startswith(
        {evaluation.DEMO: 'evaluation on: demo data', evaluation.FLAG: 'evaluation on: --evaluate',
         evaluation.OFF: 'evaluation off'}[expected])


@pytest.mark.parametrize('options, user_input', [
    (counts_options, ['--input_avro=x.avro']),
    (pmwg_options, ['--data_avro=x.avro', '--start=1717394400', '--end=1717480800']),
    (boost_options, ['--data_avro=x.avro']),
    (erm_options, ['--input_avro=x.avro', '--end_seconds=1700000480'])])
def test_every_job_names_evaluate_as_not_private_and_applies_the_rule(options, user_input):
    help_text = ' '.join(options.build_parser().format_help().split())
    assert '--evaluate NOT PRIVATE' in help_text and '--no_evaluate' in help_text
    assert options.parse_args([])[0].evaluation == evaluation.DEMO
    assert options.parse_args(['--no_evaluate'])[0].evaluation == evaluation.OFF
    assert options.parse_args(user_input)[0].evaluation == evaluation.OFF
    assert options.parse_args(user_input + ['--evaluate'])[0].evaluation == evaluation.FLAG
    with pytest.raises(SystemExit):
        options.parse_args(['--evaluate', '--no_evaluate'])


# -- continual_counts ------------------------------------------------------------------------------

#: Planted: 214 rides kept, 43 removed by bounding (a second ride of a rider at the same station
#: and step: m = 1), 31 of an unknown station, 19 unparseable: 257 true rides, 93 dead letters,
#: 307 input records.
COUNTS_PLANTED = {257, 214, 93, 43, 307}


def _rides(path):
    events = [_event(f'r{i}', KEYS[i % 3], 3600 * (i % 6) + 10) for i in range(214)]
    events += [_event(f'r{i}', KEYS[i % 3], 3600 * (i % 6) + 20) for i in range(43)]
    events += [_event(f'z{i}', 'Z', 3600 * (i % 6) + 10) for i in range(31)]
    records = [event_to_avro(e) for e in events]
    records += [{**records[i], 'event_time_micros': -5 - i} for i in range(19)]
    with open(path, 'wb') as f:
        fastavro.writer(f, EVENT_SCHEMA, records)


@pytest.mark.pipeline
def test_continual_counts_prints_and_plots_no_exact_figure_without_evaluate(tmp_path):
    _rides(tmp_path / 'rides.avro')
    common = ['--input_avro=rides.avro', f'--public_keys={",".join(KEYS)}', f'--start={START_S}',
              '--horizon_steps=6']
    private = _run_job('continual_counts', tmp_path, *common, '--output_avro=private')
    _assert_private(private, tmp_path, COUNTS_PLANTED,
                    ('true rides', 'after bounding', 'error vs', 'input events read',
                     'BoundContributions'))
    assert 'dead letters        : written to private/dead_letters' in private.stdout
    out = tmp_path / 'private'
    assert _other_files(out) == ['releases.png']
    png = (out / 'releases.png').read_bytes()
    assert series_in_png(png) == ['released (DP)', 'released ± 2 noise std']
    assert not COUNTS_PLANTED & _integers(_png_text(png), tmp_path)

    evaluated = _run_job('continual_counts', tmp_path, *common, '--output_avro=evaluated',
                     '--evaluate')
    _assert_evaluated(evaluated, tmp_path, {257, 214, 93, 43})
    assert 'BoundContributions: 43' in evaluated.stdout
    assert 'true, all rides' in series_in_png(
        (tmp_path / 'evaluated' / 'releases.png').read_bytes())


# -- pmwg_queries ----------------------------------------------------------------------------------

PMWG_DEAD = 137                                        # planted malformed trips


@pytest.mark.pipeline
def test_pmwg_queries_prints_no_exact_figure_without_evaluate(tmp_path):
    trips = [t for t in pmwg_data.generate_trips() if not t['trip_id'].startswith('bad')][:1500]
    for j in range(PMWG_DEAD):
        trips.insert(10 * j + 5, dict(trips[10 * j], trip_id=f'bad{j}', duration_seconds=-5.0))
    after = trips[1400]['event_time_micros']             # answered: past the initial size
    queries = [q for q in pmwg_data.generate_queries()
               if q['id'] != 'q-bad-range' and q['event_time_micros'] > after][:60]
    with open(tmp_path / 'trips.avro', 'wb') as f:
        fastavro.writer(f, pmwg_data.TRIP_SCHEMA, trips)
    with open(tmp_path / 'queries.avro', 'wb') as f:
        fastavro.writer(f, pmwg_data.query_record_schema(), queries)
    # Avro (batch) input runs on the public step clock: its start and end cover the data.
    last = max(r['event_time_micros'] for r in trips + queries) // 1_000_000
    common = ['--data_avro=trips.avro', '--query_avro=queries.avro',
              f'--start={int(pmwg_data.SAMPLE_START.timestamp())}', f'--end={last + 3600}']
    private = _run_job('pmwg_queries', tmp_path, *common, '--output_avro=private')
    _assert_private(private, tmp_path, {PMWG_DEAD}, ('error (easy + hard)', 'uniform baseline'))
    assert 'answers by status' in private.stdout
    assert 'dead letters        : written to private/dead_letters' in private.stdout
    assert _other_files(tmp_path / 'private') == []

    evaluated = _run_job('pmwg_queries', tmp_path, *common, '--output_avro=evaluated', '--evaluate')
    _assert_evaluated(evaluated, tmp_path, {PMWG_DEAD})
    assert 'error (easy + hard)' in evaluated.stdout and 'uniform baseline' in evaluated.stdout


# -- boost_queries ---------------------------------------------------------------------------------

BOOST_DEAD = 123                                       # planted rows outside the domain


@pytest.mark.pipeline
def test_boost_queries_prints_and_plots_no_exact_figure_without_evaluate(tmp_path):
    from beam_dp.io.boost import BOOST_QUERY_SCHEMA   # pylint: disable=import-outside-toplevel
    end = (boost_data.START_SECONDS + 2 * boost_data.BLOCK_SECONDS) * 10 ** 6
    rows = [r for r in boost_data.job_rows() if r['event_time_micros'] < end][:3000]
    rows += [{'dataset': 'covid', 'event_time_micros': rows[j]['event_time_micros'],
              'attributes': [9, 9, 9, 9]} for j in range(BOOST_DEAD)]
    with open(tmp_path / 'rows.avro', 'wb') as f:
        fastavro.writer(f, fastavro.parse_schema(boost_data.ROW_SCHEMA), rows)
    with open(tmp_path / 'queries.avro', 'wb') as f:
        fastavro.writer(f, fastavro.parse_schema(dict(BOOST_QUERY_SCHEMA)),
                        [q for _, q in boost_data.job_queries(count=30)])
    common = ['--data_avro=rows.avro', '--query_avro=queries.avro', '--blocks=2']
    private = _run_job('boost_queries', tmp_path, *common, '--output_avro=private')
    _assert_private(private, tmp_path, {BOOST_DEAD}, ('vanilla_pmw', 'exact_cache'))
    assert 'budget by path' in private.stdout and 'budget by block' in private.stdout
    assert 'dead letters: written to private/dead_letters' in private.stdout
    assert _other_files(tmp_path / 'private') == ['budget_vs_queries.png']
    png = (tmp_path / 'private' / 'budget_vs_queries.png').read_bytes()
    assert series_in_png(png) == ['tree_pmw_bypass (job)']

    evaluated = _run_job('boost_queries', tmp_path, *common, '--output_avro=evaluated', '--evaluate')
    _assert_evaluated(evaluated, tmp_path, {BOOST_DEAD})
    assert 'vanilla_pmw' in series_in_png(
        (tmp_path / 'evaluated' / 'budget_vs_queries.png').read_bytes())


# -- erm_digits ------------------------------------------------------------------------------------

ERM_BAD_LABELS, ERM_UNKNOWN = 41, 8                    # 3 × 41 + 8 = 131 dead letters
ERM_DEAD = 3 * ERM_BAD_LABELS + ERM_UNKNOWN


@pytest.mark.pipeline
def test_erm_digits_prints_no_accuracy_or_count_without_evaluate(tmp_path):
    ds = erm_data.DATASETS[1]
    records = erm_data.records_of(ds, erm_data.embedded(ds))[:3 * ds.records_per_block]
    records += [dict(records[j], label=99) for j in range(ERM_BAD_LABELS)]
    records += [dict(records[j], stream='other') for j in range(ERM_UNKNOWN)]
    with open(tmp_path / 'examples.avro', 'wb') as f:
        fastavro.writer(f, erm_data.INPUT_SCHEMA, records)
    common = ['--input_avro=examples.avro',
              f'--end_seconds={erm_data.START_SECONDS + 8 * erm_data.STEP_SECONDS}']
    private = _run_job('erm_digits', tmp_path, *common, '--output_avro=private')
    _assert_private(private, tmp_path, {ERM_DEAD}, ('accuracy', 'non-private'))
    assert 'drift / Continual: published models: 5 (blocks 3..7)' in private.stdout
    assert 'dead letters      : written to private/dead_letters' in private.stdout
    assert _other_files(tmp_path / 'private') == []

    evaluated = _run_job('erm_digits', tmp_path, *common, '--output_avro=evaluated', '--evaluate')
    _assert_evaluated(evaluated, tmp_path, {ERM_DEAD})
    assert 'accuracy on your input records' in evaluated.stdout
    assert 'DP-FTRL (ε-DP)' in series_in_png(
        (tmp_path / 'evaluated' / 'accuracy.png').read_bytes())
