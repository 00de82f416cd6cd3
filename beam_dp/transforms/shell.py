"""The one transform shell that every beam_dp family uses for the work they share.

A family is three pieces: the paper's mechanism (``beam_dp/mechanisms/``), a pure
driver (``beam_dp/drivers/``) and a thin transform built on this shell:

1. **Construction** — subclass ``ShellTransform`` and call ``super().__init__(label,
   accountant=..., noise_key=..., testing_seed=..., debug_metrics=...)``: it validates them
   (errors name the public class) and picks the noise source (``self.rng``). Parse the shared arguments with ``parse_clock(owner,
   start=, step=, end=, allowed_lateness=)`` (→ ``StepClock``) and ``parse_key_set(owner,
   public_keys, keys)`` (→ public key list or ``PrivateKeys``); build the driver inside
   ``with self.params():`` so a driver's ``InvalidParamsError`` names the public transform.
   Implement ``privacy_costs()`` → ``[(ledger label, PrivacyCost), ...]`` (labels from
   ``self.label``) and end ``__init__`` with ``self.check_budget()``: the accountant checks
   all costs together, before any data is read.
2. **expand()** — start with ``self.spend_budget(inputs)`` (refuses a seeded noise source on a
   production runner, then records the costs once, all or none);
   in the extracting DoFn, ``extract_key``/``extract_unit`` and the driver raise
   ``InvalidRecordError`` with the reason, which goes out as ``dead_letter(...)`` on the
   ``DEAD_LETTER`` tagged output; seed every stateful shard at ``start`` with
   ``seeds_at_start`` + ``merge_seeds`` (labels
   'ShardSeeds'/'SeedAtStart'/'MergeSeeds'; the merged collection is typed ``Tuple[int, Any]``
   so the stateful DoFn's key coder is deterministic); end with ``merge_dead_letters``
   ('MergeDeadLetters'; pass ``debug_metrics=self.debug_metrics``) and return
   ``ContinualOutputs``.
3. **The release loop** — every family on the step clock runs its pure loop driver
   (``beam_dp.drivers.protocol``) in ``release_loop.single_cell_loop`` or
   ``release_loop.buffered_loop`` (state, timers, lateness, dead letters, release rows), keyed
   by an int shard or a ``str`` key (never a ``FastPrimitivesCoder`` key; ``key_bytes(...)``
   for any other id), with ``noise_label=`` what ``spend_budget`` returned. A stage whose own
   late check depends on other records gets ``lateness.LatenessGate`` before it. Every timer
   is declared in ``release_loop`` (the loops, and ``watermark_gate`` for the stages that only
   need to know what the schedule released).
"""

import contextlib
import datetime
import functools
import inspect
import math
import numbers
import typing
import weakref
from typing import Iterable, List, NamedTuple, Optional, Sequence, Tuple

import apache_beam as beam
import numpy as np
from apache_beam.coders import FastPrimitivesCoder
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import Duration
from apache_beam.utils.timestamp import Timestamp

from beam_dp import noise
from beam_dp.accounting import BudgetAccountant
from beam_dp.accounting import PrivacyCost
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.clock import refuse_milliseconds
from beam_dp.drivers.private_keys import PrivateKeys
from beam_dp.errors import InvalidParamsError
from beam_dp.errors import InvalidRecordError
from beam_dp.io import coders  # noqa: F401  (registers the records' RowCoders)
from beam_dp.fields import field_value
from beam_dp.io.records import DeadLetter
from beam_dp.transforms import arguments

__all__ = [
    'ContinualOutputs',
    'DEAD_LETTER',
    'MAX_MICROS',
    'RecordText',
    'SHARD_ELEMENT',
    'BeamDpOptions',
    'ShellTransform',
    'pipeline_accountant',
    'check_callable',
    'check_callables',
    'dead_letter',
    'extract_key',
    'extract_unit',
    'key_bytes',
    'merge_dead_letters',
    'merge_seeds',
    'noise_source',
    'parse_clock',
    'parse_key_set',
    'render_record',
    'render_texts',
    'pack_records',
    'unpack_records',
    'concat_records',
    'PackedRecords',
    'NO_RECORDS',
    'seeds_at_start',
    'to_micros',
]

