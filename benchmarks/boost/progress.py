"""Result records of the Boost benchmark runners (ours: ``run.py``; the artifact's:
``artifact_runner.py``). Numpy + json only, so both virtualenvs import it.

A record holds the final average cumulative budget per block, a down-sampled ``curve`` (200
points, as before) and ``curve_points``: [queries done, budget] every ``stride`` queries, the same
query counts for both systems, so savings at intermediate horizons compare like for like. With
``checkpoint`` > 0 the record is also written every ``checkpoint`` queries (``complete`` false
until the last query), so a long run that is stopped still leaves its curve so far.
"""

import json
import os

import numpy as np


class Recorder:
    """Collects per-query budget and latency; writes the result json."""

    def __init__(self, out: str, meta: dict, total: int, stride: int = 1000,
                 checkpoint: int = 0, extra=dict):
        self.out, self.meta, self.total, self.extra = out, dict(meta), total, extra
        self.stride, self.checkpoint = max(1, stride), checkpoint
        self.curve, self.latencies, self.points = [], [], []
        self.answered = 0

    def add(self, budget: float, latency_s: float, answered: bool) -> None:
        self.curve.append(float(budget))
        self.latencies.append(latency_s)
        self.answered += int(answered)
        done = len(self.curve)
        if done % self.stride == 0 or done == self.total:
            self.points.append([done, float(budget)])
        if self.checkpoint and done % self.checkpoint == 0 and done < self.total:
            self.write()

    def record(self) -> dict:
        """The result so far (``extra()`` adds runner-specific fields, e.g. the paths)."""
        curve = self.curve
        lat = np.array(self.latencies) * 1e3
        out = dict(self.meta)
        out.update({
            'queries': len(curve), 'queries_planned': self.total,
            'complete': len(curve) == self.total, 'answered': self.answered,
            'curve': curve[::max(1, len(curve) // 200)] + [curve[-1]],
            'curve_points': self.points, 'stride': self.stride,
            'final_avg_budget': curve[-1],
            'budget_per_answered': curve[-1] / max(1, self.answered),
            'latency_ms_mean': float(lat.mean()), 'latency_ms_p50': float(np.median(lat)),
            'latency_ms_p99': float(np.percentile(lat, 99))})
        out.update(self.extra())
        return out

    def write(self) -> dict:
        out = self.record()
        tmp = self.out + '.tmp'
        with open(tmp, 'w') as f:
            json.dump(out, f)
        os.replace(tmp, self.out)
        return out
