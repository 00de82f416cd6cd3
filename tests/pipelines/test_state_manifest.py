"""Dataflow in-place updates: every job's stateful transforms (full names, state cells and their
coders, timer families) match pipelines/<job>/state_manifest.json, so a change that renames a
stateful transform or changes its state without a transform-name mapping fails here, not on a
running job's ``--update``."""

import copy

import apache_beam as beam
import pytest

from beam_dp import ContinualCountPerKey
from beam_dp import PrivacyBudget
from pipelines.common import state_manifest as sm

pytestmark = pytest.mark.pipeline


@pytest.mark.parametrize('job', sorted(sm.JOB_ARGS))
def test_job_graph_matches_its_state_manifest(job):
    import json
    recorded = json.loads(sm.manifest_path(job).read_text())
    current = sm.build_manifest(job)
    assert recorded, f'{job}: the job has stateful transforms; its manifest cannot be empty'
    problems = sm.compare(recorded, current, sm.load_mapping(job))
    assert not problems, (
        '\n'.join(problems) + '\nIf the change is intended: map renamed transforms in '
        f'pipelines/{job}/transform_name_mapping.json, document what a running job must do, and '
        'regenerate with `python -m pipelines.common.state_manifest --write`.')


def _graph(label):
    pipeline = beam.Pipeline(options=beam.options.pipeline_options.PipelineOptions(['--streaming']))
    (pipeline | beam.Create([('a', 1)])
     | label >> ContinualCountPerKey(public_keys=['a'], budget=PrivacyBudget(epsilon=1.0),
                                     start=0, step=1, end=8))
    return sm.manifest_of(pipeline)


def test_a_renamed_stateful_transform_is_caught_and_a_mapping_explains_it():
    old, new = _graph('Counts'), _graph('CountsRenamed')
    assert old and all(name.startswith('Counts/') for name in old)
    problems = sm.compare(old, new)
    assert problems and all('not in the new graph' in p for p in problems)
    mapping = {name: name.replace('Counts/', 'CountsRenamed/', 1) for name in old}
    assert sm.compare(old, new, mapping) == []
    assert sm.compare(old, old) == []


def test_a_changed_state_cell_or_timer_is_caught():
    old = _graph('Counts')
    name = next(iter(old))
    changed = copy.deepcopy(old)
    cell = next(iter(changed[name]['state']))
    changed[name]['state'][cell] = 'bag[varint]'
    assert any('its state changed' in p for p in sm.compare(old, changed))
    changed = copy.deepcopy(old)
    changed[name]['timers']['new-timer'] = 'EVENT_TIME'
    assert any('its timers changed' in p for p in sm.compare(old, changed))
    # A new stateful transform (starting empty) is not a problem.
    extra = copy.deepcopy(old)
    extra['Other/Stateful'] = old[name]
    assert sm.compare(old, extra) == []


def test_the_cli_check_passes_on_the_committed_manifests(capsys):
    assert sm.main(['--check', '--job', 'continual_counts']) == 0
