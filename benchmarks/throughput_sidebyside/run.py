"""Side by side in one run (issue 15): non-private counts, PipelineDP's batch DP count and
``ContinualCountPerKey`` at event level, user level and with private keys, on the SAME rows.

Rows: ``--rows`` (default 1M) generated inside each pipeline by a DoFn from a fixed seed (100
chunks, numpy generator per (seed, chunk)): key ~ Zipf(1.1) over ``--keys`` (10k) keys, user
uniform over ``--users`` (100k), timestamp uniform over ``--steps`` (64) steps of 60 s. Every
branch runs in its own fresh Python process on the same runner (``FnApiRunner``, batch,
in-process; ``--runner prism``: PrismRunner, batch, LOOPBACK), one after the other; time = ``perf_counter`` around ``run().wait_until_finish()``
(construction excluded). Every sink counts its outputs in a Beam counter, which is checked.

Branches (``--branches``):
  np_combine     no DP: ``Map`` to ((key, step), 1) + ``CombinePerKey(sum)``, no windows;
  np_windows     no DP: ``FixedWindows(60 s)`` + ``Count.PerElement()`` of the key;
  pipelinedp     PipelineDP (pip ``pipeline-dp``, in ITS OWN venv, ``--pdp-venv``, created by
                 this script: beam_dp never depends on it) DPEngine on BeamBackend, batch DP
                 COUNT per key, public partitions = the keys, privacy id = user,
                 max_partitions_contributed=4, max_contributions_per_partition=8, ε = 1, δ = 1e-6;
  event          ContinualCountPerKey(public_keys, ε = 1, end after 64 steps), event level;
  user           the same with UserLevel(user, K=4, m=8, S=64);
  event_private  event with keys=PrivateKeys(ε_s = 1, δ = 1e-6) instead of public keys;
  user_private   user with private keys.
Every DP branch except PipelineDP releases every (public or selected) key at every step.

Usage:
  python benchmarks/throughput_sidebyside/run.py [--rows 1000000] [--branches ...] [--tag T]
  python benchmarks/throughput_sidebyside/run.py --profile user --rows 50000   # cProfile
Writes results/sidebyside[_T].json and .png.
"""

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, 'results')
START = 1_700_000_000
STEP = 60
CHUNKS = 100
BRANCHES = ('np_combine', 'np_windows', 'pipelinedp', 'event', 'user', 'event_private',
            'user_private')
LABELS = {
    'np_combine': 'non-private Map + CombinePerKey(sum) per (key, step)',
    'np_windows': 'non-private FixedWindows + Count.PerElement',
    'pipelinedp': 'PipelineDP batch DP count per key (<= 4 keys, <= 8 per key per user)',
    'event': 'ContinualCountPerKey, event level',
    'user': 'ContinualCountPerKey, UserLevel(K=4, m=8, S=64)',
    'event_private': 'ContinualCountPerKey, event level, PrivateKeys',
    'user_private': 'ContinualCountPerKey, UserLevel(K=4, m=8, S=64), PrivateKeys',
}
PDP_VENV = '/tmp/pdp_sbs'


def _beam():
    import apache_beam as beam
    return beam


