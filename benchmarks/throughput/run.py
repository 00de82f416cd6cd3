"""Benchmark (b): throughput of ContinualCountPerKey against the same pipeline without DP.

Every pipeline reads the SAME input: ``--events`` events (default 1M) generated inside the
pipeline by a DoFn from a fixed seed (100 chunks; each chunk's numpy generator is seeded by
(seed, chunk)), each event ``(key, user)`` with key ~ Zipf(1.1) over ``--keys`` public keys
(default 10k) and user uniform over ``--users`` (default 100k), timestamped uniformly over
``--steps`` (default 64) steps of 60 s. All pipelines run on the same runner in the same process
(``beam.Pipeline(runner='FnApiRunner')``, batch), one after the other, interleaved per repeat.

Pipelines (``--pipelines``):
  source        generation + a counting sink only (the floor every pipeline pays);
  baseline      no DP: WindowInto(FixedWindows(step)) + CombinePerKey(CountCombineFn) per key
                and step (outputs only (key, step) cells that have events);
  dp_sharded    beam_dp ContinualCountPerKey, default sharding (512 keys per shard), ε = 1,
                event-level, ``end`` after 64 steps: releases every key at every step
                (keys × steps releases, empty cells included);
  dp_simple     the "simple design": the same transform with num_shards = number of keys, i.e.
                one stateful-DoFn key (one counter, one timer) per public key;
  pipelinedp    PipelineDP (pip ``pipeline-dp``) DPEngine on its BeamBackend, batch DP COUNT per
                key with the public keys as public partitions (privacy id = user,
                max_partitions_contributed=4, max_contributions_per_partition=2, ε = 1, δ = 1e-6).
                Skipped with the import error recorded if pipeline_dp is not importable.

Each timing is ``time.perf_counter()`` around ``pipeline.run().wait_until_finish()`` (pipeline
construction excluded); every pipeline runs ``--repeats`` times (default 2), best and median are
recorded, and the headline ratio is baseline_time / dp_time (throughput of DP relative to no-DP;
target >= 0.8). Each sink counts its outputs in a Beam counter, which is checked.

Usage:
  python benchmarks/throughput/run.py [--events 1000000] [--repeats 2] [--pipelines ...]
  python benchmarks/throughput/run.py --profile dp_sharded --events 100000   # cProfile top entries
Outputs benchmarks/throughput/results/throughput[_<tag>].json and .png.
"""

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import statistics
import sys
import time

import apache_beam as beam
import numpy as np
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.utils.timestamp import Timestamp

from beam_dp.accounting import PrivacyBudget
from beam_dp.transforms.continual import ContinualCountPerKey

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, 'results')
START = 1_700_000_000          # seconds since the epoch; step 0 starts here
STEP = 60                      # seconds per step
CHUNKS = 100
ALL = ('source', 'baseline', 'dp_sharded', 'dp_simple', 'pipelinedp')


class GenerateEvents(beam.DoFn):
    """chunk index -> that chunk's events, deterministically from (seed, chunk)."""

    def __init__(self, seed, events, keys, users, steps):
        self._seed, self._events, self._keys = seed, events, keys
        self._users, self._steps = users, steps

    def setup(self):
        ranks = np.arange(1, self._keys + 1, dtype=np.float64)
        p = ranks ** -1.1
        self._cdf = np.cumsum(p / p.sum())
        self._names = [f'k{i:05d}' for i in range(self._keys)]

    def process(self, chunk):
        n = self._events // CHUNKS + (1 if chunk < self._events % CHUNKS else 0)
        rng = np.random.default_rng([self._seed, chunk])
        keys = np.minimum(np.searchsorted(self._cdf, rng.random(n)), self._keys - 1).tolist()
        users = rng.integers(0, self._users, n).tolist()
        micros = (START * 1_000_000 + rng.integers(0, self._steps * STEP * 1_000_000, n)).tolist()
        names = self._names
        for k, u, m in zip(keys, users, micros):
            yield beam.window.TimestampedValue((names[k], f'u{u}'), Timestamp(micros=m))


class CountingSink(beam.DoFn):
    def __init__(self, name):
        self._name = name

    def setup(self):
        self._counter = beam.metrics.Metrics.counter('bench', self._name)

    def process(self, element):
        self._counter.inc()


