"""VARIANCE: the variance of the arrival delay per carrier (top 10), planes as units, daily
steps; the same rows, bounds and outputs as ``mean.py`` (``ContinualVariancePerKey``: a
3-vector per key)."""

import dataclasses

from benchmarks.aggregations import keyed
from benchmarks.aggregations import mean

NAME = 'variance'
DESCRIPTION = ('variance of the arrival delay (minutes, clamped to [-60, 180]) per carrier (top '
               '10), a plane is the privacy unit')


def run(cfg: keyed.Config):
    return mean.cases('variance', dataclasses.replace(cfg, lower=mean.LOWER, upper=mean.UPPER))