def _throughput_module():
    """benchmarks/throughput/run.py: the row generator (the same rows as that benchmark), the
    counting sink and the counter query are shared with it."""
    import importlib.util
    name = 'beam_dp_benchmarks_throughput_run'
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, os.path.join(os.path.dirname(HERE), 'throughput', 'run.py'))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def stage_costs(args):
    """CPU µs per record of each entry stage's DoFn driven directly (no runner, so without
    Beam's per-element and shuffle costs): 'ExtractAndValidate' (event and user level),
    'KeyByUnit', 'GroupByUnitInBundle' (bundles of 10 000), 'BoundPerUnit' (a list as its
    bag), 'PreAggregate'; on ``--rows`` rows drawn like the pipelines' (one generator)."""
    import collections
    from beam_dp import ContinualCountPerKey, PrivacyBudget, UserLevel
    from beam_dp.transforms import continual_extract as ce, contribution_bounding as cb
    rng = np.random.default_rng(args.seed)
    p = np.arange(1, args.keys + 1, dtype=np.float64) ** -1.1
    cdf = np.cumsum(p / p.sum())
    names = [f'k{i:05d}' for i in range(args.keys)]
    n = args.rows
    ks = np.minimum(np.searchsorted(cdf, rng.random(n)), args.keys - 1).tolist()
    us = rng.integers(0, args.users, n).tolist()
    micros = (START * 10**6 + rng.integers(0, args.steps * STEP * 10**6, n)).tolist()
    stamps = [type('T', (), {'micros': m})() for m in micros]
    rows = [(names[k], f'u{u}') for k, u in zip(ks, us)]
    unit = UserLevel(_user, max_keys_per_unit=4, max_contributions_per_step=8,
                     max_steps_per_unit=args.steps)
    costs = {}

    def timed(name, fn):
        t0 = time.process_time()
        out = fn()
        costs[name] = (time.process_time() - t0) / n * 1e6
        return out

    for level in ('event', 'user'):
        t = ContinualCountPerKey(public_keys=names, start=START, step=STEP, end=START + args.steps
                                 * STEP, budget=PrivacyBudget(epsilon=1.0),
                                 **({'privacy_unit': unit} if level == 'user' else {}))
        extract = ce._ExtractFn(t.driver, 'L', t._key_fn, t._value_fn, t._unit_fn)
        extract.setup()
        valid = timed(f'ExtractAndValidate ({level})', lambda: [
            out for r, ts in zip(rows, stamps) for out in extract.process(r, ts)])
    fused = ce._ExtractAndGroupFn(t.driver, 'L', t._key_fn, t._value_fn, t._unit_fn)
    fused.setup()

    def fused_entry():
        out = []
        for i in range(0, n, 10_000):
            fused.start_bundle()
            for r, ts in zip(rows[i:i + 10_000], stamps[i:i + 10_000]):
                out.extend(fused.process(r, ts) or ())
            out.extend(fused.finish_bundle())
        return out
    timed('ExtractAndValidate (user, grouping: now)', fused_entry)
    keyed = timed('KeyByUnit', lambda: [(e[0], e[1]) for e in valid])
    group = cb._GroupByUnitInBundleFn('L')

    def grouping():
        grouped = []
        for i in range(0, n, 10_000):
            group.start_bundle()
            for e, ts in zip(keyed[i:i + 10_000], stamps[i:i + 10_000]):
                for _ in group.process(e, ts):
                    pass
            grouped.extend(wv.value for wv in group.finish_bundle())
        return grouped
    grouped = timed('GroupByUnitInBundle', grouping)
    bags = collections.defaultdict(_ListBag)
    bound = cb._BoundContributionsFn(unit, 'L')
    kept = timed('BoundPerUnit', lambda: [o for e in grouped for o in bound.process(e, bags[e[0]])
                                          if type(o) is tuple])
    pre = ce._PreAggregateFn(t.driver)
    pre.start_bundle()
    timed('PreAggregate', lambda: ([pre.process(e) for e in kept], list(pre.finish_bundle())))
    for name, us_per_row in costs.items():
        print(f'{name:32s} {us_per_row:6.2f} µs/record (CPU)')
    print(f'kept {len(kept)} of {n} records')


class _Stamp:
    __slots__ = ('micros',)

    def __init__(self, micros):
        self.micros = micros


