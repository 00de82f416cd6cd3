"""Issue 29: a long horizon on Prism (batch). Event-level ContinualCountPerKey, K public keys x S
steps, 20k rows, counters read through ``query_metrics``.

Usage (from the repository root, Prism built by .ci/build_prism.sh):
  python benchmarks/throughput_sidebyside/prism_horizon.py KEYS STEPS
"""

import os
import sys
import time

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..')))

import apache_beam as beam  # pylint: disable=wrong-import-position
from apache_beam.options.pipeline_options import PipelineOptions
from tests import runners
from beam_dp import ContinualCountPerKey, PrivacyBudget
from beam_dp.transforms.job_metrics import query_metrics

keys, steps = int(sys.argv[1]), int(sys.argv[2])  # pylint: disable=unbalanced-tuple-unpacking
START, STEP = 1_700_000_000, 60
rows = [beam.window.TimestampedValue((f'k{i % keys}',), START + (i * 7919 % steps) * STEP + 1)
        for i in range(20000)]

class Count(beam.DoFn):
    def process(self, x):
        beam.metrics.Metrics.counter('sbs', 'outputs').inc()

p = beam.Pipeline(options=PipelineOptions(runners.prism_options(streaming=False)))
outs = (p | beam.Create(rows) | ContinualCountPerKey(
    start=START, step=STEP, budget=PrivacyBudget(epsilon=1.0), end=START + steps * STEP,
    public_keys=[f'k{i}' for i in range(keys)], key_fn=lambda r: r[0]))
outs.releases | beam.ParDo(Count())
t0, c0 = time.perf_counter(), time.process_time()
r = p.run(); r.wait_until_finish()
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
n = sum(c.committed for c in query_metrics(r, beam.metrics.MetricsFilter().with_name('outputs'))['counters'])
print(f'prism keys={keys} steps={steps}: {n} releases (expected {keys * steps}), wall {wall:.1f} s, launcher CPU {cpu:.1f} s')