DEAD_LETTER = 'dead_letter'
# The element type of everything a stateful DoFn keyed by shard reads: (shard, payload). Typing
# it gives the shard a VarIntCoder (deterministic) instead of FastPrimitivesCoder.
SHARD_ELEMENT = typing.Tuple[int, typing.Any]
_MAX_RECORD_CHARS = 2000
_KEY_CODER = FastPrimitivesCoder()
#: The largest event time a timer can be set to (the end of the global window).
MAX_MICROS = GlobalWindow().max_timestamp().micros


class ContinualOutputs(NamedTuple):
    """The outputs of a continual transform: ``releases`` (``Release`` records) and
    ``dead_letter`` (``DeadLetter`` records: malformed, out-of-range, late or over-bound inputs)."""
    releases: beam.PCollection
    dead_letter: beam.PCollection


# -- construction -----------------------------------------------------------------------------------


def to_micros(owner: str, name: str, value, allow_zero: bool = True, duration: bool = False) -> int:
    """Seconds (int/float), ``Timestamp``/``Duration`` or aware ``datetime`` → integer microseconds."""
    if isinstance(value, (Timestamp, Duration)):
        micros = value.micros
    elif isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            raise InvalidParamsError(f'{owner}: {name} must be timezone-aware, got {value!r}.')
        micros = round(value.timestamp() * 1_000_000)
    elif isinstance(value, datetime.timedelta):
        micros = round(value.total_seconds() * 1_000_000)
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise InvalidParamsError(f'{owner}: {name} must be finite, got {value!r}.')
        micros = round(float(value) * 1_000_000)
    else:
        kind = 'a duration in seconds' if duration else 'a time in seconds since the epoch'
        raise InvalidParamsError(f'{owner}: {name} must be {kind}, got {value!r}.')
    if micros < 0 or (micros == 0 and not allow_zero):
        word = 'non-negative' if allow_zero else 'positive'
        raise InvalidParamsError(f'{owner}: {name} must be {word}, got {value!r}.')
    return micros


def parse_clock(owner: str, *, start, step, end=None, allowed_lateness=0,
                step_name: str = 'step') -> StepClock:
    """``start``/``end`` (times), ``step``/``allowed_lateness`` (durations) → ``StepClock``.

    Raises:
      InvalidParamsError: naming ``owner`` and the parameter.
    """
    for name, value in (('start', start), ('end', end)):
        refuse_milliseconds(owner, name, value)
    start_micros = to_micros(owner, 'start', start)
    step_micros = to_micros(owner, step_name, step, allow_zero=False, duration=True)
    lateness = to_micros(owner, 'allowed_lateness', allowed_lateness, duration=True)
    end_micros = None if end is None else to_micros(owner, 'end', end)
    if end_micros is not None and end_micros <= start_micros:
        raise InvalidParamsError(f'{owner}: end must be after start, got {end!r}.')
    return StepClock.ending_at(start_micros, step_micros, end_micros, lateness)


def parse_key_set(owner: str, public_keys, keys) -> Tuple[Optional[Sequence[str]],
                                                         Optional[PrivateKeys]]:
    """``public_keys=[...]`` or ``keys=[...] | PrivateKeys(...)`` → (public keys, private keys),
    exactly one of them set. Public keys may be a ``PCollection`` of strings (a key set known
    when the pipeline runs, e.g. ``SelectKeys(...).keys``): it is returned as it is.

    Raises:
      InvalidParamsError: if both or neither are given, or public keys are not a collection.
    """
    private_keys = None
    if keys is not None:
        if public_keys is not None:
            raise InvalidParamsError(f'{owner}: give either public_keys or keys, not both.')
        if isinstance(keys, PrivateKeys):
            private_keys = keys
        else:
            public_keys = keys
    if isinstance(public_keys, beam.pvalue.PValue) and not isinstance(
            public_keys, beam.pvalue.PCollection):
        raise InvalidParamsError(f'{owner}: public_keys must be a list of strings or a '
                                 f'PCollection of them (e.g. SelectKeys(...).keys), got '
                                 f'{public_keys!r}.')
    if private_keys is None and (isinstance(public_keys, (str, bytes)) or public_keys is None):
        raise InvalidParamsError(f'{owner}: public_keys must be a collection of strings, got '
                                 f'{public_keys!r}.')
    return (None if private_keys is not None else public_keys), private_keys


