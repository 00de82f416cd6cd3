"""Public signatures and argument errors of the continual transforms.

The keyed and segmented families share one implementation per family (a private base with every
argument of the family); each public transform takes only the arguments that apply to it. The
class decorator ``public(...)`` gives a public transform:

* its own signature (``inspect.signature`` and ``help()`` show exactly its parameters: no bare
  ``**kwargs``), derived from the implementation's, with arguments that do not apply dropped,
  required ones marked and defaults of its own;
* an ``Args:`` section in its docstring listing each of those parameters (from one table of
  descriptions per family, so a description is written once);
* argument errors that name the public transform and say what to write instead: missing
  arguments with what they mean, ``epsilon=1.0`` → "use budget=PrivacyBudget(epsilon=1.0)",
  arguments of another transform (``ContinualCountPerKey(lower=0, upper=50)``) named with where
  they apply, near misses with "did you mean". All are ``InvalidParamsError``.
"""

import difflib
import functools
import inspect
import textwrap
import typing
from typing import Dict, Mapping, Optional, Sequence, Tuple

from beam_dp.errors import InvalidParamsError
from beam_dp.fields import Field
from beam_dp.fields import Fields
from beam_dp.fields import check_field_name

__all__ = [
    'BIN_FN_DOC',
    'COMMON_DOCS',
    'KEYED_DOCS',
    'SEGMENTED_DOCS',
    'TIMESTAMP_FIELD',
    'explain',
    'field_arguments',
    'public',
    'resolve_fields',
]

_EMPTY = inspect.Parameter.empty
_BUDGET_NAMES = ('epsilon', 'delta', 'rho')

#: Descriptions of the arguments every continual transform shares (families add their own).
COMMON_DOCS: Dict[str, str] = {
    'start': 'event time of the start of step 0 (seconds since the epoch, a Beam Timestamp or '
             'a timezone-aware datetime; not milliseconds).',
    'step': 'the length of a step (seconds, a Beam Duration or a timedelta).',
    'end': 'public end time: no step starting at or after it is released. Required when the '
           'input is bounded (batch), so that the number of releases does not depend on the '
           'data; optional on an unbounded stream (releases go on until it is drained).',
    'budget': "this transform's privacy budget for its whole (unbounded) release: "
              '``PrivacyBudget(epsilon=ε)`` (or ``rho=ρ`` for zCDP where supported).',
    'public_keys': 'the released key set (strings), public: every key is released at every '
                   'release, with or without data; records of other keys are dead-lettered.',
    'keys': 'instead of ``public_keys``: a public key list, or ``PrivateKeys(...)`` to select '
            'the released keys privately.',
    'key_fn': 'record → key (default ``record[0]``).',
    'accountant': 'a ``BudgetAccountant`` that pays for ``budget``; over-allocation raises '
                  '``BudgetExceededError`` at construction, before any data is read.',
    'allowed_lateness': 'how long (seconds) a step waits for late records after its end; '
                        'records arriving later are dead-lettered (default 0).',
    'noise_key': "a reference to a secret noise key ('env:VAR', 'file:/path' or "
                 "'gcpsm:projects/P/secrets/S/versions/N', never the key itself): every draw "
                 'becomes a PRF of the key and its address, so a replayed release is '
                 'bit-identical. Default: the key of an enclosing '
                 '``beam_dp.noise.using_noise_key`` block, else fresh OS randomness.',
    'debug_metrics': 'SENSITIVE. True adds exact per-stage dead-letter counts as Beam metrics '
                     '(they reveal e.g. how many records exceeded the bounds). Default False.',
    'testing_seed': 'seeds the noise for tests only (inside ``beam_dp.noise.testing``\'s '
                    'opt-in); refused elsewhere and on production runners.',
    'label': "the transform's label (also its ledger label and noise address).",
}

