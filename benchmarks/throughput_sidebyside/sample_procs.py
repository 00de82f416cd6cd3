"""Samples a benchmark's process tree every N seconds: CPU seconds and RSS of its Python
processes (the SDK worker runs in the branch process) and of Prism's Go process, and the load.

    python benchmarks/throughput_sidebyside/sample_procs.py PID OUT.cpu [--every 20]

One line per sample: ``HH:MM:SS worker <cpu s> prism <cpu s> rss_w <kB> rss_p <kB> load <1-min>``
(the format of ``results/horizon_h5/*.cpu``); stops when PID is gone.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                'flink'))
from cpu import comm, cpu, rss, tree  # noqa: E402  pylint: disable=wrong-import-position


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
            for p in tree(args.pid):
                name, seconds, resident = comm(p), cpu(p), rss(p)
                if seconds is None:
                    continue
                kb = (resident or 0) // 1024
                if name.startswith('prism'):
                    prism, rss_p = prism + seconds, rss_p + kb
                elif name.startswith('python'):
                    worker, rss_w = worker + seconds, max(rss_w, kb)
            out.write(f'{time.strftime("%H:%M:%S")} worker {worker:.2f} prism {prism:.2f} '
                      f'rss_w {rss_w} rss_p {rss_p} load {os.getloadavg()[0]:.2f}\n')
            out.flush()
            time.sleep(args.every)


if __name__ == '__main__':
    main()