def noise_source(owner: str, testing_seed: Optional[int],
                 noise_key=None) -> noise.RandomSource:
    """THE noise source of every transform (``beam_dp.noise.noise_source``): the secret-keyed
    PRF source of ``noise_key`` (a reference: 'env:VAR', 'file:/path' or
    'gcpsm:projects/P/secrets/S/versions/N'), a seeded source only inside the tests' opt-in
    (``beam_dp.noise.testing``), the key of an enclosing ``beam_dp.noise.using_noise_key(...)``
    block, else the CSPRNG.

    Raises:
      InvalidParamsError: for a malformed ``noise_key``, both arguments, a ``testing_seed``
        that is not an int or None, or one given outside the testing opt-in.
    """
    return noise.noise_source(owner, noise_key=noise_key, testing_seed=testing_seed)


def _pipeline_of(inputs) -> Optional[beam.Pipeline]:
    """The pipeline of a PCollection, a PBegin/Pipeline, or a tuple/dict of them."""
    if isinstance(inputs, beam.Pipeline):
        return inputs
    if isinstance(inputs, dict):
        inputs = list(inputs.values())
    if isinstance(inputs, (tuple, list)):
        for item in inputs:
            found = _pipeline_of(item)
            if found is not None:
                return found
        return None
    return getattr(inputs, 'pipeline', None)


class BeamDpOptions(beam.options.pipeline_options.PipelineOptions):
    """The pipeline-level budget: every beam_dp transform of a pipeline with one of these set,
    and no ``accountant=`` of its own, is charged to one accountant of this budget
    (``pipeline_accountant``) when it is applied (before any data is read). A YAML pipeline
    must set one (``options: {beam_dp_epsilon: 2.0}``)."""

    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument('--beam_dp_epsilon', type=float, default=None,
                            help='total ε of every beam_dp transform of the pipeline')
        parser.add_argument('--beam_dp_delta', type=float, default=None,
                            help='total δ of every beam_dp transform of the pipeline')
        parser.add_argument('--beam_dp_rho', type=float, default=None,
                            help='total ρ (zCDP) of every beam_dp transform of the pipeline')


_PIPELINE_ACCOUNTANTS = weakref.WeakKeyDictionary()


def pipeline_accountant(pipeline) -> Optional[BudgetAccountant]:
    """The one accountant of ``pipeline``'s budget (``BeamDpOptions``), or None if it sets none.

    Raises:
      InvalidParamsError: for a malformed budget (as ``PrivacyBudget`` would).
    """
    if pipeline is None:
        return None
    found = _PIPELINE_ACCOUNTANTS.get(pipeline)
    if found is not None:
        return found
    options = getattr(pipeline, '_options', None)
    if options is None:
        return None
    view = options.view_as(BeamDpOptions)
    given = {name: getattr(view, f'beam_dp_{name}') for name in ('epsilon', 'delta', 'rho')}
    given = {name: value for name, value in given.items() if value is not None}
    if not given:
        return None
    from beam_dp.accounting import PrivacyBudget  # pylint: disable=import-outside-toplevel
    accountant = BudgetAccountant(PrivacyBudget(**given))
    _PIPELINE_ACCOUNTANTS[pipeline] = accountant
    return accountant


