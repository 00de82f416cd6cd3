"""Beam YAML provider of every public beam_dp transform, configured by field names.

``beam_dp/transforms/providers.yaml`` (shipped in the package) is a ``type: python`` provider
whose transforms are the factories of this module, one per public transform, named like it. A
YAML pipeline includes it (``providers: [{include: <its path>}]``; print the path with
``python -m beam_dp.transforms.yaml_provider --path``) and configures each transform with what a
YAML file can hold: field names instead of callables (``key_field``, ``value_field``,
``privacy_unit`` as a mapping with ``privacy_unit_field``, ...), budgets as mappings
(``budget: {epsilon: 1.0}``), private keys as ``keys: {budget: {...}, num_shards: 2}``, the
noise key as ``noise_key: {reference: 'env:VAR', stream_id: '<stream>'}``.

**The pipeline budget.** A YAML pipeline that applies beam_dp transforms declares its total
budget in its ``options`` (``beam_dp_epsilon``, ``beam_dp_delta`` or ``beam_dp_rho``:
``BeamDpOptions``); every beam_dp transform of the pipeline is charged to ONE accountant of that
budget when the pipeline is constructed, before any data is read: a pipeline whose transforms
over-spend it is refused (``BudgetExceededError`` naming each transform and its cost). The same
options work for a Python pipeline (``shell.pipeline_accountant``); a YAML pipeline without them
is refused.

Outputs: each transform's outputs by name (``Count.releases``, ``Count.dead_letter``, ...; a
YAML ``input:`` names one of them), schema'd rows (``beam_dp.io.coders``: the records'
RowCoders).
"""

import datetime
import functools
import inspect
import os
import sys
import typing
from typing import Any, Dict

import apache_beam as beam

from beam_dp import noise
from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.private_keys import PrivateKeys
from beam_dp.errors import InvalidParamsError
from beam_dp.io.boost import BoostQueryRecord
from beam_dp.io.epochs import EpochReleaseRecord
from beam_dp.io.queries import QueryAnswer
from beam_dp.mechanisms import black_boxes
from beam_dp.privacy_unit import EventLevel
from beam_dp.privacy_unit import UserLevel
from beam_dp.queries import LinearQuery
from beam_dp.transforms import shell

__all__ = ['PROVIDERS_PATH', 'QueryAnswerRow', 'TRANSFORMS', 'providers_yaml', 'yaml_factory']

#: The providers file shipped next to this module.
PROVIDERS_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'providers.yaml')

#: Arguments a YAML file cannot give (callables, objects) or must not (a test seed; the
#: accountant is the pipeline's).
_NOT_IN_YAML = ('accountant', 'testing_seed')


def _public_transforms():
    """The public beam_dp transforms (``beam_dp.__all__``) that release under a budget."""
    from beam_dp import transforms  # pylint: disable=import-outside-toplevel,cyclic-import
    out = {}
    for name in sorted(transforms.__all__):
        obj = getattr(transforms, name)
        if isinstance(obj, type) and issubclass(obj, shell.ShellTransform):
            out[name] = obj
    return out


def _budget(owner, name, value):
    if isinstance(value, PrivacyBudget) or value is None:
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return PrivacyBudget(epsilon=float(value))
    if isinstance(value, dict):
        return PrivacyBudget(**value)
    raise InvalidParamsError(f'{owner}: {name} must be a mapping such as {{epsilon: 1.0}}, got '
                             f'{value!r}.')


def _time(owner, name, value):
    if isinstance(value, str):
        try:
            parsed = datetime.datetime.fromisoformat(value.replace('Z', '+00:00'))
        except ValueError:
            raise InvalidParamsError(f'{owner}: {name} must be seconds since the epoch or an ISO '
                                     f'time with a zone, got {value!r}.') from None
        return parsed
    return value


def _privacy_unit(owner, value):
    if value is None or not isinstance(value, (dict, str)):
        return value
    if value in ('event', {'level': 'event'}):
        return EventLevel()
    if isinstance(value, dict):
        return UserLevel(**{k: v for k, v in value.items() if k != 'level'})
    raise InvalidParamsError(f"{owner}: privacy_unit must be 'event' or a mapping of UserLevel's "
                             f'arguments (privacy_unit_field, max_keys_per_unit, ...), got '
                             f'{value!r}.')


