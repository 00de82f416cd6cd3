"""Private keys (docs/continual_counts.md) for the keyed continual transforms: the
``PrivateKeys`` option and the state machine of one private-keys shard.

When the key universe is not public, keys are hashed into shards (SHA-256, stable across
workers) and each shard keeps *candidate* keys (their ``ContinualKeySelection`` state and exact running
totals, both private) and *selected* keys (a counter started at the selection step: the keys
selected at the same step share one vector counter). A candidate's selection is advanced on EVERY step from its first contribution
(a data-independent schedule), also on steps without data for it. At the selection step s* the
key's counter takes one step whose value is the key's exact total so far (one unit still moves
the counter's input stream by at most its bounded contribution, so the counter's sensitivity is
unchanged), and releases continue every step after. Nothing before s* is ever released (no
back-fill). Cost: the selection's (ε_s, δ) plus the counter's budget (sequential composition).
"""

import dataclasses
import functools
import hashlib
from typing import Callable, Dict, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from beam_dp import _validation as v
from beam_dp.accounting import PrivacyBudget
from beam_dp.accounting import PrivacyCost
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms import exact_int
from beam_dp.mechanisms.key_selection import ContinualKeySelection
from beam_dp.mechanisms.key_selection import KeySelectionState
from beam_dp.mechanisms.key_selection import TruncatedGeometricSelection
from beam_dp.noise import RandomSource
from beam_dp.noise.batched import dlap_tail_tick
from beam_dp.noise.batched import shared_blocks
from beam_dp.noise.batched import shared_words
from beam_dp.noise.samplers import _scale_nd

__all__ = [
    'KeySetInput',
    'KeySetShard',
    'PrivateKeys',
    'PrivateKeysShard',
    'PrivateKeysShardState',
    'ShardKeys',
    'stable_shard',
]

#: Private keys: steps without data after a data step that a candidate still tests one by one
#: before its next test is drawn ahead (``PrivateKeysShard._advance``); public, a cost knob only.
EAGER_STEPS = 8

#: The final test (known end) sees min(count, FINAL_COUNT_CAP): clipping is 1-Lipschitz and
#: monotone, so neighbouring counts stay within 1 and the rule's (ε, δ) is unchanged; it bounds
#: the exact sampler's cost (O(count) interval steps until π reaches 1). π(2048) = 1 unless the
#: per-key ε is below about 2·ln(K/δ)/2048 (then a key above the cap keeps π(2048)).
FINAL_COUNT_CAP = 2048

# key → (per-bin integer totals of one step, new distinct units in that step)
StepContributions = Mapping[str, Tuple[Sequence[int], int]]


def stable_shard(key: str, num_shards: int) -> int:
    """The shard of a private key: SHA-256 of its UTF-8 bytes mod num_shards (Python's ``hash``
    is salted per process, so it would send one key to different shards on different workers)."""
    digest = hashlib.sha256(key.encode('utf-8')).digest()
    return int.from_bytes(digest[:8], 'little') % num_shards


@v.keyword_checked(hints={
    name: 'the selection budget is one argument: budget=PrivacyBudget(epsilon=ε_s, delta=δ)'
    for name in ('epsilon', 'delta', 'rho')})