class ShellTransform(beam.PTransform):
    """Base of the beam_dp transforms: public name, accountant, noise source, budget protocol.

    Subclasses implement ``privacy_costs()`` and call ``check_budget()`` at the end of
    ``__init__`` and ``spend_budget()`` at the start of ``expand``.
    """

    def __init_subclass__(cls, **kwargs):
        """Every subclass's ``__init__`` takes field names next to its callables and its
        ``expand`` reads them (``arguments.resolve_fields``, 'CheckFields'): once, here, for
        every family."""
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get('__init__')
        if init is not None:
            cls.__init__ = _accepting_fields(init)
        expand = cls.__dict__.get('expand')
        if expand is not None:
            cls.expand = _checking_fields(expand)

    def __init__(self, label: Optional[str] = None, *,
                 accountant: Optional[BudgetAccountant] = None,
                 testing_seed: Optional[int] = None, noise_key=None,
                 debug_metrics: bool = False):
        super().__init__(label)
        if accountant is not None and not isinstance(accountant, BudgetAccountant):
            raise InvalidParamsError(f'{self.owner}: accountant must be a BudgetAccountant, got '
                                     f'{accountant!r}.')
        if not isinstance(debug_metrics, bool):
            raise InvalidParamsError(f'{self.owner}: debug_metrics must be True or False, got '
                                     f'{debug_metrics!r}.')
        self._accountant = accountant
        self.rng = noise_source(self.owner, testing_seed, noise_key)
        #: SENSITIVE when True: exact per-stage dead-letter counts as Beam metrics (README).
        self.debug_metrics = debug_metrics

    @property
    def owner(self) -> str:
        """The public name of the transform, used in every error message."""
        return type(self).__name__

    @contextlib.contextmanager
    def params(self):
        """Re-raises an ``InvalidParamsError`` of a driver or mechanism under the public name."""
        try:
            yield
        except InvalidParamsError as e:
            raise InvalidParamsError(f'{self.owner}: {str(e).split(": ", 1)[-1]}') from e

    def privacy_costs(self) -> List[Tuple[str, PrivacyCost]]:
        """Every cost of this transform as (ledger label, cost), labels built from ``label``."""
        raise NotImplementedError

    def privacy_cost(self) -> PrivacyCost:
        """The sequential composition of ``privacy_costs()``."""
        total = PrivacyCost()
        for _, cost in self.privacy_costs():
            total = total + cost
        return total

    def check_budget(self) -> None:
        """At construction: raises ``BudgetExceededError`` unless all costs fit together."""
        if self._accountant is not None:
            self._accountant.check(self.privacy_costs(), self.owner)

    def spend_budget(self, inputs=None) -> str:
        """At expand (``inputs``: what ``expand`` was given): refuses a seeded noise source on a
        production runner (``beam_dp.noise.check_runner``), then records all costs on the
        accountant, once. Returns (and sets ``self.noise_label`` to) the transform's full path
        in the pipeline, the first label of every noise address it draws (unique in a Beam
        pipeline: a composite applied twice has two paths, so its draws never coincide).

        Raises:
          InvalidParamsError: for a seeded source on a runner that is not a local test runner.
        """
        pipeline = _pipeline_of(inputs)
        self.noise_label = _full_label(pipeline, self)
        if pipeline is not None:
            options = getattr(pipeline, '_options', None)
            noise.check_runner(self.owner, self.rng, getattr(pipeline, 'runner', None),
                               options.get_all_options() if options is not None else None)
        if self._accountant is None:
            self._accountant = pipeline_accountant(pipeline)
            if self._accountant is None and getattr(self, 'require_pipeline_budget', False):
                raise InvalidParamsError(
                    f'{self.owner} {self.label!r}: a YAML pipeline declares the total budget of '
                    f'its beam_dp transforms in its options (options: {{beam_dp_epsilon: ...}}, '
                    f'and beam_dp_delta / beam_dp_rho where needed); this one sets none.')
        if self._accountant is not None:
            self._accountant.spend_all(self.privacy_costs(), self.owner)
        return self.noise_label


# -- field names ------------------------------------------------------------------------------------


