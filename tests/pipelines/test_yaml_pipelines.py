"""The Beam YAML provider: pipelines/yaml/page_views.yaml run with ``python -m
apache_beam.yaml.main`` on the DirectRunner's batch runner (FnApiRunner) and on Prism releases
exactly what the Python job (pipelines/yaml/page_views.py, by field names and by callables)
releases under the same noise key; a pipeline that over-spends its budget, or declares none, is
refused at construction; providers.yaml exposes every public transform."""

import glob
import json
import os
import pathlib
import subprocess
import sys

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from beam_dp.errors import BudgetExceededError
from beam_dp.errors import InvalidParamsError
from beam_dp.transforms import shell
from beam_dp.transforms import yaml_provider
from pipelines.yaml import page_views
from tests.runners import prism_options
from tests.runners import requires_prism

ROOT = pathlib.Path(__file__).resolve().parents[2]
PIPELINE = ROOT / 'pipelines' / 'yaml' / 'page_views.yaml'
KEY = '5f3c0a9e2b7d41c68e0f1a2b3c4d5e6f'       # a test noise key (never a production one)

pytestmark = pytest.mark.pipeline


@pytest.fixture(scope='module')
def example(tmp_path_factory):
    path = tmp_path_factory.mktemp('yaml') / 'views.avro'
    page_views.write_example_input(str(path))
    return path


def _releases(prefix):
    """{(output, key, step): (value rounded to 6 digits, metric, mechanism)} of the JSON lines
    ``<prefix>views*`` and ``<prefix>seconds*``."""
    out = {}
    for name in ('views', 'seconds'):
        files = glob.glob(str(prefix) + name + '*')
        assert files, prefix
        for path in files:
            with open(path, encoding='utf-8') as f:
                for line in f:
                    r = json.loads(line)
                    out[(name, r['key'], r['step'])] = (round(r['value'], 6), r['metric'],
                                                        r['mechanism'])
    return out


def _dead(prefix):
    rows = []
    for path in glob.glob(str(prefix) + 'dead_letters*'):
        with open(path, encoding='utf-8') as f:
            rows += [json.loads(line) for line in f]
    return sorted((r['transform'], r['stage'], r['reason']) for r in rows)