@dataclasses.dataclass(frozen=True)
class PrivateKeys:
    """Private continual key selection: the ``keys=`` option of the continual transforms.

    A key is released only once ``ContinualKeySelection`` (an SVT per key on its distinct-unit
    count, thresholds on the global step clock with a Basel series of failure probabilities)
    selects it. A key contributed to by a single privacy unit is ever selected with probability
    ≤ δ over the unbounded horizon; a selected key stays selected; steps before its selection
    are never released. Guarantee of the selection: (ε, δ)-DP for a unit contributing to at
    most ``max_keys_per_unit`` keys (1 at event level), composed sequentially with the release
    budget of the transform.

    Known end (issue 23 item 3). With a clock that has a last step T (``end=``), a share
    ``final_share`` = f of the selection budget (default 0.9) goes to ONE batch-quality test at
    step T: every candidate not selected by then is released iff the optimal static rule
    (``TruncatedGeometricSelection``, Desfontaines et al. 2022, at (f·ε, f·δ) for K keys) keeps
    its final distinct-unit count; the continual SVT runs on every step with the rest,
    ((1 - f)·ε, (1 - f)·δ), so very popular keys still appear early. Both count each unit once per
    key (sensitivity K over the whole stream, whatever m and S), and neither cost grows with
    the number of steps (one SVT, one final test per key). Privacy: per key the SVT is
    ((1-f)ε/K, (1-f)δ/K)-DP (module ``key_selection``) and the final test, run on the keys the
    SVT did not select, (fε/K, fδ/K)-DP: adaptive sequential composition gives (ε/K, δ/K) per
    key and (ε, δ) over the K keys a unit touches. A key with a single unit is released with
    probability ≤ δ_f(SVT) + π(1) ≤ (1-f)δ/(K(1+e^ε')) + fδ/K ≤ δ/K. Without a last step (an
    unbounded stream) the whole budget goes to the SVT, as before; ``final_share=0`` keeps that
    behaviour with an end too. ``beam_dp.analysis.units_needed`` says how many units a key
    needs to be released with probability p.

    Args:
      budget: the selection budget, ``PrivacyBudget(epsilon=ε, delta=δ)`` with ε > 0, 0 < δ < 1.
      num_shards: how many stateful shards the (unknown) keys are hashed into (step transforms).
      final_share: f in [0, 1): the share of ε spent on the final test when the release has a
        last step (above); 0 disables it. Public.

    Raises:
      InvalidParamsError: on a bad parameter, or a selection noise scale 2k/ε outside the exact
        samplers' range (``beam_dp.noise.noise_scale_problem``; a user-level release checks it
        again for its k = ``max_keys``).
    """
    budget: PrivacyBudget
    num_shards: int = 8
    final_share: float = 0.9

    def __post_init__(self):
        owner = 'PrivateKeys'
        if not isinstance(self.budget, PrivacyBudget):
            raise InvalidParamsError(f'{owner}: budget must be a PrivacyBudget, got '
                                     f'{self.budget!r}.')
        if self.budget.is_zcdp or not self.budget.delta > 0:
            raise InvalidParamsError(f'{owner}: budget must have epsilon > 0 and delta > 0 '
                                     f'(selection is (epsilon, delta)-DP), got {self.budget}.')
        v.check_positive_int(owner, 'num_shards', self.num_shards)
        if isinstance(self.final_share, bool) or not isinstance(self.final_share, (int, float)) \
                or not 0 <= self.final_share < 1:
            raise InvalidParamsError(f'{owner}: final_share must be a number in [0, 1), got '
                                     f'{self.final_share!r}.')
        self.selection(1)           # its noise scale, checked at construction (issue 21)
        self.horizon_selection(1, True)

    def selection(self, max_keys_per_unit: int = 1) -> ContinualKeySelection:
        """The SVT at the whole budget (a release without a last step)."""
        return _selection(self.budget.epsilon, self.budget.delta, max_keys_per_unit)

    def horizon_selection(self, max_keys_per_unit: int, has_end: bool) -> Tuple[
            ContinualKeySelection, Optional[TruncatedGeometricSelection]]:
        """(continual SVT, final test or None): with a last step and ``final_share`` > 0, the
        SVT at ((1-f)ε, (1-f)δ) and the final static test at (fε, fδ); else the SVT at (ε, δ)."""
        if not has_end or self.final_share == 0:
            return self.selection(max_keys_per_unit), None
        eps, delta, f = self.budget.epsilon, self.budget.delta, float(self.final_share)
        return (_selection((1 - f) * eps, (1 - f) * delta, max_keys_per_unit),
                _final_selection(f * eps, f * delta, max_keys_per_unit))

    def privacy_cost(self) -> PrivacyCost:
        return self.budget.as_cost()

    def shard_of(self, key: str) -> int:
        return stable_shard(key, self.num_shards)


@functools.lru_cache(maxsize=64)
def _final_selection(epsilon: float, delta: float, k: int) -> TruncatedGeometricSelection:
    return TruncatedGeometricSelection(epsilon, delta, k)


@functools.lru_cache(maxsize=64)
def _selection(epsilon: float, delta: float, k: int) -> '_MemoisedThresholds':
    return _MemoisedThresholds(epsilon, delta, k)