def _accepting_fields(init):
    """``init`` taking the field-name twins of its callables (``arguments.resolve_fields``),
    resolved once by the outermost constructor (a ``@arguments.public`` class resolves them in
    its own checked constructor first)."""

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        if not self.__dict__.get('_fields_resolved'):
            self._fields_resolved = True
            accepted = arguments.accepted_names(type(self))
            kwargs = arguments.resolve_fields(
                self, [n for n in accepted if n.endswith('_fn')], kwargs)
            unknown = [n for n in kwargs if n.endswith('_field') and n not in accepted]
            if unknown:
                table = arguments.field_arguments([n for n in accepted if n.endswith('_fn')],
                                                  getattr(type(self), 'FIELD_ALIASES', None))
                takes = [t for twins in table.values() for t in twins]
                raise InvalidParamsError(
                    f'{type(self).__name__}: {", ".join(unknown)} is not an argument of '
                    f'{type(self).__name__}; its field arguments are '
                    f'{", ".join(takes + [arguments.TIMESTAMP_FIELD])}.')
            if any(n not in accepted for n in kwargs):     # InvalidParamsError, not TypeError
                raise InvalidParamsError(arguments.explain(
                    type(self).__name__, inspect.signature(type(self).__init__), (), kwargs,
                    {}))
        init(self, *args, **kwargs)

    signature = inspect.signature(init)
    params = list(signature.parameters.values())
    fns = [p.name for p in params if p.name.endswith('_fn')]
    if fns and not any(p.kind == p.VAR_KEYWORD for p in params):
        present = {p.name for p in params}
        twins = [t for ts in arguments.field_arguments(fns).values() for t in ts
                 ] + [arguments.TIMESTAMP_FIELD]
        params += [inspect.Parameter(t, inspect.Parameter.KEYWORD_ONLY, default=None,
                                     annotation=Optional[str])
                   for t in twins if t not in present]
        __init__.__signature__ = signature.replace(parameters=params)
    return __init__


def _data_of(inputs):
    """The records a transform reads: its input, or the data of a (data, queries) pair."""
    if isinstance(inputs, dict):
        return inputs['data']
    if isinstance(inputs, (tuple, list)):
        return inputs[0]
    return inputs


def _with_data(inputs, data):
    if isinstance(inputs, dict):
        return {**inputs, 'data': data}
    if isinstance(inputs, (tuple, list)):
        return type(inputs)([data, *inputs[1:]])
    return data


def _expand_checking_fields(self, expand, inputs):
    checks = self.__dict__.get('_field_checks') or ()
    timestamp = self.__dict__.get('_timestamp_field')
    if not checks and timestamp is None:
        return expand(self, inputs)
    checked = _data_of(inputs) | 'CheckFields' >> beam.ParDo(
        _CheckFieldsFn(self.label, checks, timestamp)).with_outputs(DEAD_LETTER, main='records')
    out = expand(self, _with_data(inputs, checked.records))
    dead = (out.dead_letter, checked[DEAD_LETTER]) | 'MergeFieldDeadLetters' >> \
        beam.Flatten().with_output_types(DeadLetter)
    return out._replace(dead_letter=dead)


def _checking_fields(expand):
    """``expand`` preceded, when the transform reads fields, by 'CheckFields' (records
    without a field, or whose ``timestamp_field`` is not a time, go to the dead letters;
    ``timestamp_field`` becomes the element timestamp) and followed by
    'MergeFieldDeadLetters' (its dead letters join the transform's). A transform's
    ``io_adapter`` (set by ``yaml_provider``: ``inputs(inputs)`` → inputs, ``outputs(out)`` →
    outputs) adapts what it reads and returns, without a composite of its own: the transform
    keeps its own path, so its noise addresses are the same as in a Python pipeline that
    applies it under the same label."""

    @functools.wraps(expand)
    def wrapped(self, inputs):
        if self.__dict__.get('_expanding'):      # a subclass's super().expand(...)
            return expand(self, inputs)
        adapter = self.__dict__.get('io_adapter')
        self._expanding = True
        try:
            if adapter is not None:
                inputs = adapter.inputs(inputs)
            out = _expand_checking_fields(self, expand, inputs)
        finally:
            self._expanding = False
        return out if adapter is None else adapter.outputs(out)

    return wrapped


_MIN_MICROS = -MAX_MICROS


