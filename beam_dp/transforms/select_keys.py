"""Private partition (key) selection over bounded input: which keys may appear at all.

Wiring (labels are part of the update contract):

  records
    | 'ExtractAndValidate'   (unit, key) per record; malformed → dead letter
    | 'DistinctUnitKeys'     one element per (unit, key)            (user-level only)
    | 'GroupByUnit' + 'BoundKeysPerUnit'  keep ≤ max_keys_per_unit keys per unit (user-level)
    | 'CountUnitsPerKey'     distinct units per key (exact, private, never output)
    | 'SelectPartitions'     one seeded/secure draw per key: released iff selected

Use it to choose the keys of a batch aggregation, or as the public key list of a continual
transform run later over the same population.
"""

import hashlib
import operator
import typing
from typing import Any, Callable, NamedTuple, Optional

import apache_beam as beam

from beam_dp import noise
from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.keyed import text_key
from beam_dp.errors import InvalidParamsError
from beam_dp.errors import InvalidRecordError
from beam_dp.mechanisms.key_selection import GaussianThresholdSelection
from beam_dp.mechanisms.key_selection import LaplaceThresholdSelection
from beam_dp.mechanisms.key_selection import TruncatedGeometricSelection
from beam_dp.privacy_unit import EventLevel
from beam_dp.privacy_unit import PrivacyUnit
from beam_dp.privacy_unit import UserLevel
from beam_dp.transforms import arguments
from beam_dp.transforms import shell
from beam_dp.transforms.shell import DEAD_LETTER
from beam_dp.transforms.shell import dead_letter

__all__ = [
    'KeySelectionOutputs',
    'SELECT_KEYS_DOCS',
    'SelectKeys',
]

METHODS = {
    'truncated_geometric': TruncatedGeometricSelection,
    'laplace': LaplaceThresholdSelection,
    'gaussian': GaussianThresholdSelection,
}


#: Descriptions of the arguments of ``SelectKeys`` (``arguments.public`` lists them in its
#: docstring).
SELECT_KEYS_DOCS = {
    **{name: arguments.COMMON_DOCS[name] for name in (
        'key_fn', 'accountant', 'noise_key', 'debug_metrics', 'testing_seed', 'label')},
    'budget': '``PrivacyBudget(epsilon=ε, delta=δ)`` with δ > 0 (a key with a single unit is '
              'released with probability at most δ/K).',
    'privacy_unit': '``EventLevel()`` (default: each record is a unit with one key) or '
                    '``UserLevel(unit_fn, max_keys_per_unit=K, ...)``: each unit is bounded '
                    'to K keys (the rest are dead-lettered) and counted once per key. Only '
                    '``unit_fn`` and K apply here (a unit counts once per key, so m, S, C do '
                    'not change the selection; ``max_units`` is not needed: the input is '
                    'bounded): the ``UserLevel`` of the continual transform that uses the '
                    'selected keys can be passed as is.',
    'method': "'truncated_geometric' (default), 'laplace' or 'gaussian'.",
}

_USER_LEVEL_HINT = ('the privacy unit is one argument: use privacy_unit=UserLevel('
                    'unit_fn=<record → unit id>, max_keys_per_unit=K, max_steps_per_unit=1) '
                    '(SelectKeys uses unit_fn and K only)')


class KeySelectionOutputs(NamedTuple):
    """``keys``: the selected keys (strings); ``dead_letter``: ``DeadLetter`` records."""
    keys: beam.PCollection
    dead_letter: beam.PCollection


def _rank(unit, key) -> bytes:
    # A per-unit, data-independent order of its keys (depends only on the unit's own keys),
    # so the kept subset is deterministic on every runner.
    return hashlib.sha256(repr((unit, key)).encode('utf-8')).digest()


class _ExtractFn(beam.DoFn):

    def __init__(self, label: str, key_fn, unit_fn):
        self._label = label
        self._key_fn = key_fn
        self._unit_fn = unit_fn

    def process(self, record):
        try:
            key = text_key(shell.extract_key(self._key_fn, record))
            unit = shell.extract_unit(self._unit_fn, record)
            try:
                hash(unit)                    # 'DistinctUnitKeys' groups by (unit, key)
            except TypeError as e:
                raise InvalidRecordError(f'privacy unit id is not hashable: {e}') from e
        except InvalidRecordError as e:
            yield dead_letter(self._label, 'ExtractAndValidate', str(e), record)
            return
        yield unit, key


class _BoundKeysFn(beam.DoFn):
    """(unit, [keys]) → the unit's ≤ K kept keys; the rest are dead-lettered."""

    def __init__(self, label: str, max_keys: int):
        self._label = label
        self._max_keys = max_keys

    def process(self, element):
        unit, keys = element
        ranked = sorted(set(keys), key=lambda k: _rank(unit, k))
        yield from ranked[:self._max_keys]
        for key in ranked[self._max_keys:]:
            yield dead_letter(self._label, 'BoundKeysPerUnit',
                              f'contribution bound: unit already contributed to '
                              f'max_keys_per_unit={self._max_keys} keys', (unit, key))


class _SelectFn(beam.DoFn):

    def __init__(self, rule, noise_label: str, rng: noise.RandomSource):
        self._rule = rule
        self._label = noise_label         # the transform's full path: noise addresses only
        self._rng = rng

    def process(self, element):
        key, units = element
        if self._rule.select(int(units), self._rng.derive(self._label, 'select', key)):
            yield key


@arguments.public(docs=SELECT_KEYS_DOCS, hints={'unit_fn': _USER_LEVEL_HINT,
                                               'max_keys_per_unit': _USER_LEVEL_HINT})