#: The keyed continual family (``ContinualCountPerKey``, ``...SumPerKey``,
#: ``...HistogramPerKey``).
KEYED_DOCS: Dict[str, str] = {
    **COMMON_DOCS,
    'privacy_unit': '``EventLevel()`` (default: one record) or ``UserLevel(unit_fn, '
                    'max_keys_per_unit, max_contributions_per_step, max_steps_per_unit)`` '
                    '(all records of a user, bounded first by ``BoundContributions``).',
    'value_fn': 'record → the value to add up (default ``record[1]``).',
    'lower': 'the smallest value a record counts for: values below are raised to it. No '
             'default (bounds set both the noise and the clamping bias).',
    'upper': 'the largest value a record counts for: values above are lowered to it. No '
             'default.',
    'grid_bits': 'values are snapped to multiples of 2**-grid_bits (default 10).',
    'bins': 'the public bin labels; a record whose bin is not one of them is dead-lettered.',
    'horizon_steps': 'caps the number of steps: no step after T is released (as ``end`` does); '
                     'None (default): ``end`` alone sets the horizon.',
    'mechanism': "'auto' (default): the counter with the lowest expected error for the known "
                 "horizon (steps from start to end; unbounded without end) and the budget "
                 "(``beam_dp.analysis.select_counter``: BLT for ρ, per-step noise summed, the "
                 "negative-digit k-ary tree, or without an end the unbounded negative-digit tree, "
                 "for ε; for (ε, δ) whichever of both is better); or force 'blt', "
                 "'balanced_tree', 'kary_tree', 'binary_tree', 'infinite_tree', "
                 "'unbounded_tree', 'per_step'. ``Release.mechanism`` names it.",
    'estimator': "None (default). 'variance_reduced' (Honaker 2015) or 'textbook': the tree "
                 "estimator; with mechanism='auto' it selects the old tree counters (the binary "
                 "tree over horizon_steps if given, else the infinite tree).",
    'num_shards': 'how many stateful shards hold the keys (default: one per 512 keys).',
    'output': "what every release is: 'cumulative' (default: the total since start), "
              "'per_step' (the value of the step alone) or ('window', W) (the total over the last "
              "W steps, fewer at the start): a window counter whose error depends on W, never on "
              "the horizon (docs/windows.md); mechanism and estimator then stay at their "
              "defaults. ``Release.mechanism`` names it, ``Release.noise_stddev`` is exact.",
    'final_share': "f in [0, 1) with a known ``end`` and cumulative output: the share of the "
                   "budget spent on ONE release of every key's total at the last step, "
                   "combined there with the continual release by inverse variance (the "
                   "counter runs at the rest: every earlier release has 1/(1 − f) (ε) or "
                   "1/√(1 − f) (ρ) times the noise sd). None or 0 (default): off. "
                   "``Release.noise_stddev`` is the combination's exact sd; the ledger records "
                   "the split ('<label>/FinalRelease'). docs/continual_counts.md.",
}
#: ``value_fn`` of a histogram.
BIN_FN_DOC = 'record → its bin label, one of ``bins`` (default ``record[1]``).'

#: The segmented family (``SparseContinual*PerKey``, ``DynamicCountPerKey``).
SEGMENTED_DOCS: Dict[str, str] = {
    **COMMON_DOCS,
    'budget': '``PrivacyBudget(epsilon=ε)`` (pure ε: the partitioner is a sparse vector).',
    'privacy_unit': 'only ``EventLevel()`` (the default): one record (or one update).',
    'partition_fraction': 'the share of ε spent on choosing segment boundaries (default 0.5).',
    'beta': 'failure probability of the accuracy bound the thresholds are set for (default '
            '0.1).',
    'c_theta': "threshold constant (privacy-neutral): larger, fewer segments and more lag; "
               "default 7, the paper's.",
    'max_segment_ticks': 'close a segment after at most this many steps (caps staleness '
                         'publicly); None (default): no cap.',
    'monotone': 'True for streams whose counts never decrease (smaller thresholds); default '
                'False.',
    'bins': 'the public bin labels; a record whose bin is not one of them is dead-lettered.',
    'value_fn': BIN_FN_DOC,
    'construction': "'two_stream' (default; C6) or 'fenwick' (C9).",
    'update_fn': 'record → (record_id, op), op +1 / \'insert\' or -1 / \'delete\' (default '
                 '``(record[1], record[2])``).',
}

# -- field names ------------------------------------------------------------------------------------