@dataclasses.dataclass(frozen=True)
class _MemoisedThresholds(ContinualKeySelection):
    """``ContinualKeySelection`` with its public thresholds memoised (same decisions)."""

    @functools.lru_cache(maxsize=1 << 16)
    def threshold(self, step: int) -> int:
        return super().threshold(step)


@dataclasses.dataclass(frozen=True)
class PrivateKeysShardState:
    """One private-keys shard. ``candidates``: key → (selection state as the tuple of its
    ``KeySelectionState`` fields (step, count, noise, selected_step, due): eight times faster to
    pickle at every step than the object; exact running totals per bin, private; last data
    step, absent until the key's first visit); ``selected``: key → its selection step (its
    counter is a coordinate of ``groups[selection step]``); ``groups``: selection step → (the
    keys selected at that step in sorted order, their vector counter's state); ``wake``: global
    step → the candidates to visit then. The first three only grow."""
    next_step: int
    candidates: Dict[str, Tuple[tuple, Tuple[int, ...], Optional[int]]]
    selected: Dict[str, int]
    groups: Dict[int, Tuple[Tuple[str, ...], object]]
    wake: Dict[int, FrozenSet[str]]


@dataclasses.dataclass(frozen=True)
class PrivateKeysShard:
    """The state machine of one private-keys shard.

    The keys selected at the same step share ONE vector counter (dimension keys × bins): their
    counters start at the same step and take the same steps, so each coordinate is exactly the
    per-key counter (same mechanism, same sensitivity: one unit moves every coordinate as it
    moved the per-key counters' inputs), and the coordinates' noise is independent. One vector
    draw replaces one scalar draw per key.

    Args:
      selection: the per-key continual selection (its 1-based step clock is ``step + 1``).
      counter: the per-key counter (dimension = bins).
      bins: bins per key (1 for counts and sums).
      from_units: grid units → value units.
      noise_stddev: public noise sd of a key's release after its counter took n steps.
      batched: the per-step tests of a step in one pass (``_plain_test``); False runs every
        candidate through ``_advance`` (the scalar path the batched one is tested against).
      backfill: True (cumulative releases): a key's first counter step is everything since
        start; False (per-step and window outputs): only the selection step's own values (the
        steps before the selection are not in any window; the same sensitivity: a subset of
        the unit's bounded contributions).
      final: the static test run at ``final_step`` on every candidate not yet selected
        (``PrivateKeys.horizon_selection``), or None.
      final_step: the 1-based global step of the final test (the clock's last step + 1).
    """
    selection: ContinualKeySelection
    counter: object
    bins: int
    from_units: Callable[[np.ndarray], np.ndarray]
    noise_stddev: Callable[[int], float]
    batched: bool = True
    backfill: bool = True
    final: Optional[TruncatedGeometricSelection] = None
    final_step: Optional[int] = None

    @staticmethod
    def init_state() -> PrivateKeysShardState:
        return PrivateKeysShardState(0, {}, {}, {}, {})

    @staticmethod
    def merge(payloads: Iterable[StepContributions]) -> Dict[str, Tuple[Tuple[int, ...], int]]:
        """Sums several pre-aggregated contributions of one step, per key (one is returned as
        it is: callers only read it)."""
        payloads = list(payloads)
        if len(payloads) == 1:
            return payloads[0]
        merged = {}
        for per_key in payloads:
            for key, (values, new_units) in per_key.items():
                old = merged.get(key)
                merged[key] = (values, new_units) if old is None else (
                    tuple(a + b for a, b in zip(old[0], values)), old[1] + new_units)
        return merged

    def group_counter(self, keys: int):
        """The vector counter of ``keys`` keys selected at one step (dimension keys × bins)."""
        return self.counter if keys == 1 else _group_counter(self.counter, keys * self.bins)

    def release_step(self, state: PrivateKeysShardState, contributions: StepContributions,
                     rng: RandomSource) -> Tuple[List[Tuple[str, List[float], float]],
                                                 PrivateKeysShardState]:
        """Releases step ``state.next_step`` of a private-keys shard.

        Args:
          contributions: key → (per-bin integer totals of this step, new distinct units this
            step), already bounded.
          rng: the transform's source; selection draws from ``rng.derive('select', key)`` and
            the counter of the keys selected at step s* (sorted, k0 first) from
            ``rng.derive('release', k0, step)``: a key is in one shard and selected once, so
            addresses never collide, and do not depend on bundling or the order of keys. A
            key selected alone draws exactly what a per-key counter would.
        Returns:
          ([(key, per-bin estimates in value units, noise sd)] for every selected key in sorted
          order, new state).
        """
        step = state.next_step
        global_step = step + 1                          # the selection's 1-based step clock
        bins = self.bins
        zero = (0,) * bins
        candidates = dict(state.candidates)
        selected = dict(state.selected)
        groups = dict(state.groups)
        wake = dict(state.wake)
        for key in contributions:
            if key not in candidates and key not in selected:
                candidates[key] = (_packed(self.selection.init_state(global_step)), zero)
        visit = set(contributions) | wake.pop(global_step, frozenset())
        chosen_now, later = self._select(candidates, sorted(visit), contributions, global_step,
                                         rng)
        if self.final is not None and global_step == self.final_step:
            chosen_now = sorted(chosen_now + self._final_test(candidates, rng))
        for key, _ in chosen_now:
            selected[key] = step
        for due, keys in later.items():
            wake[due] = wake.get(due, frozenset()) | keys
        out = []
        blocks = shared_blocks(rng) if self.batched else None
        rng = rng if blocks is None else blocks     # a SecureRandom: counters read a buffer
        if chosen_now:
            # First counter step: everything so far, released for the first time now.
            groups[step] = (tuple(k for k, _ in chosen_now),
                            self._init_group(len(chosen_now), step))
            first = dict(chosen_now)
        for start, (keys, counter_state) in groups.items():
            if start == step and self.backfill:
                flat = [x for key in keys for x in first[key]]
            else:
                flat = [x for key in keys for x in contributions.get(key, (zero, 0))[0]]
            estimate, counter_state = self.group_counter(len(keys)).step(
                counter_state, exact_int.exact_ints(flat, len(keys) * bins),
                rng.derive('release', keys[0], step))
            groups[start] = (keys, counter_state)
            sd = self._stddev(step - start + 1, start)
            rows = self.from_units(estimate).reshape(len(keys), bins).tolist()
            out.extend((key, row, sd) for key, row in zip(keys, rows))
        out.sort(key=lambda row: row[0])
        return out, PrivateKeysShardState(step + 1, candidates, selected, groups, wake)

    def _ends(self) -> bool:
        """Whether the counter releases a one-shot total at the known last step
        (``final_share``: ``beam_dp.mechanisms.final_release``)."""
        return self.final_step is not None and hasattr(self.counter, 'final_steps')

    def _init_group(self, keys: int, start: int):
        """A new counter state of ``keys`` keys selected at step ``start``: with a one-shot
        total at the last step, its counter reaches the end after final_step − start steps."""
        counter = self.group_counter(keys)
        if self._ends():
            return counter.init_state(final_steps=self.final_step - start)
        return counter.init_state()

    def _stddev(self, counter_steps: int, start: int) -> float:
        if self._ends():
            return self.noise_stddev(counter_steps, self.final_step - start)
        return self.noise_stddev(counter_steps)

    def _final_test(self, candidates, rng: RandomSource) -> List[Tuple[str, tuple]]:
        """The known end's static test on every remaining candidate (its exact distinct-unit
        count as of this step, kept in its selection state, clipped at ``FINAL_COUNT_CAP``),
        at the address ('select', key,
        'final'): a key is in one shard and tested once. Removes the chosen from
        ``candidates``; returns [(key, totals)]."""
        chosen = []
        for key in sorted(candidates):
            sel, totals = candidates[key][0], candidates[key][1]
            count = min(int(sel[1]), FINAL_COUNT_CAP)
            if self.final.select(count, rng.derive('select', key).derive('final')):
                del candidates[key]
                chosen.append((key, totals))
        return chosen

    def _select(self, candidates, visit: List[str], contributions: StepContributions,
                global_step: int, rng: RandomSource):
        """Evaluates the candidates ``visit`` (sorted) at ``global_step``, updating
        ``candidates`` in place. Returns ([(key, totals)] selected now, {due step: keys}).

        Batched: a plain test (``_plain_test``) runs inline (``dlap_tail_tick`` on the
        address ('select', key, 'key-step', t), or on one ``WordBuffer`` for a ``SecureRandom``
        whose ``derive`` is the identity anyway), every other visit through ``_advance``."""
        bins = self.bins
        chosen_now, later, next_step = [], {}, []
        shared = shared_words(rng) if self.batched else None
        base = rng if shared is None else shared   # a SecureRandom: selection reads its buffer
        if self.batched:
            n, d = _scale_nd(self.selection.scale)
            threshold = self.selection.threshold(global_step) + 1
        for key in visit:
            entry = candidates.get(key)
            if entry is None:                           # selected since it was scheduled
                continue
            sel, totals = entry[0], entry[1]
            last_data = entry[2] if len(entry) > 2 else None
            data = contributions.get(key)
            if data is not None:
                values = data[0]
                totals = ((totals[0] + int(values[0]),) if bins == 1 else
                          tuple(a + int(b) for a, b in zip(totals, values)))
                last_data = global_step
            if self.batched and _plain_test(sel, global_step, data, last_data):
                count = sel[1] + (int(data[1]) if data is not None else 0)
                noise = sel[2]
                src = shared if shared is not None else rng.derive('select', key).derive(
                    'key-step', global_step)
                chosen = dlap_tail_tick(src, n, d, threshold + noise - count)
                sel = (global_step, count, noise, None, None)   # what ``advance`` returns
            else:
                chosen, state = self._advance(KeySelectionState(*sel), global_step, data,
                                              last_data, base.derive('select', key))
                sel = _packed(state)
            if chosen:
                del candidates[key]
                chosen_now.append((key, totals))
                continue
            candidates[key] = (sel, totals, last_data)
            if sel[4] is None:
                next_step.append(key)
            else:
                later.setdefault(sel[4][0], set()).add(key)
        if next_step:
            later.setdefault(global_step + 1, set()).update(next_step)
        return chosen_now, later

    def _advance(self, sel_state: KeySelectionState, global_step: int, data, last_data,
                 rng: RandomSource) -> Tuple[bool, KeySelectionState]:
        """One candidate visited at ``global_step`` (it has data, or its schedule is due).

        Every step of a candidate is evaluated with the law of ``ContinualKeySelection``, by
        one of two exact evaluations chosen from the past only (so the law of the selection
        time is unchanged): a step with data, and the ``EAGER_STEPS`` steps after one, are
        tested on their own (``advance``, address ('key-step', t), ~6 µs); a longer run of
        steps without data is evaluated lazily (``advance_lazy``: one skip-ahead schedule,
        ~50 µs, drawn at the run's first lazy step, so the shard visits the key again only at
        its next data step or its scheduled test). A candidate
        that receives no more records costs nothing per step, but keeps its state: it can
        still be selected (with probability ≤ δ_f if it has one unit), and dropping it would
        change that law."""
        selection = self.selection
        if data is None:
            if (sel_state.due is None and last_data is not None
                    and global_step - last_data <= EAGER_STEPS
                    and sel_state.step == global_step - 1):
                return selection.advance(sel_state, global_step, 0, rng)
            return selection.advance_lazy(sel_state, global_step, 0, rng)
        if sel_state.step < global_step - 1:          # the idle run before this data step
            chosen, sel_state = selection.advance_lazy(sel_state, global_step - 1, 0, rng)
            if chosen:                                  # cannot happen: it was scheduled
                raise AssertionError('private keys: a candidate was not visited when due')
        return selection.advance(sel_state, global_step, int(data[1]), rng)