def _mechanism(owner, value, config):
    """BB's black box as a mapping: ``{type: laplace_query_vector, ranges: [[lo, hi], ...]}``
    (range queries over the domain)."""
    if not isinstance(value, dict):
        return value
    kind = value.get('type')
    boxes = {'laplace_query_vector': black_boxes.LaplaceQueryVector}
    if kind not in boxes:
        raise InvalidParamsError(f'{owner}: mechanism.type must be one of {sorted(boxes)}, got '
                                 f'{kind!r}.')
    domain = config.get('domain_size')
    queries = tuple(LinearQuery.range(domain, lo, hi) for lo, hi in value.get('ranges', ()))
    return boxes[kind](queries)


def _queries(owner, value, config):
    """A linear-query class as a mapping ``{ranges: [[lo, hi], ...]}`` (range queries over the
    domain ``domain_size``; ``DynamicLinearQueriesPerKey``)."""
    if not isinstance(value, dict):
        return value
    if set(value) != {'ranges'}:
        raise InvalidParamsError(f'{owner}: queries must be {{ranges: [[lo, hi], ...]}}, got '
                                 f'{value!r:.80}.')
    domain = config.get('domain_size')
    return tuple(LinearQuery.range(domain, lo, hi) for lo, hi in value['ranges'])


def _plain(value):
    """A config value as plain data: a Beam Row or NamedTuple (a mapping sent by another SDK,
    e.g. Java's ``withKwarg("budget", Row...)``) as a dict, recursively."""
    if hasattr(value, '_asdict'):
        return {k: _plain(v) for k, v in value._asdict().items()}
    if isinstance(value, beam.Row):
        return {k: _plain(v) for k, v in vars(value).items()}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _convert(owner: str, config: Dict[str, Any]) -> Dict[str, Any]:
    """YAML (or cross-language) config → constructor arguments."""
    out = {name: _plain(value) for name, value in config.items()}
    for name in _NOT_IN_YAML:
        if name in out:
            raise InvalidParamsError(f'{owner}: {name} cannot be set in a YAML pipeline (the '
                                     f'budget is the pipeline\'s: options.beam_dp_epsilon).')
    for name in ('budget', 'release_budget'):
        if name in out:
            out[name] = _budget(owner, name, out[name])
    for name in ('start', 'end'):
        if name in out:
            out[name] = _time(owner, name, out[name])
    if 'privacy_unit' in out:
        out['privacy_unit'] = _privacy_unit(owner, out['privacy_unit'])
    if isinstance(out.get('keys'), dict):
        spec = dict(out['keys'])
        out['keys'] = PrivateKeys(_budget(owner, 'keys.budget', spec.pop('budget', None)), **spec)
    if isinstance(out.get('noise_key'), dict):
        out['noise_key'] = noise.NoiseKeyRef(**out['noise_key'])
    if 'mechanism' in out:
        out['mechanism'] = _mechanism(owner, out['mechanism'], out)
    if 'queries' in out:
        out['queries'] = _queries(owner, out['queries'], out)
    return out


def _query(record):
    """A growing database's query from a YAML row: ``(query_id, LinearQuery)`` from fields
    ``query_id`` and ``weights`` (a list) or ``lo``/``hi`` with ``domain_size``; a Boost query
    from the fields of ``BoostQueryRecord``. Anything else passes as it is (the transform
    dead-letters a malformed query)."""
    fields = record._asdict() if hasattr(record, '_asdict') else (
        dict(record) if isinstance(record, dict) else getattr(record, '__dict__', None))
    if not fields:
        return record
    if 'subsets' in fields or 'first_block' in fields:
        try:
            return BoostQueryRecord(**{f: fields.get(f, d) for f, d in zip(
                BoostQueryRecord._fields, ('', '', [], [], 0, 0, 0))})
        except Exception:  # pylint: disable=broad-except
            return record
    try:
        if fields.get('weights') is not None:
            return fields['query_id'], LinearQuery(list(fields['weights']))
        return fields['query_id'], LinearQuery.range(int(fields['domain_size']),
                                                     int(fields['lo']), int(fields['hi']))
    except Exception:  # pylint: disable=broad-except
        return record