#: The field-name argument that every transform takes: the record's event time is read from this
#: field (seconds since the epoch, a Beam Timestamp or an aware datetime) instead of the
#: element's timestamp, by the transform's 'CheckFields' stage.
TIMESTAMP_FIELD = 'timestamp_field'
#: Callable arguments whose field-name twins do not follow the rule ``X_fn`` → ``X_field``.
_FIELD_EXCEPTIONS = {
    'unit_fn': ('privacy_unit_field',),
    'update_fn': ('record_id_field', 'op_field'),     # DynamicCountPerKey: (record id, op)
}
#: Callables that read the queries of a growing database, not its data records.
_QUERY_FNS = frozenset({'query_key_fn'})
_TIMESTAMP_DOC = ('the field holding the event time (seconds since the epoch, a Beam Timestamp or '
                  "a timezone-aware datetime, e.g. Avro's timestamp-millis); default: the "
                  "element's timestamp. Records without it are dead-lettered.")


def field_arguments(fn_names: Sequence[str],
                    aliases: Optional[Mapping[str, Sequence[str]]] = None
                    ) -> Dict[str, Tuple[str, ...]]:
    """{callable argument: its field-name argument(s)} for the callables ``fn_names`` (names
    ending in ``_fn``): ``key_fn`` → ``key_field``, ``unit_fn`` → ``privacy_unit_field``,
    ``update_fn`` → (``record_id_field``, ``op_field``), and a class's ``FIELD_ALIASES`` (a
    histogram's ``value_fn`` → ``bin_field``)."""
    aliases = dict(aliases or {})
    out = {}
    for fn in fn_names:
        if not fn.endswith('_fn'):
            continue
        twins = aliases.get(fn) or _FIELD_EXCEPTIONS.get(fn) or (fn[:-3] + '_field',)
        out[fn] = tuple([twins] if isinstance(twins, str) else twins)
    return out


def _field_doc(fn: str, twins: Tuple[str, ...]) -> str:
    if len(twins) > 1:
        return (f'with {", ".join(t for t in twins if t != twins[0])}: instead of ``{fn}``, the '
                f'fields holding its parts ({", ".join(twins)}). Records without them are '
                f'dead-lettered.')
    return (f'instead of ``{fn}``: the name of the field holding it (a Beam Row / NamedTuple '
            f'attribute or dict key). Records without it are dead-lettered.')


def _record_fields(value, depth: int = 0):
    """The ``Field``/``Fields`` a constructor argument holds (itself, or an attribute of a
    dataclass such as ``UserLevel(privacy_unit_field=...)``)."""
    if isinstance(value, (Field, Fields)):
        return [value]
    if depth == 0 and hasattr(value, '__dataclass_fields__'):
        return [f for name in value.__dataclass_fields__
                for f in _record_fields(getattr(value, name, None), 1)]
    return []


def resolve_fields(transform, fn_names: Sequence[str], kwargs: dict) -> dict:
    """THE field-name step of every public transform's construction (applied once, by the
    outermost constructor): each field-name argument (``field_arguments``) becomes its callable
    (``beam_dp.fields.Field``), ``timestamp_field`` is kept on the transform, and the fields
    the data records must have are recorded for the 'CheckFields' stage
    (``transform._field_checks``, ``transform._timestamp_field``). Returns the kwargs to pass on.

    Raises:
      InvalidParamsError: naming the argument, for a callable and its field both given, a field
        name that is not a non-empty string, or only some of a multi-field callable's fields.
    """
    owner = type(transform).__name__
    table = field_arguments(fn_names, getattr(type(transform), 'FIELD_ALIASES', None))
    kwargs = dict(kwargs)
    for fn, twins in table.items():
        given = [t for t in twins if t in kwargs]
        if not given:
            continue
        names = [check_field_name(owner, t, kwargs.pop(t)) for t in given]
        if len(given) != len(twins):
            missing = [t for t in twins if t not in given]
            raise InvalidParamsError(f'{owner}: {", ".join(given)} needs {", ".join(missing)} '
                                     f'too (together they replace {fn}).')
        if kwargs.get(fn) is not None:
            raise InvalidParamsError(f'{owner}: give either {fn} or {" and ".join(twins)}, '
                                     f'not both.')
        kwargs[fn] = Field(names[0]) if len(twins) == 1 else Fields(names)
    timestamp = kwargs.pop(TIMESTAMP_FIELD, None)
    if timestamp is not None:
        check_field_name(owner, TIMESTAMP_FIELD, timestamp)
    checks = []
    for name, value in kwargs.items():
        if name in _QUERY_FNS:
            continue
        for found in _record_fields(value):
            for field in found.names:
                if field not in checks:
                    checks.append(field)
    transform._field_checks = tuple(checks)           # pylint: disable=protected-access
    transform._timestamp_field = timestamp            # pylint: disable=protected-access
    return kwargs


