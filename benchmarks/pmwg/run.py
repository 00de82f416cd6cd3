"""PMWG and BBScheduler benchmarks (README.md): one entry point for the three of them.

  python benchmarks/pmwg/run.py all [--quick]      # every benchmark with the README's arguments
                                                   # (--quick: a smoke run of a few minutes)
  python benchmarks/pmwg/run.py accuracy [ARGS]    # (a) accuracy.py ARGS
  python benchmarks/pmwg/run.py budget [ARGS]      # (b) queries_within_budget.py ARGS
  python benchmarks/pmwg/run.py bbscheduler [ARGS] # (c) bbscheduler.py ARGS
  python benchmarks/pmwg/run.py tables [NAMES]     # the README's tables from results/*.json

Each benchmark writes results/<name>.json and results/<name>.png.
"""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = {'accuracy': 'accuracy.py', 'budget': 'queries_within_budget.py',
           'bbscheduler': 'bbscheduler.py', 'tables': 'tables.py'}

# The recorded runs (README.md): (a) ~20 min, (b) ~5-10 min, (c) ~5 min on 2 busy vCPUs.
FULL = [
    ('accuracy', ['--ns', '10000', '100000', '1000000', '10000000', '--alphas', '0.05', '0.1',
                  '0.2', '0.4', '--growth', '8', '--queries', '1000', '--reps', '6']),
    ('budget', ['--setting', 'approx:100000:0.2', '--setting', 'approx:100000:0.4',
                '--setting', 'pure:1000000:0.4', '--queries', '50000', '--growth', '2',
                '--burst', '20', '--reps', '3']),
    ('bbscheduler', ['--ns', '10000', '100000', '1000000', '--growth', '10', '--reps', '40',
                     '--points', '60']),
]
QUICK = [
    ('accuracy', ['--ns', '10000', '100000', '1000000', '--reps', '2', '--queries', '300']),
    ('budget', ['--setting', 'approx:100000:0.2', '--queries', '10000', '--reps', '1']),
    ('bbscheduler', ['--ns', '10000', '100000', '--reps', '4', '--points', '20']),
]


def run(name: str, args) -> None:
    command = [sys.executable, os.path.join(HERE, SCRIPTS[name]), *args]
    print('+', ' '.join(command[1:]), flush=True)
    # The scripts import their sibling workload.py: run them from this directory.
    subprocess.run(command, cwd=HERE, check=True)


def main(argv) -> None:
    if not argv or argv[0] not in ('all', *SCRIPTS):
        sys.exit(__doc__)
    if argv[0] == 'all':
        for name, args in (QUICK if '--quick' in argv[1:] else FULL):
            run(name, args)
    else:
        run(argv[0], argv[1:])


if __name__ == '__main__':
    main(sys.argv[1:])