class QueryAnswerRow(typing.NamedTuple):
    """``QueryAnswer`` (a growing database's answer) as a schema'd row: ``QueryAnswer`` itself is
    a validated dataclass (a value xor a refusal), which Beam gives no RowCoder; YAML and Java
    callers get these instead."""
    query_id: str
    value: typing.Optional[float]
    mechanism: str
    epsilon_spent: float
    timestamp: int
    refusal: typing.Optional[str]
    message: str
    delta_spent: float
    t: typing.Optional[int]
    hard: typing.Optional[bool]


beam.coders.registry.register_coder(QueryAnswerRow, beam.coders.RowCoder)


def _answer_row(answer) -> QueryAnswerRow:
    return QueryAnswerRow(**{f: getattr(answer, f) for f in QueryAnswerRow._fields})


def _schemad(name, pcoll):
    """An output as schema'd rows: ``QueryAnswer`` → ``QueryAnswerRow``; a growing database's
    untyped ``releases`` typed ``EpochReleaseRecord`` (what they are)."""
    if pcoll.element_type is QueryAnswer:
        return pcoll | f'{name}AsRows' >> beam.Map(_answer_row).with_output_types(QueryAnswerRow)
    if name == 'releases' and (pcoll.element_type is None or str(pcoll.element_type) == 'Any'):
        return pcoll | f'{name}Typed' >> beam.Map(lambda r: r).with_output_types(
            EpochReleaseRecord)
    return pcoll


class _YamlIO:
    """A beam_dp transform's ``io_adapter`` in YAML (``shell._checking_fields``): a growing
    database's ``queries`` input rows made queries (``_query``); its outputs as a dict of named
    PCollections (``Count.releases``, ``Count.dead_letter``; no aliased default output: a
    cross-language caller refuses one PCollection under two names)."""

    @staticmethod
    def inputs(inputs):
        if isinstance(inputs, dict) and set(inputs) == {'data', 'queries'}:
            return {'data': inputs['data'],
                    'queries': inputs['queries'] | 'ToQueries' >> beam.Map(_query)}
        if isinstance(inputs, dict) and len(inputs) == 1:
            return next(iter(inputs.values()))
        return inputs

    @staticmethod
    def outputs(out):
        return {name: _schemad(name, pcoll) for name, pcoll in out._asdict().items()
                if pcoll is not None}


def yaml_factory(cls):
    """The YAML factory of a public transform ``cls``: its arguments minus callables and
    ``_NOT_IN_YAML``, converted (``_convert``), the pipeline's budget required."""
    signature = inspect.signature(cls)
    params = [p.replace(annotation=typing.Any) for name, p in signature.parameters.items()
              if name not in _NOT_IN_YAML and not name.endswith('_fn')
              and p.kind == p.KEYWORD_ONLY]

    def factory(**config):
        transform = cls(**_convert(cls.__name__, config))
        transform.require_pipeline_budget = True
        transform.io_adapter = _YamlIO()
        return transform

    factory.__name__ = factory.__qualname__ = cls.__name__
    factory.__module__ = 'beam_dp.transforms.yaml_provider'
    factory.__doc__ = cls.__doc__
    factory.__signature__ = inspect.Signature(params)
    return factory


#: name → YAML factory of every public transform.
TRANSFORMS = {name: yaml_factory(cls) for name, cls in _public_transforms().items()}
globals().update(TRANSFORMS)


def providers_yaml() -> str:
    """The text of ``providers.yaml``: one ``type: python`` provider of every public transform."""
    lines = ['# Generated by `python -m beam_dp.transforms.yaml_provider --write`: do not edit.',
             '# The beam_dp transforms for Beam YAML (docs/configuration.md).',
             '- type: python',
             '  transforms:']
    lines += [f'    {name}: beam_dp.transforms.yaml_provider.{name}' for name in TRANSFORMS]
    return '\n'.join(lines) + '\n'


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv == ['--path']:
        print(PROVIDERS_PATH)
    elif argv == ['--write']:
        with open(PROVIDERS_PATH, 'w', encoding='utf-8') as f:
            f.write(providers_yaml())
    else:
        print(providers_yaml(), end='')


if __name__ == '__main__':
    main()