def _run_yaml(example, output, runner_args):
    env = {**os.environ, 'PYTHONPATH': str(ROOT), 'BEAM_DP_NOISE_KEY': KEY}
    variables = json.dumps({'input': str(example), 'output': str(output) + '/'})
    result = subprocess.run(
        [sys.executable, '-m', 'apache_beam.yaml.main', f'--yaml_pipeline_file={PIPELINE}',
         f'--jinja_variables={variables}', *runner_args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    return str(output) + '/'


@pytest.fixture(scope='module')
def python_releases(example, tmp_path_factory):
    """The Python job's releases, by field names and by callables."""
    os.environ['BEAM_DP_NOISE_KEY'] = KEY
    try:
        out = {}
        for variant in ('fields', 'callables'):
            prefix = str(tmp_path_factory.mktemp(variant)) + '/'
            page_views.run(str(example), prefix, callables=variant == 'callables')
            out[variant] = (_releases(prefix), _dead(prefix))
    finally:
        del os.environ['BEAM_DP_NOISE_KEY']
    return out


def test_python_by_fields_equals_by_callables(python_releases):
    fields, callables = python_releases['fields'], python_releases['callables']
    assert fields == callables
    assert len(fields[0]) == 2 * 3 * 5          # two transforms x 3 pages x 5 steps
    assert fields[1] == [('Seconds', 'ExtractAndValidate', "key 'checkout' is not in the "
                                                            "public key set"),
                         ('Views', 'ExtractAndValidate', "key 'checkout' is not in the "
                                                          "public key set")]


def test_yaml_on_the_direct_runner_equals_python(example, tmp_path, python_releases):
    """The DirectRunner's batch runner (what ``--runner=DirectRunner`` picks for a bounded
    pipeline, named so that it never tries to download Prism: tests/runners.py)."""
    prefix = _run_yaml(example, tmp_path, ['--runner=FnApiRunner'])
    assert (_releases(prefix), _dead(prefix)) == python_releases['fields']


@pytest.mark.prism
@requires_prism
def test_yaml_on_prism_equals_python(example, tmp_path, python_releases):
    prefix = _run_yaml(example, tmp_path, prism_options(streaming=False))
    assert (_releases(prefix), _dead(prefix)) == python_releases['fields']


def test_a_different_noise_key_gives_different_releases(example, tmp_path, python_releases):
    """The equality above is not vacuous: the releases are noisy and keyed."""
    env_key = KEY[::-1]
    env = {**os.environ, 'PYTHONPATH': str(ROOT), 'BEAM_DP_NOISE_KEY': env_key}
    variables = json.dumps({'input': str(example), 'output': str(tmp_path) + '/'})
    subprocess.run([sys.executable, '-m', 'apache_beam.yaml.main',
                    f'--yaml_pipeline_file={PIPELINE}', f'--jinja_variables={variables}',
                    '--runner=FnApiRunner'], cwd=ROOT, env=env, capture_output=True,
                   timeout=900, check=True)
    assert _releases(str(tmp_path) + '/') != python_releases['fields'][0]


# -- construction: the pipeline budget -------------------------------------------------------------


def _yaml(epsilon_option, budgets):
    providers = ROOT / 'beam_dp' / 'transforms' / 'providers.yaml'
    option = f'options:\n  beam_dp_epsilon: {epsilon_option}\n' if epsilon_option else ''
    transforms = ''.join(f"""
    - type: ContinualCountPerKey
      name: {name}
      input: Create
      config:
        public_keys: [a]
        key_field: k
        start: 0
        step: 1
        end: 3
        budget: {{epsilon: {eps}}}
""" for name, eps in budgets)
    return f"""
providers:
  - include: {providers}
{option}pipeline:
  transforms:
    - type: Create
      config:
        elements: [{{k: a}}]
{transforms}"""


def _construct(text):
    from apache_beam.yaml import yaml_transform  # pylint: disable=import-outside-toplevel
    import yaml  # pylint: disable=import-outside-toplevel
    options = yaml.safe_load(text).get('options', {})
    p = beam.Pipeline(runner='FnApiRunner', options=PipelineOptions(**options))
    yaml_transform.expand_pipeline(p, text)
    return p


def _cause(exc, kind):
    while exc is not None and not isinstance(exc, kind):
        exc = exc.__cause__ or exc.__context__
    return exc


def test_over_spending_yaml_pipeline_is_refused_at_construction():
    with pytest.raises(Exception) as info:
        _construct(_yaml(1.5, [('Views', 1.0), ('Clicks', 1.0)]))
    refused = _cause(info.value, BudgetExceededError)
    assert refused is not None, info.value
    message = str(refused)
    assert "ContinualCountPerKey 'ContinualCountPerKey' asks for ε=1" not in message
    assert 'Clicks' in message and "'Views' ε=1" in message and 'ε=1.5' in message, message


def test_yaml_pipeline_within_its_budget_builds():
    _construct(_yaml(2.0, [('Views', 1.0), ('Clicks', 1.0)]))


def test_yaml_pipeline_without_a_budget_is_refused():
    with pytest.raises(Exception) as info:
        _construct(_yaml(None, [('Views', 1.0)]))
    refused = _cause(info.value, InvalidParamsError)
    assert refused is not None and 'beam_dp_epsilon' in str(refused), info.value


def test_yaml_refuses_a_test_seed():
    with pytest.raises(InvalidParamsError, match='testing_seed cannot be set in a YAML'):
        yaml_provider.TRANSFORMS['ContinualCountPerKey'](
            public_keys=['a'], start=0, step=1, end=3, budget={'epsilon': 1.0}, testing_seed=1)


def test_python_pipeline_budget_option_shares_one_accountant():
    """The same options in a Python pipeline: transforms without an accountant of their own are
    charged to the pipeline's."""
    import beam_dp  # pylint: disable=import-outside-toplevel
    p = beam.Pipeline(runner='FnApiRunner', options=PipelineOptions(beam_dp_epsilon=1.5))
    records = p | beam.Create([('a',)])
    _ = records | 'A' >> beam_dp.ContinualCountPerKey(
        public_keys=['a'], start=0, step=1, end=3, budget=beam_dp.PrivacyBudget(epsilon=1.0))
    with pytest.raises(BudgetExceededError, match="'A' ε=1"):
        _ = records | 'B' >> beam_dp.ContinualCountPerKey(
            public_keys=['a'], start=0, step=1, end=3,
            budget=beam_dp.PrivacyBudget(epsilon=1.0))
    assert shell.pipeline_accountant(p).spent().epsilon == pytest.approx(1.0)


# -- the provider ----------------------------------------------------------------------------------


def test_providers_yaml_is_generated_and_lists_every_public_transform():
    assert (ROOT / 'beam_dp' / 'transforms' / 'providers.yaml').read_text(
        encoding='utf-8') == yaml_provider.providers_yaml(), (
        'regenerate: python -m beam_dp.transforms.yaml_provider --write')
    from tests import families  # pylint: disable=import-outside-toplevel
    public = {name.split('/')[0] for name in families.FAMILIES}
    assert public <= set(yaml_provider.TRANSFORMS)


def test_every_yaml_factory_takes_field_names_not_callables():
    import inspect  # pylint: disable=import-outside-toplevel
    for name, factory in yaml_provider.TRANSFORMS.items():
        params = inspect.signature(factory).parameters
        assert not [p for p in params if p.endswith('_fn')], name
        assert 'timestamp_field' in params, name


def test_yaml_outputs_are_schemad_rows_for_growing_databases_too():
    """``QueryAnswer`` (a validated dataclass, no RowCoder in Python) reaches YAML as
    ``QueryAnswerRow``; a growing database's releases are typed ``EpochReleaseRecord``."""
    p = beam.Pipeline(runner='FnApiRunner', options=PipelineOptions(beam_dp_epsilon=5.0))
    transform = yaml_provider.TRANSFORMS['WindowedPMWG'](
        budget={'epsilon': 1.0}, alpha=0.3, n=30, domain_size=4, domain_field='index',
        **_CLOCK)
    out = {'data': p | 'D' >> beam.Create([{'index': 1}]),
           'queries': p | 'Q' >> beam.Create([{'query_id': 'q', 'lo': 0, 'hi': 2,
                                                'domain_size': 4}])} | transform
    assert set(out) == {'answers', 'refusals', 'releases', 'dead_letter'}
    for name, pcoll in out.items():
        coder = beam.coders.registry.get_coder(pcoll.element_type)
        assert isinstance(coder, beam.coders.RowCoder), (name, pcoll.element_type)


_CLOCK = {'start': 0, 'step': 1, 'end': 10}
_USER = {'privacy_unit_field': 'unit', 'max_keys_per_unit': 2, 'max_contributions_per_step': 1,
         'max_steps_per_unit': 5}
#: A YAML config (plain data, field names) of every public transform.
YAML_CONFIGS = {
    'ContinualCountPerKey': dict(public_keys=['a'], key_field='key', budget={'epsilon': 1.0},
                                 privacy_unit=_USER, **_CLOCK),
    'ContinualSumPerKey': dict(public_keys=['a'], key_field='key', value_field='value',
                               lower=0, upper=5, budget={'epsilon': 1.0}, **_CLOCK),
    'ContinualHistogramPerKey': dict(public_keys=['a'], key_field='key', bin_field='bin',
                                     bins=['x', 'y'], budget={'epsilon': 1.0}, **_CLOCK),
    'ContinualMeanPerKey': dict(public_keys=['a'], key_field='key', value_field='value',
                                lower=0, upper=5, budget={'epsilon': 1.0}, privacy_unit=_USER,
                                **_CLOCK),
    'ContinualVariancePerKey': dict(public_keys=['a'], key_field='key', value_field='value',
                                    lower=0, upper=5, budget={'epsilon': 1.0}, **_CLOCK),
    'ContinualDistinctCountPerKey': dict(public_keys=['a'], key_field='key',
                                         budget={'epsilon': 1.0}, privacy_unit=_USER, **_CLOCK),
    'ContinualQuantilesPerKey': dict(public_keys=['a'], key_field='key', value_field='value',
                                     lower=0, upper=5, depth=3, budget={'epsilon': 1.0},
                                     **_CLOCK),
    'SparseContinualCountPerKey': dict(public_keys=['a'], key_field='key',
                                       budget={'epsilon': 1.0}, **_CLOCK),
    'SparseContinualHistogramPerKey': dict(public_keys=['a'], key_field='key', bin_field='bin',
                                           bins=['x', 'y'], budget={'epsilon': 1.0}, **_CLOCK),
    'DynamicCountPerKey': dict(public_keys=['a'], key_field='key', record_id_field='id',
                               op_field='op', budget={'epsilon': 1.0}, **_CLOCK),
    'DynamicHistogramPerKey': dict(public_keys=['a'], key_field='key', record_id_field='id',
                                   op_field='op', bin_field='bin', bins=['x', 'y'],
                                   budget={'epsilon': 1.0}, **_CLOCK),
    'DynamicLinearQueriesPerKey': dict(public_keys=['a'], key_field='key',
                                       record_id_field='id', op_field='op',
                                       value_field='element', domain_size=4,
                                       queries={'ranges': [[0, 1], [0, 2]]},
                                       static_mechanism='laplace_histogram',
                                       budget={'epsilon': 1.0}, **_CLOCK),
    'SelectKeys': dict(key_field='key', budget={'epsilon': 1.0, 'delta': 1e-6},
                       privacy_unit={**_USER, 'max_steps_per_unit': 1}),
    'ChooseContributionBounds': dict(key_field='key', privacy_unit_field='unit',
                                     budget={'epsilon': 1.0}, release_budget={'epsilon': 1.0},
                                     horizon=10, start=0, step=1),
    'WarmUpContinualCountPerKey': dict(public_keys=['a'], key_field='key',
                                       privacy_unit_field='unit', budget={'epsilon': 1.0},
                                       warm_up_steps=3, **_CLOCK),
    'ContinualERM': dict(public_streams=['a'], num_classes=2, feature_dim=1, records_per_block=2,
                         mu=0.5, blocks_per_base=2, passes=1, budget={'epsilon': 1.0},
                         stream_field='stream', features_field='features',
                         label_field='label', **_CLOCK),
    'SlidingWindowERM': dict(public_streams=['a'], num_classes=2, feature_dim=1,
                             records_per_block=2, mu=0.5, levels=2, passes=1,
                             budget={'epsilon': 1.0}, stream_field='stream',
                             features_field='features', label_field='label', **_CLOCK),
    'BoostQueries': dict(public_datasets=['d'], shape=[2, 4], budget={'epsilon': 1.0},
                         dataset_field='dataset', attributes_field='attributes', **_CLOCK),
    'WindowedPMWG': dict(budget={'epsilon': 1.0}, alpha=0.3, n=30, domain_size=4,
                         domain_field='index', **_CLOCK),
    'BBSchedulerQueries': dict(mechanism={'type': 'laplace_query_vector',
                                          'ranges': [[0, 1], [0, 2]]},
                               budget={'epsilon': 1.0}, beta=0.05, n=100, domain_size=4,
                               domain_field='index', **_CLOCK),
    'BBImproverQueries': dict(mechanism={'type': 'laplace_query_vector',
                                         'ranges': [[0, 1], [0, 2]]},
                              budget={'epsilon': 0.9, 'delta': 1e-6}, beta=0.05, n=50,
                              domain_size=4, domain_field='index', **_CLOCK),
    'ERMGQueries': dict(points=[[0.6, 0.8], [0.6, -0.8], [-0.6, 0.8], [-0.6, -0.8]],
                        labels=[1, 1, 0, 0], reg=0.1, budget={'epsilon': 0.9, 'delta': 1e-6},
                        beta=0.05, n=30, domain_field='index', **_CLOCK),
    'SmallDBGQueries': dict(queries={'ranges': [[0, 1], [0, 2]]}, budget={'epsilon': 10.0},
                            beta=0.05, n=100, domain_size=4, domain_field='index', **_CLOCK),
}
_GROWING = ('BoostQueries', 'WindowedPMWG', 'BBSchedulerQueries', 'BBImproverQueries',
            'SmallDBGQueries', 'ERMGQueries')


@pytest.mark.parametrize('name', sorted(yaml_provider.TRANSFORMS))
def test_every_transform_builds_from_yaml_config(name):
    """Each public transform from plain YAML data (field names, mappings), applied in a
    pipeline with a budget: all outputs named, schema'd rows."""
    assert name in YAML_CONFIGS, f'add a YAML config of {name} here'
    p = beam.Pipeline(runner='FnApiRunner', options=PipelineOptions(beam_dp_epsilon=10.0,
                                                                    beam_dp_delta=1e-5))
    transform = yaml_provider.TRANSFORMS[name](**YAML_CONFIGS[name])
    rows = p | 'Rows' >> beam.Create([{'key': 'a'}])
    inputs = {'data': rows, 'queries': p | 'Q' >> beam.Create([{'query_id': 'q'}])} \
        if name in _GROWING else {'input': rows}
    out = inputs | transform
    assert 'dead_letter' in out
    for output, pcoll in out.items():
        coder = beam.coders.registry.get_coder(pcoll.element_type)
        if output != 'keys':                 # SelectKeys' selected keys are strings
            assert isinstance(coder, beam.coders.RowCoder), (output, pcoll.element_type)