def event_stage_costs(args):
    """Event level, public keys: CPU µs per record of the entry DoFns driven directly (no runner) in both shapes -- per record ('ExtractAndValidate' + 'DropUnit' +
    'PreAggregate') and aggregating ('ExtractAndValidate' summing its bundle + 'DropUnit' +
    'PreAggregate' on the partials) -- and µs per RELEASED value of the release work (counter
    step with its noise; building the ``Release`` records from rows, and from the arrays).
    Bundles of ``BUNDLE`` records (the FnApiRunner runs a batch input as very few bundles: the
    partial sums, ≤ shards × steps per bundle, are then a small cost per record)."""
    BUNDLE = 100_000
    from beam_dp import ContinualCountPerKey, PrivacyBudget
    from beam_dp import Release
    from beam_dp.drivers import rows as release_rows
    from beam_dp.transforms import continual_extract as ce
    rng = np.random.default_rng(args.seed)
    names = [f'k{i:05d}' for i in range(args.keys)]
    p = np.arange(1, args.keys + 1, dtype=np.float64) ** -1.1
    n = args.rows
    ks = np.minimum(np.searchsorted(np.cumsum(p / p.sum()), rng.random(n)), args.keys - 1)
    micros = (START * 10**6 + rng.integers(0, args.steps * STEP * 10**6, n)).tolist()
    stamps = [_Stamp(m) for m in micros]
    rows = [(names[k], 'u') for k in ks.tolist()]
    t = ContinualCountPerKey(public_keys=names, start=START, step=STEP, end=START + args.steps
                             * STEP, budget=PrivacyBudget(epsilon=1.0))
    driver, costs = t.driver, {}

    def timed(name, fn, per=n):
        t0 = time.process_time()
        out = fn()
        costs[name] = (time.process_time() - t0) / per * 1e6
        return out

    def bundles(entry, stage, keep_unit):
        entry.setup()
        for lo in range(0, n, BUNDLE):
            entry.start_bundle()
            stage.start_bundle()
            for r, ts in zip(rows[lo:lo + BUNDLE], stamps[lo:lo + BUNDLE]):
                for out in entry.process(r, ts) or ():
                    stage.process(out[1])
            for wv in entry.finish_bundle() or ():
                stage.process(wv.value[1] if keep_unit else wv.value)
            list(stage.finish_bundle())
    args_fn = (driver, 'L', t._key_fn, None, None)   # pylint: disable=protected-access
    timed('entry, per record (before): Extract + DropUnit + PreAggregate', lambda: bundles(
        ce._ExtractFn(*args_fn), ce._PreAggregateFn(driver), False))
    timed('entry, aggregating (after): Extract summing the bundle + merge', lambda: bundles(
        ce._ExtractAndAggregateFn(*args_fn), ce._MergePartialsFn(driver), True))
    # Streaming (issue 21, item 6): the partials carry the rendered records they sum, so a
    # late one is dead-lettered record by record; plus their encoding + decoding for the
    # shuffle to 'ReleaseNoisyValues' (the typed key coder + FastPrimitivesCoder), both ways.
    if 'keep_records' in ce._ExtractFn.__init__.__code__.co_varnames:
        timed('entry, aggregating, carrying the records (streaming)', lambda: bundles(
            ce._ExtractAndAggregateFn(*args_fn, keep_records=True), ce._MergePartialsFn(driver),
            True))
        from apache_beam.coders import coders as beam_coders
        coder = beam_coders.TupleCoder([beam_coders.VarIntCoder(),
                                        beam_coders.FastPrimitivesCoder()])
        for keep in (False, True):
            entry = ce._ExtractAndAggregateFn(*args_fn, keep_records=keep)
            entry.setup()
            entry.start_bundle()
            for r, ts in zip(rows, stamps):
                entry.process(r, ts)
            partials = [wv.value[1] for wv in entry.finish_bundle()]
            timed(f'shuffle of the partials, encode + decode ({"with" if keep else "without"}'
                  f' records)', lambda: [coder.decode(coder.encode(v)) for v in partials])
    releases = len(names) * args.steps
    fields = release_rows.release_fields(driver.release_metadata())
    states = [driver.init_shard(s) for s in range(driver.num_shards)]
    arrays = []

    def step_all():
        for step in range(args.steps):
            for s in range(driver.num_shards):
                keys, est, sd, states[s] = driver.release_public_arrays(
                    s, states[s], t.rng.derive('L', s, step))
                arrays.append((step, keys, est, sd))
    timed('release: counter step + noise (per released value)', step_all, releases)
    metadata = driver.release_metadata()

    def before():   # the per-key rows and the keyword construction of the session start
        for step, keys, est, sd in arrays:
            start, end = driver.clock.step_bounds(step)
            rows = [(k, r, sd) for k, r in zip(keys, est.tolist())]
            _ = [Release(key=k, step=step, step_start_micros=start, step_end_micros=end,
                         value=float(sum(r)), values=[], noise_stddev=d, **metadata)
                 for k, r, d in rows]
    timed('release: Release records, per-key rows + keywords (before)', before, releases)
    def after():
        for step, keys, est, sd in arrays:
            _ = release_rows.array_releases(driver.clock, step, keys, est, sd, fields, False)
    timed('release: Release tuples from the arrays (after)', after, releases)
    for name, us in costs.items():
        print(f'{name:66s} {us:6.2f} µs (CPU)')


def _user(row):
    return row[1]


class _ListBag:
    def __init__(self):
        self.items = []

    def read(self):
        return list(self.items)

    def add(self, value):
        self.items.append(value)

    def clear(self):
        self.items = []


