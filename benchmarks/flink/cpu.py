"""CPU seconds of process trees, sampled from /proc while a job runs (Linux only).

``TreeCpu({'workerpool': pid, ...}).start()`` ... ``.stop()`` gives, per name, the CPU (utime +
stime) the root and all its descendants used between start and stop: processes alive at start
count from their CPU at start, processes born later count in full, processes that exit count up
to their last sample (every ``interval`` seconds, so at most that much of each exited process's
CPU is missed). The Python SDK workers of a Flink worker pool are children of the pool process
and exit with the job: this is how their CPU is measured without relying on the pool reaping them.
``peak_rss_mb()`` gives, per name, the largest resident set (RSS) of the whole tree seen at one
sample (the sum over its processes), and the largest such sum over all names together.
"""

import os
import threading
import time

CLK = os.sysconf('SC_CLK_TCK')
PAGE = os.sysconf('SC_PAGE_SIZE')


def _children(pid):
    """Children of every thread of ``pid`` (a child is listed under the thread that forked it:
    the worker pool starts SDK workers from its gRPC threads)."""
    out = []
    try:
        tasks = os.listdir(f'/proc/{pid}/task')
    except OSError:
        return out
    for task in tasks:
        try:
            with open(f'/proc/{pid}/task/{task}/children', encoding='ascii') as f:
                out.extend(int(c) for c in f.read().split())
        except OSError:
            pass
    return out


def tree(pid):
    """``pid`` and all its descendants (alive now)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(_children(p))
    return out


def comm(pid):
    try:
        with open(f'/proc/{pid}/comm', encoding='ascii') as f:
            return f.read().strip()
    except OSError:
        return ''


def cpu(pid):
    """utime + stime of ``pid`` in seconds (None if it is gone)."""
    try:
        with open(f'/proc/{pid}/stat', encoding='ascii') as f:
            fields = f.read().rsplit(')', 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK
    except (OSError, ValueError, IndexError):
        return None


def rss(pid):
    """Resident set size of ``pid`` in bytes (0 if it is gone)."""
    try:
        with open(f'/proc/{pid}/statm', encoding='ascii') as f:
            return int(f.read().split()[1]) * PAGE
    except (OSError, ValueError, IndexError):
        return 0


class TreeCpu(threading.Thread):
    """Samples the CPU of named process trees; ``only`` optionally restricts a name to
    processes whose ``comm`` starts with a prefix (e.g. the ``java`` children of this process:
    the job server)."""

    def __init__(self, roots, only=None, interval=0.5):
        super().__init__(daemon=True)
        self._roots, self._only, self._interval = dict(roots), dict(only or {}), interval
        self._base, self._last, self._halt = {}, {}, threading.Event()
        self._peak = {}
        self._sample(self._base)

    def _sample(self, into):
        resident = {}
        for name, root in self._roots.items():
            resident[name] = 0
            for pid in tree(root):
                prefix = self._only.get(name)
                if prefix and not comm(pid).startswith(prefix):
                    continue
                c = cpu(pid)
                if c is not None:
                    into[(name, pid)] = c
                    resident[name] += rss(pid)
        resident['all'] = sum(resident.values())
        for name, r in resident.items():
            self._peak[name] = max(self._peak.get(name, 0), r)

    def peak_rss_mb(self):
        """{name: peak RSS of the tree in MiB, 'all': peak of the sum over every tree}."""
        return {name: round(r / 2**20) for name, r in self._peak.items()}

    def run(self):
        while not self._halt.wait(self._interval):
            self._sample(self._last)

    def stop(self):
        """{name: CPU seconds used since construction, name + '_processes': processes seen}."""
        self._halt.set()
        self.join()
        self._sample(self._last)
        out = {}
        for (name, pid), c in self._last.items():
            out[name] = out.get(name, 0.0) + c - self._base.get((name, pid), 0.0)
            out[f'{name}_processes'] = out.get(f'{name}_processes', 0) + 1
        return {k: round(v, 2) if isinstance(v, float) else v for k, v in out.items()}


def busy_cores(seconds, cpu_seconds):
    return round(cpu_seconds / seconds, 2) if seconds > 0 else None


if __name__ == '__main__':   # a self-check: a busy child's CPU is seen
    import subprocess
    import sys
    t = TreeCpu({'me': os.getpid()})
    t.start()
    subprocess.run([sys.executable, '-c', 'import time\nt=time.process_time()\n'
                    'while time.process_time() - t < 1.0: pass\ntime.sleep(1)'], check=True)
    time.sleep(0.1)
    print(t.stop())
