"""Beam coders for every beam_dp output record: a deterministic ``RowCoder`` per NamedTuple.

The records themselves (``records``, ``epochs``, ``queries``, ``boost``, ``erm``) are plain
NamedTuples with fastavro schemas, usable without Beam (drivers build them); this module is the
one place in ``beam_dp.io`` that imports Beam. ``beam_dp.transforms.shell`` imports it, so any
pipeline that applies a beam_dp transform has the coders registered.
"""

import apache_beam as beam

from beam_dp.io import boost
from beam_dp.io import bounds
from beam_dp.io import epochs
from beam_dp.io import erm
from beam_dp.io import quantiles
from beam_dp.io import records

RECORD_TYPES = (records.RECORD_TYPES + epochs.RECORD_TYPES + boost.RECORD_TYPES
                + bounds.RECORD_TYPES + quantiles.RECORD_TYPES
                + (erm.ModelRelease, erm.ERMLedgerRow))

for _record_type in RECORD_TYPES:
    beam.coders.registry.register_coder(_record_type, beam.coders.RowCoder)
