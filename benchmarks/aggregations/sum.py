"""SUM: departure delay hours per destination (top 10), planes as units, daily steps.

Value: ``dep_delay`` in hours, clamped to [0, 1] (``Config.lower`` / ``upper``; delays past an
hour count one hour, early departures zero); cancelled flights (no delay) are dropped.
"""

import dataclasses

import numpy as np

from benchmarks.aggregations import keyed
from benchmarks.aggregations.data import Flights

NAME = 'sum'
DESCRIPTION = ('departure delay (hours, clamped to [0, 1]) summed per destination (top 10), a '
               'plane is the privacy unit')


def run(cfg: keyed.Config):
    data = Flights('dest', value='dep_delay')
    data.value = np.asarray(data.value) / 60.0
    cfg = dataclasses.replace(cfg, lower=0.0, upper=1.0)
    return data, keyed.cases('sum', data, cfg)
