"""COUNT: flights per destination (top 10), planes as units, daily steps."""

from benchmarks.aggregations import keyed
from benchmarks.aggregations.data import Flights

NAME = 'count'
DESCRIPTION = 'flights per destination (top 10 destinations), a plane is the privacy unit'


def run(cfg: keyed.Config):
    data = Flights('dest')
    return data, keyed.cases('count', data, cfg)
