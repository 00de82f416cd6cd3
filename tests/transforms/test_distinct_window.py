"""``ContinualDistinctCountPerKey(count='active', output=('window', W))``: the distinct units with
a record of the key in the last W steps (noise free, TestStream on the DirectRunner in
streaming mode, out-of-order arrival included), the calibration L1 = 2·K·S, the refusals, the
per-unit state bound, private keys, and seeded parity with ``beam_dp.testing.replay``."""

import collections
import pickle
import random

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.util import assert_that
from apache_beam.testing.util import equal_to
from apache_beam.testing.test_stream import TestStream
from apache_beam.transforms.window import TimestampedValue

from beam_dp import ContinualCountPerKey
from beam_dp import ContinualDistinctCountPerKey
from beam_dp import EventLevel
from beam_dp import InvalidParamsError
from beam_dp import PrivacyBudget
from beam_dp import PrivateKeys
from beam_dp import UserLevel
from beam_dp.drivers.bounding import UnitUsage
from beam_dp.drivers.distinct_window import membership_stream
from beam_dp.drivers.keyed import ShardPartial
from beam_dp.testing import release_table
from beam_dp.testing import replay
from beam_dp.testing.replay import Element
from beam_dp.testing.replay import Watermark
from tests import runners
from tests.helpers import NOISE_FREE
from tests.helpers import run_stream
from tests.runners import DIRECT_RUNNER
from tests.runners import prism_options
from tests.runners import requires_prism

pytestmark = pytest.mark.pipeline

STEP = 60
KEYS = ('a', 'b', 'c')


def _unit(k=2, s=2, **kwargs):
    return UserLevel(unit_fn=lambda r: r[1], max_keys_per_unit=k, max_steps_per_unit=s,
                     **kwargs)


def _window(w, **kwargs):
    return ContinualDistinctCountPerKey(public_keys=list(KEYS), start=0, step=STEP,
                                        output=('window', w), count='active', **kwargs)


def kept_cells(records, k, s):
    """{(key, unit): kept active steps}: each unit's first k keys and per key its first s
    steps (time order), as 'BoundContributions' keeps them when records arrive in time order."""
    keys, kept = {}, collections.defaultdict(list)
    for key, unit, seconds in sorted(records, key=lambda r: r[2]):
        step = seconds // STEP
        held = keys.setdefault(unit, [])
        if key not in held:
            if len(held) >= k:
                continue
            held.append(key)
        used = kept[(key, unit)]
        if step not in used and len(used) < s:
            used.append(step)
    return kept


def exact_window(records, steps, k, s, w):
    """{(key, step): distinct units with a kept step of the key in [step − w + 1, step]}."""
    out = {(key, st): 0 for key in KEYS for st in range(steps)}
    for (key, _), used in kept_cells(records, k, s).items():
        for st in range(steps):
            out[(key, st)] += any(st - w < t <= st for t in used)
    return out