def field_time_micros(name: str, value) -> int:
    """The event time (µs) a ``timestamp_field`` holds.

    Raises:
      InvalidRecordError: for a value that is not a time, or one outside Beam's range.
    """
    if isinstance(value, Timestamp):
        micros = value.micros
    elif isinstance(value, datetime.datetime) and value.tzinfo is not None:
        micros = round(value.timestamp() * 1_000_000)
    elif (isinstance(value, numbers.Real) and not isinstance(value, bool)
          and math.isfinite(value)):
        micros = round(float(value) * 1_000_000)
    else:
        raise InvalidRecordError(f'field {name!r} is not a time (seconds since the epoch, a Beam '
                                 f'Timestamp or an aware datetime): {value!r}')
    if not _MIN_MICROS <= micros < MAX_MICROS:
        raise InvalidRecordError(f'field {name!r} is outside the times Beam can represent: '
                                 f'{value!r}')
    return micros


class _CheckFieldsFn(beam.DoFn):
    """'CheckFields': a record with every field the transform reads passes on (re-timestamped
    at its ``timestamp_field``); any other goes to the dead letters with the reason."""

    def __init__(self, label: str, fields: Sequence[str], timestamp_field: Optional[str]):
        self._label = label
        self._fields = tuple(fields)
        self._timestamp = timestamp_field

    def process(self, record, timestamp=beam.DoFn.TimestampParam):
        try:
            for name in self._fields:
                field_value(record, name)
            if self._timestamp is not None:
                micros = field_time_micros(self._timestamp,
                                           field_value(record, self._timestamp))
        except InvalidRecordError as e:
            yield dead_letter(self._label, 'CheckFields', str(e), record,
                              _timestamp_micros(timestamp))
            return
        if self._timestamp is None:
            yield record
        else:
            yield beam.window.TimestampedValue(record, Timestamp(micros=micros))


def _timestamp_micros(timestamp) -> Optional[int]:
    micros = getattr(timestamp, 'micros', None)
    return micros if micros is not None and -MAX_MICROS <= micros <= MAX_MICROS else None


def _full_label(pipeline: Optional[beam.Pipeline], transform: beam.PTransform) -> str:
    """The full label ('Composite/Inner/Label') of ``transform`` while Beam expands it: Beam
    refuses two transforms with one full label in a pipeline. Without a pipeline (inputs that
    are no PCollections) its own label.

    Raises:
      InvalidParamsError: for ``transform.expand(...)`` called directly inside another
        transform: it has no path of its own, so two such calls could share noise.
    """
    current = getattr(pipeline, '_current_transform', None)
    node = current() if current is not None else None
    if node is None:
        return transform.label
    if node.transform is transform and node.full_label:
        return node.full_label
    name = type(transform).__name__
    raise InvalidParamsError(
        f'{name}: apply it with `pcoll | {name}(...)` (or `\'Label\' >> {name}(...)`), not by '
        f'calling its expand() directly from {node.full_label or "the pipeline"!r}: its noise '
        f'address is its own path in the pipeline, which only an applied transform has.')


def check_callable(owner: str, name: str, fn, optional: bool = False) -> None:
    """Raises ``InvalidParamsError`` unless ``fn`` is callable (or None when ``optional``)."""
    if not (callable(fn) or (optional and fn is None)):
        extra = ' or None' if optional else ''
        raise InvalidParamsError(f'{owner}: {name} must be callable{extra}, got {fn!r}.')


def check_callables(owner: str, optional: Sequence[str] = (), **fns) -> None:
    """``check_callable`` on each of ``fns`` in the order given; the ones named in ``optional``
    may be None."""
    for name, fn in fns.items():
        check_callable(owner, name, fn, optional=name in optional)


# -- records and dead letters -----------------------------------------------------------------------


def render_record(record) -> str:
    """The printable rendering of an input record that ``DeadLetter.record`` holds: its repr,
    truncated. A stage that may dead-letter a record long after extraction (contribution
    bounding) carries this text instead of the record."""
    try:
        text = repr(record)
    except Exception:  # pylint: disable=broad-except
        text = f'<unprintable {type(record).__name__}>'
    if len(text) > _MAX_RECORD_CHARS:
        text = text[:_MAX_RECORD_CHARS] + '...'
    return text