def events(p, args):
    return (p
            | 'Chunks' >> beam.Create(list(range(CHUNKS)))
            | 'Generate' >> beam.ParDo(GenerateEvents(args.seed, args.events, args.keys,
                                                      args.users, args.steps)))


def public_keys(args):
    return [f'k{i:05d}' for i in range(args.keys)]


def build(name, args):
    from apache_beam.options.pipeline_options import PipelineOptions
    p = beam.Pipeline(runner='FnApiRunner', options=PipelineOptions(args.beam_options))
    ev = events(p, args)
    expected = None
    if name == 'source':
        out = ev
        expected = args.events
    elif name == 'baseline':
        out = (ev
               | 'Window' >> beam.WindowInto(beam.window.FixedWindows(STEP))
               | 'KeyOnly' >> beam.Map(lambda r: (r[0], None))
               | 'CountPerKeyAndStep' >> beam.CombinePerKey(beam.combiners.CountCombineFn()))
    elif name in ('dp_sharded', 'dp_simple'):
        outs = ev | 'ContinualCount' >> ContinualCountPerKey(
            public_keys=public_keys(args), start=START, step=STEP,
            budget=PrivacyBudget(epsilon=1.0), end=START + args.steps * STEP,
            num_shards=args.keys if name == 'dp_simple' else None)
        outs.dead_letter | 'DeadSink' >> beam.ParDo(CountingSink('dead_letter'))
        out = outs.releases
        expected = args.keys * args.steps
    elif name == 'pipelinedp':
        import pipeline_dp
        accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=1.0, total_delta=1e-6)
        engine = pipeline_dp.DPEngine(accountant, pipeline_dp.BeamBackend())
        params = pipeline_dp.AggregateParams(
            metrics=[pipeline_dp.Metrics.COUNT], noise_kind=pipeline_dp.NoiseKind.LAPLACE,
            max_partitions_contributed=4, max_contributions_per_partition=2)
        extractors = pipeline_dp.DataExtractors(partition_extractor=lambda r: r[0],
                                                privacy_id_extractor=lambda r: r[1],
                                                value_extractor=lambda r: 0)
        out = engine.aggregate(ev, params, extractors, public_partitions=public_keys(args))
        accountant.compute_budgets()
        expected = args.keys
    else:
        raise ValueError(name)
    out | 'Sink' >> beam.ParDo(CountingSink('outputs'))
    return p, expected


def counter_value(result, name):
    from beam_dp.transforms.job_metrics import query_metrics   # result.metrics() fails after ~1k steps
    found = query_metrics(result, MetricsFilter().with_name(name))['counters']
    return sum(c.committed for c in found) if found else 0


def run_once(name, args):
    p, expected = build(name, args)
    t0 = time.perf_counter()
    result = p.run()
    result.wait_until_finish()
    secs = time.perf_counter() - t0
    outputs = counter_value(result, 'outputs')
    if expected is not None and outputs != expected:
        raise AssertionError(f'{name}: {outputs} outputs, expected {expected}')
    return secs, outputs, counter_value(result, 'dead_letter')


def profile(name, args, top):
    p, _ = build(name, args)
    prof = cProfile.Profile()
    prof.enable()
    p.run().wait_until_finish()
    prof.disable()
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf)
    stats.sort_stats('tottime').print_stats(top)
    stats.sort_stats('cumulative').print_stats(top)
    return buf.getvalue()