def _packed(state: KeySelectionState) -> tuple:
    """A selection state as the shard holds it: (step, count, noise, selected_step, due)."""
    return state.step, state.count, state.noise, state.selected_step, state.due


def _plain_test(sel: tuple, global_step: int, data, last_data) -> bool:
    """Whether ``PrivateKeysShard._advance`` would run exactly one ``advance`` test at
    ``global_step`` on a (packed) state that already has its threshold noise (one step after
    the last evaluated one: a data step, or one of the ``EAGER_STEPS`` after one without a
    drawn schedule). That test is then run inline, at the same address and on the same words
    (``dlap_tail_tick``): Bernoulli(P[Y ≥ τ_t + Z - count + 1]), the new state as ``advance``
    returns it."""
    step, _, noise, selected_step, due = sel
    if step != global_step - 1 or noise is None or selected_step is not None:
        return False
    if data is not None:
        return data[1] >= 0
    return due is None and last_data is not None and global_step - last_data <= EAGER_STEPS


@functools.lru_cache(maxsize=256)
def _cached_counter(counter, dimension: int):
    return dataclasses.replace(counter, dimension=dimension)


def _group_counter(counter, dimension: int):
    """``counter`` with another dimension (memoised when the counter is hashable)."""
    try:
        return _cached_counter(counter, dimension)
    except TypeError:
        return dataclasses.replace(counter, dimension=dimension)