def render_texts(records) -> List[str]:
    """``[render_record(r) for r in records]``: ``map(repr, ...)`` first (one C loop), per
    record only if one fails or is too long."""
    try:
        texts = list(map(repr, records))
        if texts and max(map(len, texts)) > _MAX_RECORD_CHARS:
            raise ValueError
    except Exception:  # pylint: disable=broad-except
        texts = [render_record(r) for r in records]
    return texts


#: Records carried by a pre-aggregated partial (``pack_records``): their renderings joined,
#: the length of each, the event time (µs) of each. One string and two arrays encode and
#: decode in O(1) Python calls, whatever the number of records.
PackedRecords = Tuple[str, np.ndarray, np.ndarray]
NO_RECORDS: PackedRecords = ('', np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))


def pack_records(texts: Sequence[str], micros) -> PackedRecords:
    """Rendered records (``render_texts``) and their event times → ``PackedRecords``: the form
    in which a pre-aggregation carries the records it folded, so that a late aggregate can be
    dead-lettered record by record (``unpack_records``, ``late_record_dead_letter``)."""
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    return ''.join(texts), lengths, np.asarray(micros, dtype=np.int64)


def concat_records(packed: Sequence[PackedRecords]) -> PackedRecords:
    """Several ``PackedRecords`` as one."""
    if len(packed) == 1:
        return packed[0]
    return (''.join(p[0] for p in packed), np.concatenate([p[1] for p in packed]),
            np.concatenate([p[2] for p in packed]))


def unpack_records(packed: PackedRecords) -> Iterable[Tuple[str, int]]:
    """(rendering, event time µs) of each record of a ``PackedRecords``."""
    joined, lengths, micros = packed
    end = 0
    for length, at in zip(np.asarray(lengths).tolist(), np.asarray(micros).tolist()):
        yield joined[end:end + length], at
        end += length


class RecordText(str):
    """An already rendered record (``render_record``): ``dead_letter`` keeps it as it is."""

    def __repr__(self):
        return str(self)


class KeepKeysFn(beam.DoFn):
    """'KeepPublicKeys': records whose key (``key_fn``) is in the public key set given as a side
    input (``keys``: the list of a key ``PCollection``) pass on unchanged; others go to the dead
    letter (``key … is not in the public key set``, as 'ExtractAndValidate' says it for a list).
    A record whose key cannot be computed passes on: 'ExtractAndValidate' dead-letters it with
    its own reason. The set is built once per bundle and key list."""

    def __init__(self, label: str, key_fn):
        self._label = label
        self._key_fn = key_fn
        self._cached = (None, frozenset())

    def process(self, record, keys, timestamp=beam.DoFn.TimestampParam):
        if self._cached[0] is not keys:
            self._cached = (keys, frozenset(k for k in keys if isinstance(k, str)))
        try:
            key = self._key_fn(record)
        except Exception:  # pylint: disable=broad-except
            yield record
            return
        if not isinstance(key, str) or key in self._cached[1]:
            yield record
            return
        yield dead_letter(self._label, 'KeepPublicKeys',
                          f'key {_short(key)} is not in the public key set', record,
                          timestamp.micros)


def _short(key) -> str:
    text = repr(key)
    return text if len(text) <= 80 else text[:80] + '...'


def dead_letter(transform: str, stage: str, reason: str, record,
                event_time_micros: Optional[int] = None) -> beam.pvalue.TaggedOutput:
    """A ``DeadLetter`` on the ``DEAD_LETTER`` output: the record (printed, truncated), why."""
    return beam.pvalue.TaggedOutput(
        DEAD_LETTER, DeadLetter(transform, stage, reason, render_record(record),
                                event_time_micros))


