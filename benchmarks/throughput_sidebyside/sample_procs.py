"""Samples a benchmark's process tree every N seconds: CPU seconds and RSS of its Python
processes (the SDK worker runs in the branch process) and of Prism's Go process, and the load.

    python benchmarks/throughput_sidebyside/sample_procs.py PID OUT.cpu [--every 20]

One line per sample: ``HH:MM:SS worker <cpu s> prism <cpu s> rss_w <kB> rss_p <kB> load <1-min>``
(the format of ``results/horizon_h5/*.cpu``); stops when PID is gone.
"""

import argparse
import os
import time

TICK = os.sysconf('SC_CLK_TCK')


def _children(pid):
    out = []
    try:
        for task in os.listdir(f'/proc/{pid}/task'):
            with open(f'/proc/{pid}/task/{task}/children') as f:
                out += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return out


def _tree(pid):
    seen, todo = [], [pid]
    while todo:
        p = todo.pop()
        seen.append(p)
        todo += _children(p)
    return seen


def _stat(pid):
    """(name, cpu seconds, rss kB) or None."""
    try:
        with open(f'/proc/{pid}/stat') as f:
            raw = f.read()
        with open(f'/proc/{pid}/status') as f:
            rss = next((int(line.split()[1]) for line in f if line.startswith('VmRSS:')), 0)
    except OSError:
        return None
    name = raw[raw.index('(') + 1:raw.rindex(')')]
    fields = raw[raw.rindex(')') + 2:].split()
    return name, (int(fields[11]) + int(fields[12])) / TICK, rss


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('pid', type=int)
    parser.add_argument('out')
    parser.add_argument('--every', type=float, default=20.0)
    args = parser.parse_args()
    with open(args.out, 'a') as out:
        while os.path.exists(f'/proc/{args.pid}'):
            worker = prism = 0.0
            rss_w = rss_p = 0
            for p in _tree(args.pid):
                s = _stat(p)
                if s is None:
                    continue
                if s[0].startswith('prism'):
                    prism, rss_p = prism + s[1], rss_p + s[2]
                elif s[0].startswith('python'):
                    worker, rss_w = worker + s[1], max(rss_w, s[2])
            out.write(f'{time.strftime("%H:%M:%S")} worker {worker:.2f} prism {prism:.2f} '
                      f'rss_w {rss_w} rss_p {rss_p} load {os.getloadavg()[0]:.2f}\n')
            out.flush()
            time.sleep(args.every)


if __name__ == '__main__':
    main()
