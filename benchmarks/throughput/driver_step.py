"""Driver cost of one timer firing: ``KeyedReleaseDriver.release_public_step`` on one shard of
512 public keys (a third with data), 64 steps, mean ms per step, for the default counter and
the old tree (``estimator='variance_reduced'``), ε = 1 and ρ = 0.5. Usage:
``python benchmarks/throughput/driver_step.py`` (an older checkout: ``PYTHONPATH=<it>``; a
driver without ``mechanism=`` runs its default only)."""
import time, sys
import numpy as np
from beam_dp import noise
from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.keyed import KeyLayout, KeyedReleaseDriver
from beam_dp.privacy_unit import EventLevel
keys=[f'k{i}' for i in range(512)]
for budget in [PrivacyBudget(epsilon=1.0), PrivacyBudget(rho=0.5)]:
  for kw in [dict(), dict(estimator='variance_reduced')]:
    try:
        d = KeyedReleaseDriver('count', budget, EventLevel(), StepClock(0, 60_000_000, last_step=63), layout=KeyLayout.of(keys, 1), **kw)
    except TypeError:
        if kw: continue
        d = KeyedReleaseDriver('count', budget, EventLevel(), StepClock(0, 60_000_000, last_step=63), layout=KeyLayout.of(keys, 1))
    st = d.init_shard(0); rng = noise.seeded(1)
    contrib=[(np.arange(0,512,3), np.ones(171, dtype=np.int64))]
    t=time.perf_counter()
    for s in range(64):
        st2 = d.add_pending(st, (s, contrib[0][0], contrib[0][1]))
        rows, st = d.release_public_step(0, st2, rng.derive(s))
    dt=(time.perf_counter()-t)/64
    print(budget, kw, getattr(d,'mechanism_name'), '%.2f ms/step/shard(512 keys)'%(dt*1e3))