class SelectKeys(shell.ShellTransform):
    """Differentially private key (partition) selection over bounded input.

    Releases the set of keys that are privately selected from the records; every other key is
    suppressed. A key is decided once, on its final number n of distinct privacy units.

    Privacy unit and neighbours: add/remove one privacy unit. ``privacy_unit=EventLevel()``
    (default): each record is a unit, K = 1. ``privacy_unit=UserLevel(unit_fn,
    max_keys_per_unit=K, ...)``: all records of one ``unit_fn`` id; each unit is bounded first to
    K keys (a per-unit deterministic choice; the rest are dead-lettered) and counted once per
    key. (``unit_fn=``/``max_keys_per_unit=`` as separate arguments are refused with an
    ``InvalidParamsError`` saying what to write.)

    Guarantee: (ε, δ)-DP with ``budget=PrivacyBudget(epsilon=ε, delta=δ)``:
      * 'truncated_geometric' (default): the optimal rule of Desfontaines et al. (PoPETs 2022),
        per key (ε/K, δ/K), sampled exactly;
      * 'laplace': n + DLap(K/ε) ≥ τ with P[1 + DLap ≥ τ] ≤ δ/K (PipelineDP's thresholding);
      * 'gaussian': n + DGauss(σ²) ≥ τ, σ from (ε, δ/2) via zCDP, τ from δ/(2K).
    A key with a single unit is released with probability ≤ δ/K. The cost is checked against
    ``accountant`` at construction and recorded on it when the transform is applied.

    Not guaranteed: the order of output keys; unbounded input (use ``keys=PrivateKeys(...)`` on
    a continual transform for streams).

    Cite: Desfontaines, Voss, Gipson, Mandayam, "Differentially private partition selection",
    PoPETs 2022; Korolova et al. 2009 (thresholding).

    Returns:
      ``KeySelectionOutputs(keys, dead_letter)``.

    Raises:
      InvalidParamsError: on a bad parameter, naming it.
      BudgetExceededError: if ``accountant`` cannot pay for ``budget``.
    """

    def __init__(self, *, budget: PrivacyBudget,
                 privacy_unit: Optional[PrivacyUnit] = None,
                 key_fn: Callable[[Any], Any] = operator.itemgetter(0),
                 method: str = 'truncated_geometric', **kwargs):
        # kwargs: the shared arguments (label, accountant, noise_key, debug_metrics,
        # testing_seed) of ``ShellTransform``, in the public signature (``arguments.public``)
        super().__init__(**kwargs)
        owner = self.owner
        if not isinstance(budget, PrivacyBudget):
            raise InvalidParamsError(f'{owner}: budget must be a PrivacyBudget, got {budget!r}.')
        if budget.is_zcdp or not budget.delta > 0:
            raise InvalidParamsError(f'{owner}: budget must have epsilon > 0 and delta > 0, got '
                                     f'{budget}.')
        if method not in METHODS:
            options = ', '.join(repr(m) for m in METHODS)
            raise InvalidParamsError(f'{owner}: method must be one of {options}, got {method!r}.')
        shell.check_callable(owner, 'key_fn', key_fn)
        privacy_unit = EventLevel() if privacy_unit is None else privacy_unit
        if isinstance(privacy_unit, UserLevel):
            unit_fn, max_keys_per_unit = privacy_unit.unit_fn, privacy_unit.max_keys_per_unit
        elif isinstance(privacy_unit, EventLevel):
            unit_fn, max_keys_per_unit = None, 1
        else:
            raise InvalidParamsError(f'{owner}: privacy_unit must be EventLevel() or '
                                     f'UserLevel(...), got {privacy_unit!r}.')
        with self.params():
            self._rule = METHODS[method](budget.epsilon, budget.delta, max_keys_per_unit)
        self._budget = budget
        self._method = method
        self._key_fn = key_fn
        self._privacy_unit = privacy_unit
        self._unit_fn = unit_fn
        self._max_keys = max_keys_per_unit
        self.check_budget()

    @property
    def rule(self):
        """The pure selection rule (its ``selection_probability(n)`` is exact and public)."""
        return self._rule

    def privacy_costs(self):
        return [(self.label, self._rule.privacy_cost())]

    def display_data(self):
        return {'method': self._method, 'budget': str(self._budget),
                'privacy_unit': self._privacy_unit.describe(),
                'max_keys_per_unit': self._max_keys}

    def expand(self, records):
        noise_label = self.spend_budget(records)
        label = self.label
        extracted = records | 'ExtractAndValidate' >> beam.ParDo(
            _ExtractFn(label, self._key_fn, self._unit_fn)).with_output_types(
                typing.Tuple[typing.Any, str]).with_outputs(DEAD_LETTER, main='valid')
        dead = [extracted[DEAD_LETTER]]
        if self._unit_fn is None:
            ones = extracted.valid | 'OnePerRecord' >> beam.Map(lambda e: (e[1], 1))
        else:
            bounded = (
                extracted.valid
                | 'DistinctUnitKeys' >> beam.Distinct()
                | 'GroupByUnit' >> beam.GroupByKey()
                | 'BoundKeysPerUnit' >> beam.ParDo(
                    _BoundKeysFn(label, self._max_keys)).with_outputs(DEAD_LETTER, main='kept'))
            dead.append(bounded[DEAD_LETTER])
            ones = bounded.kept | 'OnePerUnit' >> beam.Map(lambda key: (key, 1))
        keys = (
            ones
            | 'CountUnitsPerKey' >> beam.CombinePerKey(sum)
            | 'SelectPartitions' >> beam.ParDo(_SelectFn(self._rule, noise_label, self.rng)))
        keys.element_type = str
        return KeySelectionOutputs(keys, shell.merge_dead_letters(dead, self.debug_metrics,
                                                                  self.label))