@dataclasses.dataclass(frozen=True)
class KeySetInput:
    """Public keys known only when the pipeline runs: a ``PCollection`` of key strings (such as
    ``SelectKeys(...).keys``) given as ``public_keys``; the transform reads it as a side input.

    The keys are hashed into ``num_shards`` shards (``stable_shard``, as private keys are); each
    shard receives its keys at ``start`` (``ShardKeys``) and from then on releases every one of
    them at every step, with or without data, exactly like a public key (``KeySetShard``).
    Records of keys outside the set are dead-lettered before extraction. No selection cost:
    the set is public to this transform (a DP output such as ``SelectKeys``' is
    post-processing; what it cost is on the accountant that paid for it).
    """
    num_shards: int = 8

    def __post_init__(self):
        v.check_positive_int('KeySetInput', 'num_shards', self.num_shards)

    def shard_of(self, key: str) -> int:
        return stable_shard(key, self.num_shards)

    def shards(self, keys: Iterable[str]) -> Dict[int, Tuple[str, ...]]:
        """{shard: its keys, sorted} of a key set (non-string keys are ignored)."""
        out: Dict[int, List[str]] = {}
        for key in set(k for k in keys if isinstance(k, str)):
            out.setdefault(self.shard_of(key), []).append(key)
        return {shard: tuple(sorted(ks)) for shard, ks in out.items()}