def accepted_names(cls) -> Tuple[str, ...]:
    """The keyword arguments the constructors of ``cls`` accept (its ``__init__``, and its
    parents' while an ``__init__`` passes ``**kwargs`` on)."""
    names = []
    for klass in cls.__mro__:
        init = klass.__dict__.get('__init__')
        if init is None:
            continue
        named, var_kw = _named(inspect.signature(init))
        names += [p.name for p in named if p.name not in names]
        if not var_kw:
            break
    return tuple(names)


_USER_LEVEL_CALL = ('privacy_unit=UserLevel(unit_fn=<record → unit id>, max_keys_per_unit=K, '
                    'max_contributions_per_step=m, max_steps_per_unit=S)')

#: Names a transform does not take but a user may write (a ``UserLevel`` argument passed to the
#: transform, PipelineDP's names): name → (the argument that must be in the signature for the
#: hint to apply, what to write instead).
_FOREIGN_HINTS: Dict[str, Tuple[str, str]] = {
    **{name: ('privacy_unit', f'{name} is an argument of UserLevel: pass {_USER_LEVEL_CALL}')
       for name in ('unit_fn', 'max_keys_per_unit', 'max_contributions_per_step',
                    'max_steps_per_unit', 'max_total_contributions', 'max_units',
                    'privacy_unit_field')},
    'max_partitions_contributed': (
        'privacy_unit', "PipelineDP's max_partitions_contributed is UserLevel's "
                        f'max_keys_per_unit: pass {_USER_LEVEL_CALL}'),
    'max_contributions_per_partition': (
        'privacy_unit', "PipelineDP's max_contributions_per_partition is UserLevel's "
                        'max_contributions_per_step (per key and step; a continual release also '
                        f'needs max_steps_per_unit): pass {_USER_LEVEL_CALL}'),
    'max_contributions': (
        'privacy_unit', "PipelineDP's max_contributions is UserLevel's max_total_contributions: "
                        f'pass {_USER_LEVEL_CALL[:-1]}, max_total_contributions=C)'),
    'privacy_id_extractor': ('privacy_unit', "PipelineDP's privacy_id_extractor is UserLevel's "
                                             f'unit_fn: pass {_USER_LEVEL_CALL}'),
    'partition_extractor': ('key_fn', 'write key_fn=<record → key> (partition_extractor is '
                                      "PipelineDP's name)"),
    'value_extractor': ('value_fn', "write value_fn=<record → value> (value_extractor is "
                                    "PipelineDP's name)"),
    'public_partitions': ('public_keys', "write public_keys=[...] (public_partitions is "
                                         "PipelineDP's name)"),
    'min_value': ('lower', "write lower=<smallest value a record counts for> (min_value is "
                           "PipelineDP's name)"),
    'max_value': ('upper', "write upper=<largest value a record counts for> (max_value is "
                           "PipelineDP's name)"),
    'noise_kind': ('budget', 'the noise follows the budget: budget=PrivacyBudget(epsilon=ε) '
                             'draws discrete Laplace noise, PrivacyBudget(rho=ρ) discrete '
                             'Gaussian'),
}


def foreign_hint(name: str, names: Sequence[str]) -> Optional[str]:
    """What to write instead of ``name``, an argument a constructor taking ``names`` does not
    take, when it is another class's argument or PipelineDP's name for one (else None)."""
    target, hint = _FOREIGN_HINTS.get(name, (None, None))
    return hint if target in names else None