def _step_of(row, timestamp=_beam().DoFn.TimestampParam):
    return (row[0], (timestamp.micros // 1_000_000 - START) // STEP), 1


def pipelinedp_count(rows, keys):
    """PipelineDP's batch DP COUNT per key (public partitions ``keys``, privacy id = user, ≤ 4
    keys and ≤ 8 per key per user, ε = 1, δ = 1e-6); also used by benchmarks/flink."""
    import pipeline_dp
    accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=1.0, total_delta=1e-6)
    engine = pipeline_dp.DPEngine(accountant, pipeline_dp.BeamBackend())
    params = pipeline_dp.AggregateParams(
        metrics=[pipeline_dp.Metrics.COUNT], noise_kind=pipeline_dp.NoiseKind.LAPLACE,
        max_partitions_contributed=4, max_contributions_per_partition=8)
    extractors = pipeline_dp.DataExtractors(partition_extractor=lambda r: r[0],
                                            privacy_id_extractor=lambda r: r[1],
                                            value_extractor=lambda r: 0)
    out = engine.aggregate(rows, params, extractors, public_partitions=keys)
    accountant.compute_budgets()
    return out


def build(branch, args):
    """(pipeline, expected number of outputs or None)."""
    beam = _beam()
    from apache_beam.options.pipeline_options import PipelineOptions
    if args.runner == 'prism':   # batch, LOOPBACK: the SDK worker runs in this process
        from tests import runners
        p = beam.Pipeline(options=PipelineOptions(runners.prism_options(streaming=False)
                                                  + args.beam_options))
    else:
        p = beam.Pipeline(runner='FnApiRunner', options=PipelineOptions(args.beam_options))
    shared = _throughput_module()
    assert (shared.START, shared.STEP, shared.CHUNKS) == (START, STEP, CHUNKS)
    rows = (p | 'Chunks' >> beam.Create(list(range(CHUNKS)))
            | 'Generate' >> beam.ParDo(_throughput_module().GenerateEvents(
                args.seed, args.rows, args.keys, args.users, args.steps)))
    keys = [f'k{i:05d}' for i in range(args.keys)]
    expected = None
    if branch == 'np_combine':
        out = (rows
               | 'KeyStep' >> beam.Map(_step_of)
               | 'Sum' >> beam.CombinePerKey(sum))
    elif branch == 'np_windows':
        out = (rows
               | 'Window' >> beam.WindowInto(beam.window.FixedWindows(STEP))
               | 'Key' >> beam.Map(lambda r: r[0])
               | 'Count' >> beam.combiners.Count.PerElement())
    elif branch == 'pipelinedp':
        out = pipelinedp_count(rows, keys)
        expected = args.keys
    else:
        from beam_dp import ContinualCountPerKey, PrivacyBudget, PrivateKeys, UserLevel
        kwargs = dict(start=START, step=STEP, budget=PrivacyBudget(epsilon=1.0),
                      end=START + args.steps * STEP)
        if branch.startswith('user'):
            kwargs['privacy_unit'] = UserLevel(lambda r: r[1], max_keys_per_unit=4,
                                               max_contributions_per_step=8,
                                               max_steps_per_unit=args.steps)
        if branch.endswith('private'):
            kwargs['keys'] = PrivateKeys(budget=PrivacyBudget(epsilon=1.0, delta=1e-6))
        else:
            kwargs['public_keys'] = keys
            expected = args.keys * args.steps
        outs = rows | 'ContinualCount' >> ContinualCountPerKey(**kwargs)
        outs.dead_letter | 'DeadSink' >> beam.ParDo(_throughput_module().CountingSink('dead_letter'))
        out = outs.releases
    out | 'Sink' >> beam.ParDo(_throughput_module().CountingSink('outputs'))
    if args.progress:
        out | 'Progress' >> beam.ParDo(_Progress(args.progress))
    if args.check_dir and expected is not None and branch not in ('pipelinedp',):
        import release_check
        release_check.add(out, args.check_dir, args.keys, args.stall_every, args.stall_seconds)
    return p, expected


class _Progress(_beam().DoFn):
    """``--progress FILE``: every 1M outputs, appends 'UTC time, CPU s of this process, outputs'
    to FILE (the SDK worker runs in the branch process on both runners), so that a long run
    that is stopped still shows its cost per output so far."""
    EVERY = 1_000_000

    def __init__(self, path):
        self._path = path

    def setup(self):
        import types
        self._shared = sys.modules.setdefault('_sbs_progress', types.ModuleType('_sbs_progress'))
        if not hasattr(self._shared, 'n'):
            self._shared.n = 0
            self._note()

    def _note(self):
        with open(self._path, 'a') as f:
            f.write(f"{time.strftime('%H:%M:%S', time.gmtime())} {time.process_time():.1f} "
                    f"{self._shared.n}\n")

    def process(self, element):
        self._shared.n += 1
        if self._shared.n % self.EVERY == 0:
            self._note()


def counter_value(result, name):
    return _throughput_module().counter_value(result, name)


def worker(branch, args):
    """Runs one branch in this process; prints one JSON line."""
    if args.check_dir:   # a fresh directory per run (repeats)
        args.check_dir = os.path.join(os.path.abspath(args.check_dir), str(time.time_ns()))
    p, expected = build(branch, args)
    load = os.getloadavg()
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    result = p.run()
    result.wait_until_finish()
    secs = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    outputs = counter_value(result, 'outputs')
    check = None
    if args.check_dir and expected is not None:
        import release_check
        check = release_check.read(args.check_dir, args.keys, args.steps)
    elif expected is not None and outputs != expected:
        raise AssertionError(f'{branch}: {outputs} outputs, expected {expected}')
    import beam_dp
    print('RESULT ' + json.dumps({'branch': branch, 'seconds': secs, 'cpu_seconds': cpu,
                                  'beam_dp': os.path.dirname(beam_dp.__file__),
                                  'loadavg_at_start': load,
                                  'outputs': outputs,
                                  'dead_letter': counter_value(result, 'dead_letter'),
                                  # peak RSS of this process (the in-process runner's), kB
                                  'peak_rss_kb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                                  'loadavg_at_end': os.getloadavg(),
                                  **({'check': check} if check else {})}),
          flush=True)


def ensure_pdp_venv(path):
    """PipelineDP's own venv: a fresh venv that sees this interpreter's site-packages (Apache
    Beam, numpy) through a .pth file and gets ``pipeline-dp`` from PyPI. Returns its python."""
    python = os.path.join(path, 'bin', 'python')
    probe = [python, '-c', 'import pipeline_dp']
    if os.path.exists(python) and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    base = getattr(sys, '_base_executable', sys.executable)
    subprocess.run([base, '-m', 'venv', path], check=True)
    site = subprocess.run([python, '-c', 'import site; print(site.getsitepackages()[0])'],
                          check=True, capture_output=True, text=True).stdout.strip()
    import sysconfig
    with open(os.path.join(site, 'zz_beam_venv.pth'), 'w') as f:
        f.write(sysconfig.get_paths()['purelib'] + '\n')
    subprocess.run([python, '-m', 'pip', 'install', '-q', 'pipeline-dp'], check=True)
    return python


def run_branch(branch, args, python, code=None):
    """Runs one branch in a fresh process; ``code``: a source tree whose beam_dp to use (a
    ``git archive`` of an earlier commit, for before/after measurements in one run)."""
    cmd = [python, os.path.abspath(__file__), '--worker', branch, '--rows', str(args.rows),
           '--keys', str(args.keys), '--users', str(args.users), '--steps', str(args.steps),
           '--seed', str(args.seed), '--runner', args.runner] + (
               ['--progress', args.progress] if args.progress else []) + (
               ['--check-dir', os.path.join(args.check_dir, branch), '--stall-every',
                str(args.stall_every), '--stall-seconds', str(args.stall_seconds)]
               if args.check_dir else []) + [
                   f'--beam-options={o}' for o in args.beam_options]
    env = dict(os.environ, PYTHONPATH=code or os.path.dirname(os.path.dirname(HERE)))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    for line in proc.stdout.splitlines():
        if line.startswith('RESULT '):
            return json.loads(line[len('RESULT '):])
    raise RuntimeError(f'{branch} failed:\n{proc.stderr[-3000:]}')


def machine():
    return {'cpus': os.cpu_count(), 'python': platform.python_version(),
            'platform': platform.platform(), 'loadavg_at_start': os.getloadavg()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--rows', type=int, default=1_000_000)
    parser.add_argument('--keys', type=int, default=10_000)
    parser.add_argument('--users', type=int, default=100_000)
    parser.add_argument('--steps', type=int, default=64)
    parser.add_argument('--seed', type=int, default=7)
    parser.add_argument('--branches', nargs='+', default=list(BRANCHES), choices=BRANCHES)
    parser.add_argument('--repeats', type=int, default=1)
    parser.add_argument('--tag', default='')
    parser.add_argument('--pdp-venv', default=PDP_VENV)
    parser.add_argument('--worker', choices=BRANCHES, help=argparse.SUPPRESS)
    parser.add_argument('--profile', choices=BRANCHES, help='cProfile one branch in-process')
    parser.add_argument('--top', type=int, default=30)
    parser.add_argument('--profile-out', metavar='FILE', help='with --profile: dump the stats')
    parser.add_argument('--stage-costs', action='store_true',
                        help='CPU µs per record of the entry stages\' DoFns, driven directly')
    parser.add_argument('--event-stage-costs', action='store_true',
                        help='event level: µs per record of the entry DoFns (per record vs '
                        'aggregating) and µs per released value of the release work')
    parser.add_argument('--beam-options', action='append', default=[])
    parser.add_argument('--progress', metavar='FILE',
                        help="append 'UTC, CPU s, outputs' to FILE every 1M outputs")
    parser.add_argument('--check-dir', metavar='DIR',
                        help='count the public-key releases exactly from files (release_check.py:'
                        ' committed per-step counts per key, and per-bundle attempts), '
                        'DIR/<branch>, instead of checking the metrics counter')
    parser.add_argument('--stall-every', type=int, default=0,
                        help='with --check-dir: the checking sink sleeps --stall-seconds every '
                        'that many releases (a slow sink: Prism then splits the bundles)')
    parser.add_argument('--stall-seconds', type=float, default=0.0)
    parser.add_argument('--runner', choices=('fnapi', 'prism'), default='fnapi',
                        help='fnapi: FnApiRunner (batch, in-process; the default); prism: '
                        'PrismRunner (batch, LOOPBACK, tests/runners.py prism_options: CPU is '
                        "the SDK worker's, in the branch process; Prism's Go process is not "
                        'counted)')
    parser.add_argument('--before', metavar='DIR',
                        help='also run the beam_dp branches with the beam_dp of this source tree '
                        '(e.g. `git archive <commit> | tar -x -C DIR`), as <branch>@before')
    parser.add_argument('--before-branches', nargs='*', default=None,
                        help='which branches to run @before (default: every beam_dp branch)')
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args)
        return
    if args.stage_costs:
        stage_costs(args)
        return
    if args.event_stage_costs:
        event_stage_costs(args)
        return
    if args.profile:
        import cProfile
        import pstats
        p, _ = build(args.profile, args)
        prof = cProfile.Profile()
        prof.enable()
        p.run().wait_until_finish()
        prof.disable()
        if args.profile_out:
            prof.dump_stats(args.profile_out)
        stats = pstats.Stats(prof)
        stats.sort_stats('tottime').print_stats(args.top)
        stats.sort_stats('cumulative').print_stats(args.top)
        return
    os.makedirs(RESULTS, exist_ok=True)
    plan = [(b, b, None) for b in args.branches]
    if args.before:
        before = args.before_branches
        if before is None:
            before = [b for b in args.branches if not b.startswith(('np_', 'pipelinedp'))]
        plan += [(f'{b}@before', b, os.path.abspath(args.before)) for b in before]
    runs = {name: [] for name, _, _ in plan}
    for rep in range(args.repeats):
        for name, branch, code in plan:
            python = ensure_pdp_venv(args.pdp_venv) if branch == 'pipelinedp' else sys.executable
            r = run_branch(branch, args, python, code)
            runs[name].append(r)
            print(f'repeat {rep}: {name:21s} {r["seconds"]:8.2f} s wall, {r["cpu_seconds"]:8.2f}'
                  f' s cpu, {args.rows / r["seconds"]:9,.0f} rows/s, {r["outputs"]} outputs, '
                  f'{r["dead_letter"]} dead letters, peak RSS {r.get("peak_rss_kb", 0) / 2**20:.2f} GiB, '
                  f'load {r.get("loadavg_at_start", ["?"])[0]}', flush=True)
            results = write_results(args, runs)   # after every branch: a cut run keeps its data
    print(json.dumps(results['ratios'], indent=1))
    suffix = f'_{args.tag}' if args.tag else ''
    plot(results, os.path.join(RESULTS, f'sidebyside{suffix}.png'))


def write_results(args, runs):
    summary = {}
    for branch, rs in runs.items():
        if not rs:
            continue
        best = min(rs, key=lambda r: r['seconds'])
        summary[branch] = {'label': label(branch), 'runs': rs, 'best_seconds': best['seconds'],
                           'best_cpu_seconds': min(r['cpu_seconds'] for r in rs),
                           'rows_per_second': args.rows / best['seconds'],
                           'outputs': best['outputs'], 'dead_letter': best['dead_letter'],
                           'max_peak_rss_kb': max(r.get('peak_rss_kb', 0) for r in rs)}
    results = {'benchmark': 'throughput_sidebyside',
               'command': 'python benchmarks/throughput_sidebyside/run.py ' + ' '.join(sys.argv[1:]),
               'rows': args.rows, 'keys': args.keys, 'users': args.users, 'steps': args.steps,
               'runner': ('PrismRunner (batch, LOOPBACK)' if args.runner == 'prism' else
                          'FnApiRunner (batch, in-process)') + ', one fresh process per branch',
               'machine': machine(), 'branches': summary, 'ratios': ratios(summary)}
    suffix = f'_{args.tag}' if args.tag else ''
    with open(os.path.join(RESULTS, f'sidebyside{suffix}.json'), 'w') as f:
        json.dump(results, f, indent=1)
    return results


def label(name):
    branch, _, before = name.partition('@')
    return LABELS[branch] + (' [before]' if before else '')


def ratios(summary):
    """The issue's target ratios (time of the reference / time of ours, i.e. throughput of ours
    relative to the reference), on wall time and on CPU time (process time of the branch's
    process: the FnApiRunner runs in-process, so this is the pipeline's work, less sensitive to
    other jobs on a shared machine)."""
    out = {}
    for kind, field in (('wall', 'best_seconds'), ('cpu', 'best_cpu_seconds')):
        t = {b: s[field] for b, s in summary.items()}
        r = {}
        fastest = min((t[b] for b in ('np_combine', 'np_windows') if b in t), default=None)
        if fastest is not None:
            r['vs_fastest_non_private'] = {b: fastest / s for b, s in t.items()}
            if 'event' in t:
                r['event_over_fastest_non_private'] = fastest / t['event']   # target >= 0.8
        if 'pipelinedp' in t and 'user' in t:
            r['user_over_pipelinedp'] = t['pipelinedp'] / t['user']   # target >= 1.0
        for level in ('event', 'user'):
            if level in t and f'{level}_private' in t:   # target <= 1.5
                r[f'{level}_private_time_over_public'] = t[f'{level}_private'] / t[level]
        for name in t:
            if name.endswith('@before') and name.split('@')[0] in t:
                r[f'speedup_{name.split("@")[0]}'] = t[name] / t[name.split('@')[0]]
        out[kind] = r
    return out


def plot(results, path):
    """Two panels: rows/s on wall time and on CPU time (higher is better)."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    names = list(results['branches'])
    colors = ['grey' if n.startswith('np') else 'tab:orange' if n == 'pipelinedp'
              else 'lightsteelblue' if n.endswith('@before') else 'tab:blue' for n in names]
    fig, axes = plt.subplots(1, 2, figsize=(13, 0.45 * len(names) + 1.6), sharey=True)
    y = np.arange(len(names))
    for ax, field, what in ((axes[0], 'best_seconds', 'wall'), (axes[1], 'best_cpu_seconds', 'CPU')):
        secs = [results['branches'][n][field] for n in names]
        rate = [results['rows'] / s / 1000 for s in secs]
        ax.barh(y, rate, color=colors)
        for yi, r, s in zip(y, rate, secs):
            ax.text(r, yi, f' {r:.1f}k ({s:.0f} s)', va='center', fontsize=7)
        ax.set_xlabel(f'thousand rows / {what} second (higher is better)')
        ax.set_xlim(0, max(rate) * 1.3)
    axes[0].set_yticks(y)
    axes[0].set_yticklabels([label(n) for n in names], fontsize=7)
    axes[0].invert_yaxis()
    fig.suptitle(f"{results['rows']:,} rows, {results['keys']:,} Zipf keys, {results['users']:,} "
                 f"users, {results['steps']} steps; FnApiRunner, batch", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == '__main__':
    main()
