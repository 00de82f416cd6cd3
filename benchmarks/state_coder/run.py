"""Benchmark: cost of the versioned state coder (``beam_dp.transforms.state_types.StateCoder``)
against ``PickleCoder`` (what every state cell used before) on typical keyed shard states.

A ``PublicShardState`` as the single-cell release loop keeps it (``shard_state``): a shard of
1, 64 and 512 public keys (512 is the default shard size), the unbounded counter
(``InfiniteTreeCounter``, no horizon) after 100 real release steps, with one step's
pre-aggregated contributions pending (``ShardPartial``). Per state: encoded bytes and the
median over 7 repeats of the mean encode / decode time (timeit), both coders.

Usage: python benchmarks/state_coder/run.py   (about 20 s)
Writes benchmarks/state_coder/results/state_coder.json.
"""

import json
import os
import platform
import statistics
import sys
import timeit

import numpy as np
from apache_beam.coders import PickleCoder

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..')))

from beam_dp.accounting import PrivacyBudget  # noqa: E402
from beam_dp.drivers import KeyedReleaseDriver  # noqa: E402
from beam_dp.drivers import KeyLayout  # noqa: E402
from beam_dp.drivers import StepClock  # noqa: E402
from beam_dp.drivers.keyed import ShardPartial  # noqa: E402
from beam_dp.noise import seeded  # noqa: E402
from beam_dp.privacy_unit import EventLevel  # noqa: E402
from beam_dp.transforms.state_types import StateCoder  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SHARD_SIZES = (1, 64, 512)
STEPS = 100


def shard_state(k: int):
    keys = [f'k{i:05d}' for i in range(k)]
    driver = KeyedReleaseDriver(
        metric='count', budget=PrivacyBudget(epsilon=1.0), privacy_unit=EventLevel(),
        clock=StepClock(start_micros=0, step_micros=60_000_000), layout=KeyLayout.of(keys, 1))
    state = driver.init_shard(0)
    rng = seeded(1).derive('state_coder', k)
    data = np.random.default_rng(k)
    for _ in range(STEPS):
        _, state = driver.release_step(0, state, [(np.arange(k), data.poisson(2, k))], rng)
    pending = ShardPartial(STEPS, np.arange(k, dtype=np.int64), data.poisson(2, k))
    return type(state)(state.next_step, state.counter_state, (pending,), False)


def timed(fn, number):
    return statistics.median(timeit.repeat(fn, number=number, repeat=7)) / number * 1e6


def main():
    rows = []
    coders = {'StateCoder': StateCoder(), 'PickleCoder': PickleCoder()}
    for k in SHARD_SIZES:
        state = shard_state(k)
        for name, coder in coders.items():
            data = coder.encode(state)
            back = coder.decode(data)
            assert coder.encode(back) == data or name == 'PickleCoder'
            number = 2000 if k < 512 else 500
            rows.append({'keys_per_shard': k, 'coder': name, 'bytes': len(data),
                         'encode_us': round(timed(lambda: coder.encode(state), number), 2),
                         'decode_us': round(timed(lambda: coder.decode(data), number), 2)})
            print(rows[-1], flush=True)
    out = {'command': 'python benchmarks/state_coder/run.py',
           'state': f'PublicShardState, InfiniteTreeCounter after {STEPS} steps, one pending '
                    'ShardPartial', 'python': platform.python_version(),
           'machine': platform.machine(), 'rows': rows}
    os.makedirs(os.path.join(HERE, 'results'), exist_ok=True)
    with open(os.path.join(HERE, 'results', 'state_coder.json'), 'w') as f:
        json.dump(out, f, indent=1)
        f.write('\n')


if __name__ == '__main__':
    main()