def machine():
    cpu = ''
    try:
        with open('/proc/cpuinfo') as f:
            cpu = next(l.split(':', 1)[1].strip() for l in f if l.startswith('model name'))
    except (OSError, StopIteration):
        pass
    return {'cpu': cpu, 'cpus': os.cpu_count(), 'python': platform.python_version(),
            'beam': beam.__version__, 'platform': platform.platform(),
            'loadavg': os.getloadavg()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--events', type=int, default=1_000_000)
    parser.add_argument('--keys', type=int, default=10_000)
    parser.add_argument('--users', type=int, default=100_000)
    parser.add_argument('--steps', type=int, default=64)
    parser.add_argument('--repeats', type=int, default=2)
    parser.add_argument('--seed', type=int, default=7)
    parser.add_argument('--pipelines', nargs='+', default=list(ALL), choices=ALL)
    parser.add_argument('--tag', default='', help='suffix of the result files')
    parser.add_argument('--profile', choices=ALL, help='cProfile one run of this pipeline')
    parser.add_argument('--top', type=int, default=25)
    parser.add_argument('--beam-options', nargs='*', default=[],
                        help='extra Beam pipeline options for every pipeline, e.g. '
                        '--beam-options=--max_cache_memory_usage_mb=0')
    args = parser.parse_args()
    os.makedirs(RESULTS, exist_ok=True)
    suffix = f'_{args.tag}' if args.tag else ''

    if args.profile:
        text = profile(args.profile, args, args.top)
        path = os.path.join(RESULTS, f'profile_{args.profile}{suffix}.txt')
        with open(path, 'w') as f:
            f.write(f'# python benchmarks/throughput/run.py {" ".join(sys.argv[1:])}\n')
            f.write(text)
        print(text)
        return

    pipelines = list(args.pipelines)
    skipped = {}
    if 'pipelinedp' in pipelines:
        try:
            import pipeline_dp  # noqa: F401
        except Exception as e:  # pylint: disable=broad-except
            skipped['pipelinedp'] = f'import pipeline_dp failed: {e!r}'
            pipelines.remove('pipelinedp')
    times = {name: [] for name in pipelines}
    outputs = {}
    for rep in range(args.repeats):
        for name in pipelines:
            secs, n_out, n_dead = run_once(name, args)
            times[name].append(secs)
            outputs[name] = {'outputs': n_out, 'dead_letter': n_dead}
            print(f'repeat {rep}: {name:11s} {secs:8.2f} s  ({args.events / secs:,.0f} events/s, '
                  f'{n_out} outputs, {n_dead} dead letters)', flush=True)

    summary = {}
    for name, ts in times.items():
        summary[name] = {'seconds': ts, 'best': min(ts), 'median': statistics.median(ts),
                         'events_per_second_best': args.events / min(ts), **outputs[name]}
    ratios = {}
    if 'baseline' in summary:
        base = summary['baseline']
        for name in summary:
            if name != 'baseline':
                ratios[name] = {
                    'throughput_ratio_best': base['best'] / summary[name]['best'],
                    'throughput_ratio_median': base['median'] / summary[name]['median']}
    if 'dp_sharded' in summary and 'dp_simple' in summary:
        ratios['dp_sharded_over_dp_simple'] = {
            'speedup_best': summary['dp_simple']['best'] / summary['dp_sharded']['best'],
            'speedup_median': summary['dp_simple']['median'] / summary['dp_sharded']['median']}
    target = ratios.get('dp_sharded', {}).get('throughput_ratio_best')
    results = {'benchmark': 'throughput', 'command': 'python benchmarks/throughput/run.py ' +
               ' '.join(sys.argv[1:]), 'events': args.events, 'keys': args.keys,
               'users': args.users, 'steps': args.steps, 'step_seconds': STEP,
               'repeats': args.repeats, 'beam_options': args.beam_options, 'runner': 'FnApiRunner (batch, in-process)',
               'machine': machine(), 'pipelines': summary, 'ratios_vs_baseline': ratios,
               'skipped': skipped,
               'target_dp_over_baseline_0_8_met': None if target is None else target >= 0.8}
    with open(os.path.join(RESULTS, f'throughput{suffix}.json'), 'w') as f:
        json.dump(results, f, indent=1)
    print(json.dumps({'ratios_vs_baseline': ratios, 'skipped': skipped}, indent=1))
    plot(results, os.path.join(RESULTS, f'throughput{suffix}.png'))


def plot(results, path):
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    names = list(results['pipelines'])
    best = [results['pipelines'][n]['best'] for n in names]
    med = [results['pipelines'][n]['median'] for n in names]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    x = np.arange(len(names))
    ax.bar(x - 0.2, best, 0.4, label='best')
    ax.bar(x + 0.2, med, 0.4, label='median')
    for xi, b in zip(x, best):
        ax.text(xi - 0.2, b, f'{b:.1f}s', ha='center', va='bottom', fontsize=8)
    ax.set_xticks(x)
    ax.set_xticklabels(names)
    ax.set_ylabel('wall seconds (run + wait_until_finish)')
    ax.set_title(f"{results['events']:,} events, {results['keys']:,} keys, {results['steps']} "
                 f"steps, FnApiRunner; {results['repeats']} repeats")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == '__main__':
    main()