class ShardKeys:
    """The loop payload that gives a ``KeySetShard`` its keys (sorted), once, at ``start`` (a
    class of its own, not a tuple: coders keep its type)."""
    __slots__ = ('keys',)

    def __init__(self, keys: Iterable[str]):
        self.keys = tuple(keys)

    def __reduce__(self):
        return ShardKeys, (self.keys,)

    def __eq__(self, other):
        return isinstance(other, ShardKeys) and other.keys == self.keys

    def __hash__(self):
        return hash(self.keys)

    def __repr__(self):
        return f'ShardKeys({self.keys!r})'


@dataclasses.dataclass(frozen=True)
class KeySetShard(PrivateKeysShard):
    """The shard of a ``KeySetInput``: its keys arrive once (``with_keys``) and all start one
    vector counter at step 0 (its state is a ``PrivateKeysShardState`` with every key selected
    at 0 and no candidates); ``release_step`` then releases every key of the shard at every
    step, as a public shard does. Noise at ('release', first key, step): a key is in one shard.
    Contributions of keys outside the shard's set are never released (the transform
    dead-letters their records before extraction)."""

    def with_keys(self, state: PrivateKeysShardState, keys: Sequence[str]
                  ) -> PrivateKeysShardState:
        keys = tuple(sorted(set(keys)))
        if not keys or state.groups:
            return state
        return dataclasses.replace(state, selected={k: 0 for k in keys}, groups={
            0: (keys, self.group_counter(len(keys)).init_state())})

    def release_step(self, state: PrivateKeysShardState, contributions: StepContributions,
                     rng: RandomSource) -> Tuple[List[Tuple[str, List[float], float]],
                                                 PrivateKeysShardState]:
        step = state.next_step
        groups = dict(state.groups)
        out = []
        if groups:
            keys, counter_state = groups[0]
            zero = (0,) * self.bins
            flat = [x for key in keys for x in contributions.get(key, (zero, 0))[0]]
            estimate, counter_state = self.group_counter(len(keys)).step(
                counter_state, exact_int.exact_ints(flat, len(keys) * self.bins),
                rng.derive('release', keys[0], step))
            groups[0] = (keys, counter_state)
            sd = self.noise_stddev(step + 1)
            rows = self.from_units(estimate).reshape(len(keys), self.bins).tolist()
            out = [(key, row, sd) for key, row in zip(keys, rows)]
        return out, PrivateKeysShardState(step + 1, {}, state.selected, groups, {})