def extract_key(key_fn, record):
    """``key_fn(record)`` in canonical form (``beam_dp.noise.canonical_key``: the key a
    transform keeps and addresses its noise by).

    Raises:
      InvalidRecordError: 'key_fn raised ...', or a key with no canonical encoding (the record
        goes to the dead letter).
    """
    try:
        key = key_fn(record)
    except Exception as e:  # pylint: disable=broad-except
        raise InvalidRecordError(f'key_fn raised {e!r}') from e
    return noise.canonical_key(key)


def extract_unit(unit_fn, record):
    """The privacy unit id of a record (None at event level, when ``unit_fn`` is None).

    Raises:
      InvalidRecordError: if ``unit_fn`` raises or returns None.
    """
    if unit_fn is None:
        return None
    return extract_unit_key(unit_fn, record)[0]


def extract_unit_key(unit_fn, record):
    """``(unit id, key_bytes(unit id))`` of a record (``unit_fn`` not None): the unit and the
    encoding its state is keyed by, computed once.

    Raises:
      InvalidRecordError: as ``extract_unit``.
    """
    try:
        unit = unit_fn(record)
    except Exception as e:  # pylint: disable=broad-except
        raise InvalidRecordError(f'unit_fn raised {e!r}') from e
    if unit is None:
        raise InvalidRecordError('privacy unit id is None')
    try:
        encoded = key_bytes(unit)
    except Exception as e:  # pylint: disable=broad-except
        raise InvalidRecordError(f'privacy unit id cannot be encoded as a key: {e!r}') from e
    return unit, encoded


def key_bytes(key) -> bytes:
    """A deterministic state key for any id (its ``FastPrimitivesCoder`` encoding, which is what
    Beam would key the state by): key a stateful DoFn by this, typed ``Tuple[bytes, Any]``.

    Raises:
      Exception: whatever the coder raises for an id it cannot encode (dead-letter the record).
    """
    return _KEY_CODER.encode(key)


def merge_dead_letters(dead_letters: Sequence[beam.PCollection], debug_metrics: bool = False,
                       namespace: str = 'beam_dp') -> beam.PCollection:
    """'MergeDeadLetters': one ``DeadLetter`` collection from every stage's.

    With ``debug_metrics`` (SENSITIVE: exact counts of private records, e.g. how many records
    exceeded a contribution bound) also 'CountDeadLetters': a Beam counter per stage,
    ``namespace``/``dead_letters/<stage>``. Off by default: no metric is emitted.
    """
    merged = tuple(dead_letters) | 'MergeDeadLetters' >> beam.Flatten().with_output_types(
        DeadLetter)
    if not debug_metrics:
        return merged
    return merged | 'CountDeadLetters' >> beam.Map(_count_dead_letter, namespace).with_output_types(
        DeadLetter)


def _count_dead_letter(dead: DeadLetter, namespace: str) -> DeadLetter:
    beam.metrics.Metrics.counter(namespace, f'dead_letters/{dead.stage}').inc()
    return dead


# -- shards, seeds and timers -----------------------------------------------------------------------


def seeds_at_start(pipeline: beam.Pipeline, keys: Sequence, start_micros: int,
                   create_label: str = 'ShardSeeds',
                   key_type=int) -> beam.PCollection:
    """``create_label`` + 'SeedAtStart': one ``(key, None)`` per shard (or key) at ``start``, so
    every shard gets its timers even if no record ever reaches it (idle keys and empty steps are
    released)."""
    return (
        pipeline
        | create_label >> beam.Create(list(keys))
        | 'SeedAtStart' >> beam.Map(
            lambda key: beam.window.TimestampedValue((key, None), Timestamp(micros=start_micros))
        ).with_output_types(typing.Tuple[key_type, typing.Any]))


def merge_seeds(partials: beam.PCollection, seeds: Optional[beam.PCollection],
                key_type=int) -> beam.PCollection:
    """'MergeSeeds': the stateful DoFn's input, typed so that its key coder is deterministic
    (``seeds`` None: no seeds, e.g. private keys, which start at their first record)."""
    inputs = (partials,) if seeds is None else (partials, seeds)
    return inputs | 'MergeSeeds' >> beam.Flatten().with_output_types(
        typing.Tuple[key_type, typing.Any])