def test_exact_window_active_units_out_of_order():
    rng = random.Random(5)
    records = []
    for u in range(30):
        for key in rng.sample(KEYS, 2):                 # ≤ K keys
            for st in rng.sample(range(8), 4):          # ≤ S steps of each
                records += [(key, f'u{u}', st * STEP + rng.randrange(STEP))] * rng.randint(1, 2)
    # arrival order: every step's records before the watermark passes it, shuffled in the
    # step (so a unit's steps of one batch may arrive out of order)
    stream = TestStream().advance_watermark_to(0)
    batches = collections.defaultdict(list)
    for r in records:
        batches[r[2] // (2 * STEP)].append(r)
    for b in sorted(batches):
        chunk = batches[b]
        rng.shuffle(chunk)
        stream = stream.add_elements([TimestampedValue(r, r[2]) for r in chunk])
        stream = stream.advance_watermark_to((b + 1) * 2 * STEP - 1)
    stream = stream.advance_watermark_to(10 * STEP).advance_watermark_to_infinity()
    # within the bounds every record's step is kept whatever its arrival order: a unit's
    # later step may arrive before an earlier one (the coverage deltas then fill the gap)
    expected = exact_window(records, 8, 2, 4, 3)
    assert min(expected.values()) >= 5 and len(set(expected.values())) > 5
    run_stream(stream, _window(3, end=8 * STEP, budget=NOISE_FREE, privacy_unit=_unit(2, 4)),
               expected=[(k, st, float(v)) for (k, st), v in expected.items()],
               extract=lambda r: (r.key, r.step, round(r.value, 6)), runner=DIRECT_RUNNER)


def test_repeats_silent_over_s_dead_lettered_and_returning_units():
    records = ([('a', 'u1', 1)] * 5 + [('a', 'u2', 2), ('a', 'u1', 70), ('b', 'u1', 71),
                                       ('a', 'u2', 250), ('b', 'u3', 125), ('b', 'u3', 126)]
               + [('a', 'u1', 310)]                        # u1's third step of 'a': over S = 2
               + [('c', 'u1', 80)])                        # u1's third key: over K = 2
    stream = (TestStream().advance_watermark_to(0)
              .add_elements([TimestampedValue(r, r[2]) for r in records])
              .advance_watermark_to(400).advance_watermark_to_infinity())
    expected = exact_window(records, 6, 2, 2, 2)
    #  a: u1 on 0, 1; u2 on 0, 4 → windows of 2: 2, 2, 1, 0, 1, 1
    assert [expected[('a', s)] for s in range(6)] == [2, 2, 1, 0, 1, 1]
    assert [expected[('b', s)] for s in range(6)] == [0, 1, 2, 1, 0, 0]
    run_stream(stream, _window(2, end=6 * STEP, budget=NOISE_FREE, privacy_unit=_unit(2, 2)),
               expected=[(k, s, float(v)) for (k, s), v in expected.items()],
               extract=lambda r: (r.key, r.step, round(r.value, 6)), runner=DIRECT_RUNNER,
               dead=[('BoundContributions', 'contribution bound: unit already contributed to '
                      'max_steps_per_unit=2 steps of this key'),
                     ('BoundContributions', 'contribution bound: unit already contributed to '
                      'max_keys_per_unit=2 keys')])


def test_calibration_prefix_two_k_s_or_fresh_k_s_w_whichever_is_lower():
    unit = UserLevel(unit_fn=len, max_keys_per_unit=3, max_contributions_per_step=5,
                     max_steps_per_unit=4, max_total_contributions=100)
    eps = PrivacyBudget(epsilon=1.0)
    forced = _window(7, end=600 * STEP, budget=eps, privacy_unit=unit, mechanism='balanced_tree')
    bound = forced.driver.privacy_unit
    assert (bound.max_contributions_per_step, bound.max_steps_per_unit) == (1, 4)
    assert bound.bounding.max_steps_per_unit == 4 and type(bound.bounding) is UserLevel
    assert forced.driver.sensitivity()[0] == 2 * 3 * 4                 # 2·K·S
    capped = _window(7, end=600 * STEP, budget=eps, privacy_unit=UserLevel(
        unit_fn=len, max_keys_per_unit=3, max_steps_per_unit=4, max_total_contributions=5))
    assert capped.driver.sensitivity()[0] == 10                        # 2C
    # the prefix counter: a cumulative count's whose unit has 2S steps per key, m = 1
    count = ContinualCountPerKey(public_keys=list(KEYS), start=0, step=STEP, end=600 * STEP,
                                 budget=eps, mechanism='balanced_tree', privacy_unit=UserLevel(
                                     unit_fn=len, max_keys_per_unit=3, max_steps_per_unit=8))
    assert forced.driver.mechanism_name.endswith(count.driver.mechanism_name)
    for s in (0, 100, 599):
        assert forced.driver.noise_stddev(s) == pytest.approx(count.driver.noise_stddev(s))
    # fresh noise per window value: a per-step count with S·W steps per key (L1 = K·S·W)
    fresh = ContinualCountPerKey(public_keys=list(KEYS), start=0, step=STEP, end=600 * STEP,
                                 output='per_step', budget=eps, privacy_unit=UserLevel(
                                     unit_fn=len, max_keys_per_unit=3, max_steps_per_unit=28))
    assert fresh.driver.sensitivity()[0] == 3 * 4 * 7
    auto = _window(7, end=600 * STEP, budget=eps, privacy_unit=unit)
    assert 'fresh_per_window' in auto.driver.mechanism_name           # W = 7: fresh is lower
    assert auto.driver.noise_stddev(599) == pytest.approx(fresh.driver.noise_stddev(599))
    assert auto.driver.noise_stddev(0) < max(forced.driver.noise_stddev(s) for s in range(600))
    # a long window: the prefix counter's worst sd is below fresh noise per window value
    long = _window(90, end=365 * STEP, budget=eps, privacy_unit=UserLevel(
        unit_fn=len, max_keys_per_unit=1, max_steps_per_unit=4))
    assert 'membership_prefix' in long.driver.mechanism_name
    assert max(long.driver.noise_stddev(s) for s in range(365)) < \
        long.driver.fresh_counter().noise_stddev
    # no known horizon: fresh (the prefix counter's sd grows without bound)
    assert 'fresh_per_window' in ContinualDistinctCountPerKey(
        public_keys=['a'], start=0, step=STEP, count='active', output=('window', 90),
        budget=eps, privacy_unit=_unit(1, 4)).driver.mechanism_name


@pytest.mark.parametrize('kwargs, match', [
    (dict(count='active'), r"needs output='per_step' .* or output=\('window', W\)"),
    (dict(count='active', output=('window', 7), final_share=0.5), 'final_share does not apply'),
    (dict(count='active', output=('window', 0)), r"output must be"),
])
def test_refusals_name_the_argument(kwargs, match):
    with pytest.raises(InvalidParamsError, match=match):
        ContinualDistinctCountPerKey(public_keys=['a'], start=0, step=STEP, end=600,
                                     budget=NOISE_FREE, privacy_unit=_unit(), **kwargs)


def test_event_level_is_refused_as_for_every_active_count():
    with pytest.raises(InvalidParamsError, match='privacy_unit must be UserLevel'):
        ContinualDistinctCountPerKey(public_keys=['a'], start=0, step=STEP, end=600,
                                     budget=NOISE_FREE, count='active', output=('window', 3),
                                     privacy_unit=EventLevel())


def test_per_unit_state_is_bounded_by_k_keys_s_live_steps_and_one_last_step():
    """A unit's record in the window mode: ≤ K keys, each with its released-step count, its
    latest released step and its ≤ S unreleased steps; a key collapses to ``(key,)`` once its
    S steps are released (measured: pickled bytes stop growing)."""
    bound = UserLevel(unit_fn=len, max_keys_per_unit=3, max_steps_per_unit=4)
    record, sizes, rng = (), [], random.Random(0)
    for i in range(3000):
        released = i // 10 - 2
        usage = UnitUsage.decode(bound, record, released, keep_keys=True, keep_steps=True,
                                 keep_last=True)
        key, step = f'key{rng.randrange(50)}', i // 10
        if not usage.counted(key, step):
            usage.offer(key, step)
        record = usage.record()
        sizes.append(len(pickle.dumps(record)))
        for entry in usage.keys.values():
            assert entry.live is None or len(entry.live) <= 4
    assert len(record) == 1 + 3 and all(len(e) == 1 for e in record[1:])
    assert max(sizes) <= 220, max(sizes)
    assert sizes[-1] <= 80


def test_the_latest_released_step_survives_the_record():
    bound = UserLevel(unit_fn=len, max_keys_per_unit=1, max_steps_per_unit=3)
    usage = UnitUsage.decode(bound, (), keep_keys=True, keep_steps=True, keep_last=True)
    usage.offer('a', 2)
    usage.offer('a', 5)
    usage = UnitUsage.decode(bound, usage.record(), 3, keep_keys=True, keep_steps=True,
                             keep_last=True)           # step 2 released, 5 live
    assert sorted(usage.active_steps('a')) == [2, 5]
    assert usage.record() == (2, ('a', 1, 2, 5, 1))


def _membership_events(driver, cells, w, steps):
    """Replay events of the window's ±1 streams: one ``ShardPartial`` per (shard, step)."""
    sums = collections.defaultdict(lambda: collections.defaultdict(int))
    for (key, _), used in cells.items():
        for step, d in membership_stream(used, w):
            if step < steps:
                _, _, shard, flat, _ = driver.extract(key, driver.clock.step_bounds(step)[0],
                                                      None, None)
                sums[(shard, step)][flat] += d
    events = [Element(shard, None) for shard in range(driver.num_shards)]
    for (shard, step), per in sorted(sums.items()):
        events.append(Element(shard, ShardPartial(step, np.fromiter(per.keys(), np.int64),
                                                  np.fromiter(per.values(), np.int64))))
    return events + [Watermark(driver.clock.release_time_micros(steps - 1))]


def test_seeded_parity_with_replay():
    rng = random.Random(3)
    records = []
    for u in range(60):
        for key in rng.sample(KEYS, 2):                     # ≤ K keys per unit
            for step in rng.sample(range(6), 2):            # ≤ S steps per key
                records += [(key, f'u{u}', step * STEP + rng.randrange(STEP))] * \
                    rng.randint(1, 3)
    t = _window(3, end=6 * STEP, budget=PrivacyBudget(epsilon=1.0), privacy_unit=_unit(2, 2),
                testing_seed=7, label='Window')
    cells = kept_cells(records, 2, 2)
    expected = release_table(replay(t.driver.loop_driver(), _membership_events(
        t.driver, cells, 3, 6), label='Window', seed=7, end_input=False).releases)
    shuffled = list(records)
    rng.shuffle(shuffled)
    stream = TestStream().advance_watermark_to(0)
    for chunk in (shuffled[::2], shuffled[1::2]):
        stream = stream.add_elements([TimestampedValue(r, r[2]) for r in chunk])
    stream = stream.advance_watermark_to(400).advance_watermark_to_infinity()
    run_stream(stream, t, extract=lambda r: (r.key, r.step, r.value, r.noise_stddev),
               runner=DIRECT_RUNNER,
               expected=[(k, s, v[0], t.driver.noise_stddev(s)) for (k, s), v in expected.items()])


def test_private_keys_release_the_window_value_from_selection():
    # 'crowd': 150 units active on step 0 only → the window of 3 holds them on steps 0..2;
    # selected at the last step (the known end's final test), its first release is its
    # window value there (the ±1 stream back-filled: 150, not 0). 'heavy': one unit on every
    # step → never selected
    records = ([(('heavy', 'u0'), 1 + 60 * s) for s in range(3) for _ in range(50)]
               + [(('crowd', f'u{i + 1}'), 2 + i % 50) for i in range(150)])
    stream = (TestStream().advance_watermark_to(0)
              .add_elements([TimestampedValue(r, t) for r, t in records])
              .advance_watermark_to(400).advance_watermark_to_infinity())
    t = ContinualDistinctCountPerKey(
        keys=PrivateKeys(PrivacyBudget(epsilon=1.0, delta=1e-6), num_shards=2), start=0,
        step=STEP, end=180, budget=NOISE_FREE, privacy_unit=_unit(1, 3),
        output=('window', 3), count='active', testing_seed=1)

    def match(got):
        got = sorted(g for g in got if g[1] >= 2)
        assert got == [('crowd', 2, 150.0)], got
    run_stream(stream, t, runner=DIRECT_RUNNER, expected=match, dead=[],
               extract=lambda r: (r.key, r.step, round(r.value, 6)))


@pytest.mark.prism
@requires_prism
def test_on_prism():
    records = [('a', 'u1', 1), ('a', 'u1', 2), ('a', 'u2', 61), ('b', 'u2', 62), ('a', 'u1', 185),
               ('b', 'u1', 190)]
    stream = (TestStream().advance_watermark_to(0)
              .add_elements([TimestampedValue(r, r[2]) for r in records])
              .advance_watermark_to(300).advance_watermark_to_infinity())
    t = ContinualDistinctCountPerKey(public_keys=['a', 'b'], start=0, step=STEP, end=4 * STEP,
                                     output=('window', 2), count='active', budget=NOISE_FREE,
                                     privacy_unit=_unit(2, 2))
    # a: u1 on 0, 3; u2 on 1 → 1, 2, 1, 1;  b: u2 on 1, u1 on 3 → 0, 1, 1, 1
    def run():
        with beam.Pipeline(argv=prism_options(streaming=True)) as p:
            out = p | stream | t
            assert_that(out.releases | beam.Map(lambda r: (r.key, r.step, round(r.value, 6))),
                        equal_to([('a', 0, 1.0), ('a', 1, 2.0), ('a', 2, 1.0), ('a', 3, 1.0),
                                  ('b', 0, 0.0), ('b', 1, 1.0), ('b', 2, 1.0), ('b', 3, 1.0)]))
            assert_that(out.dead_letter, equal_to([]), label='no dead letters')

    runners.on_prism_with_one_rerun(run)