_MISSING_HINTS = {
    'start': 'start=<event time of step 0, in seconds since the epoch>',
    'step': 'step=<step length in seconds>',
    'budget': 'budget=PrivacyBudget(epsilon=...)',
    'lower': 'lower=<smallest value a record counts for>',
    'upper': 'upper=<largest value a record counts for>',
    'bins': "bins=[<public bin labels>]",
}


def _keyword(param: inspect.Parameter, default=_EMPTY) -> inspect.Parameter:
    return param.replace(kind=inspect.Parameter.KEYWORD_ONLY, default=default)


def _named(signature: inspect.Signature):
    """The named (non-self, non-variadic) parameters of ``signature``, and whether it has a
    ``**kwargs`` catch-all."""
    named, var_kw = [], False
    for name, param in signature.parameters.items():
        if param.kind == param.VAR_KEYWORD:
            var_kw = True
        elif name != 'self' and param.kind != param.VAR_POSITIONAL:
            named.append(param)
    return named, var_kw


def _public_signature(own, parent, drop, required, defaults,
                      aliases=None) -> inspect.Signature:
    params, var_kw = _named(inspect.signature(own)) if own is not None else ([], True)
    if var_kw:
        present = {p.name for p in params}
        params += [p for p in _named(inspect.signature(parent))[0] if p.name not in present]
    out = []
    for param in params:
        if param.name in drop or param.name.endswith('_field'):   # field twins: re-added below
            continue
        if param.name in required:
            param = _unwrap_optional(_keyword(param))
        elif param.name in defaults:
            param = _keyword(param, defaults[param.name])
        else:
            param = _keyword(param, param.default)
        out.append(param)
    present = {p.name for p in out}
    fields = []
    for fn, twins in field_arguments([p.name for p in out], aliases).items():
        fields += [inspect.Parameter(t, inspect.Parameter.KEYWORD_ONLY, default=None,
                                     annotation=Optional[str])
                   for t in twins if t not in present]
    if TIMESTAMP_FIELD not in present:
        fields.append(inspect.Parameter(TIMESTAMP_FIELD, inspect.Parameter.KEYWORD_ONLY,
                                        default=None, annotation=Optional[str]))
    out.sort(key=lambda p: p.default is not _EMPTY)       # required first (stable)
    out += fields
    self_param = inspect.Parameter('self', inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return inspect.Signature([self_param] + out)


def _budget_hint(kwargs: Mapping) -> str:
    given = ', '.join(f'{n}={kwargs[n]!r}' for n in _BUDGET_NAMES if n in kwargs)
    return f'use budget=PrivacyBudget({given})'


def explain(owner: str, signature: inspect.Signature, args: Sequence, kwargs: Mapping,
            hints: Mapping[str, str]) -> str:
    """The message of an ``InvalidParamsError`` for a call that does not fit ``signature``."""
    names = [n for n in signature.parameters if n != 'self']
    problems = []
    if args:
        problems.append(f'takes keyword arguments only, got {len(args)} positional '
                        f'argument(s) {", ".join(repr(a) for a in args)[:200]}')
    unknown = [n for n in kwargs if n not in signature.parameters]
    budget_names = [n for n in unknown if n in _BUDGET_NAMES and 'budget' in names]
    if budget_names:
        problems.append(f'{"/".join(budget_names)} is not an argument: '
                        f'{_budget_hint(kwargs)}')
    by_hint: Dict[str, list] = {}
    for name in unknown:
        if name in budget_names:
            continue
        hint = hints.get(name)
        if hint is None:
            hint = foreign_hint(name, names)
        if hint is None:
            close = difflib.get_close_matches(name, names, n=1)
            hint = f'did you mean {close[0]}?' if close else ''
        by_hint.setdefault(hint, []).append(name)
    for hint, group in by_hint.items():
        verb = 'is not an argument' if len(group) == 1 else 'are not arguments'
        problems.append(f'{", ".join(group)} {verb} of {owner}' + (f': {hint}' if hint else ''))
    missing = [n for n, p in signature.parameters.items()
               if n != 'self' and p.default is _EMPTY and n not in kwargs
               and not (n == 'budget' and budget_names)]
    if missing:
        problems.append(f'missing required argument(s) {", ".join(missing)}: pass '
                        + ', '.join(_MISSING_HINTS.get(n, f'{n}=...') for n in missing)
                        + (' (no defaults: the bounds set both the noise and the clamping bias)'
                           if {'lower', 'upper'} & set(missing) else ''))
    problems.append(f'{owner} takes: {", ".join(names)}')
    return f'{owner}: ' + '; '.join(problems) + '.'


def _args_section(signature: inspect.Signature, docs: Mapping[str, str]) -> str:
    lines = ['Args:']
    for name, param in signature.parameters.items():
        if name == 'self':
            continue
        tag = 'Required. ' if param.default is _EMPTY else ''
        lines.extend(textwrap.wrap(f'{name}: {tag}{docs.get(name, "")}', width=92,
                                   initial_indent='  ', subsequent_indent='    '))
    return '\n'.join(lines)


def _unwrap_optional(param: inspect.Parameter) -> inspect.Parameter:
    """A required parameter's ``Optional[X]`` annotation → ``X`` (None is not accepted)."""
    args = typing.get_args(param.annotation)
    if typing.get_origin(param.annotation) is typing.Union and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            return param.replace(annotation=rest[0])
    return param


def _with_args(doc: Optional[str], section: str) -> str:
    """``doc`` (cleaned) with ``section`` before its ``Returns:`` (or at the end)."""
    doc = inspect.cleandoc(doc or '')
    marker = '\nReturns:'
    if marker in doc:
        head, tail = doc.split(marker, 1)
        return f'{head.rstrip()}\n\n{section}\n{marker}{tail}'
    return f'{doc.rstrip()}\n\n{section}\n'


def public(*, docs: Mapping[str, str], drop: Sequence[str] = (), required: Sequence[str] = (),
           defaults: Optional[Mapping] = None, hints: Optional[Mapping[str, str]] = None):
    """Class decorator of a public transform (see the module docstring).

    The signature is the class's own ``__init__``'s (extended by its parent's when it ends with
    ``**kwargs``), or its parent's when it defines none; then ``drop`` removes arguments that do
    not apply, ``required`` removes their defaults, ``defaults`` sets its own defaults (passed
    on explicitly when not given). ``docs`` describes every parameter; ``hints`` explains
    arguments it does not take (e.g. ``{'lower': 'counts take no bounds'}``).

    A subclass's ``super().__init__(...)`` reaches the parent's implementation unchecked: the
    outermost public class already checked the call against its own signature.
    """
    drop, required = frozenset(drop), frozenset(required)
    defaults = dict(defaults or {})
    hints = dict(hints or {})

    def decorate(cls):
        own = cls.__dict__.get('__init__')
        parent = super(cls, cls).__init__
        target = own if own is not None else parent
        aliases = getattr(cls, 'FIELD_ALIASES', None)
        signature = _public_signature(own, parent, drop, required, defaults, aliases)
        fn_names = [n for n in signature.parameters if n.endswith('_fn')]
        field_docs = {t: _field_doc(fn, twins)
                      for fn, twins in field_arguments(fn_names, aliases).items()
                      for t in twins}
        field_docs[TIMESTAMP_FIELD] = _TIMESTAMP_DOC

        @functools.wraps(target)
        def __init__(self, *args, **kwargs):
            if type(self) is cls:
                kwargs = resolve_fields(self, fn_names, kwargs)
                self._fields_resolved = True
                if args or any(n not in signature.parameters for n in kwargs) or any(
                        p.default is _EMPTY and n not in kwargs
                        for n, p in signature.parameters.items() if n != 'self'):
                    raise InvalidParamsError(explain(cls.__name__, signature, args, kwargs,
                                                     hints))
                for name, value in defaults.items():
                    kwargs.setdefault(name, value)
            target(self, *args, **kwargs)

        del __init__.__wrapped__                 # inspect.signature: the public one below
        __init__.__signature__ = signature
        __init__.__doc__ = f'Constructs a {cls.__name__}; see the class docstring for the Args.'
        cls.__init__ = __init__
        cls.__doc__ = _with_args(cls.__doc__, _args_section(signature, {**field_docs,
                                                                         **docs}))
        return cls

    return decorate
