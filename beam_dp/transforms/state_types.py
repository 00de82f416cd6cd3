"""The Beam coder of every state cell beam_dp keeps (``StateCoder``), and the registry of the
record types the drivers and mechanisms keep in state (``beam_dp.io.state_coder.register``).

Each type is registered here, in one table, under a stable name (never its module path: a
module can move without touching state) and a schema version. Changing the fields of a
registered type (names, order, meaning) is a state-shape change: bump its version and give
``upgrades`` from the old one (tests/io/test_state_coder.py pins every type's fields in
tests/io/state_schema.json and fails when they change without a version bump).
"""

import importlib

import apache_beam as beam

from beam_dp.io import state_coder

__all__ = ['StateCoder', 'STATE_CODER']


class StateCoder(beam.coders.Coder):
    """``beam_dp.io.state_coder`` as a Beam coder (state cells and bags)."""

    def encode(self, value):
        return state_coder.encode(value)

    def decode(self, encoded):
        return state_coder.decode(encoded)

    def is_deterministic(self):
        return True

    def to_type_hint(self):
        return object

    def __eq__(self, other):
        return type(self) is type(other)

    def __hash__(self):
        return hash(type(self))

    @property
    def manifest_name(self) -> str:
        """How the jobs' state manifests name it (pipelines/common/state_manifest.py)."""
        return f'beam_dp_state_v{state_coder.FORMAT_VERSION}'

    def __repr__(self):
        return f'StateCoder(format={state_coder.FORMAT_VERSION})'


STATE_CODER = StateCoder()


# --- the registry: every record type the drivers and mechanisms keep in state ----------------
# name → class. Names are stable: a class that moves keeps its name here. Version 1 everywhere
# (the first release with versioned state); a field change bumps the version with upgrades.

from beam_dp.drivers import boost as _d_boost            # noqa: E402
from beam_dp.drivers import boost_events as _d_boost_events  # noqa: E402
from beam_dp.drivers import erm as _d_erm                # noqa: E402
from beam_dp.drivers import keyed as _d_keyed            # noqa: E402
from beam_dp.drivers import private_keys as _d_private_keys  # noqa: E402
from beam_dp.drivers import segmented as _d_segmented    # noqa: E402
from beam_dp.io import coders as _io_coders              # noqa: E402
from beam_dp.mechanisms import balanced_tree, banded, bb_scheduler, binary_tree  # noqa: E402
from beam_dp.mechanisms import black_boxes, blt, dynamic, dynamic_node, growing_svt  # noqa: E402
from beam_dp.mechanisms import final_release  # noqa: E402
from beam_dp.mechanisms import infinite_counter, kary_tree, key_selection, per_step  # noqa: E402
from beam_dp.mechanisms import pmw, pmwg, sparse_counter, sparse_vector  # noqa: E402
from beam_dp.mechanisms import smalldb as _smalldb  # noqa: E402
from beam_dp.mechanisms import ermg as _ermg  # noqa: E402
from beam_dp.mechanisms import time_partition, unbounded_tree  # noqa: E402
from beam_dp.mechanisms.boost import cache as _boost_cache  # noqa: E402
from beam_dp.mechanisms.boost import filters as _boost_filters  # noqa: E402
from beam_dp.mechanisms.boost import histogram as _boost_histogram  # noqa: E402
from beam_dp.mechanisms.boost import state as _boost_state  # noqa: E402
from beam_dp.mechanisms.erm import baselines, ftrl, ledger, psgd, release, schedules, sliding  # noqa: E402,E501
from beam_dp.queries import linear as _linear            # noqa: E402

#: stable name → class (every one at schema version 1).
STATE_TYPES = {
    **{'io.' + record.__name__: record for record in _io_coders.RECORD_TYPES},
    # drivers
    'boost.DriverState': _d_boost.BoostDriverState,
    'boost.Item': _d_boost_events.BoostItem,
    'erm.BlockRecord': _d_erm.BlockRecord,
    'erm.StreamState': _d_erm.StreamState,
    'keyed.PrivatePartial': _d_keyed.PrivatePartial,
    'keyed.PublicShardState': _d_keyed.PublicShardState,
    'keyed.ShardPartial': _d_keyed.ShardPartial,
    'private_keys.ShardState': _d_private_keys.PrivateKeysShardState,
    'segmented.KeyState': _d_segmented.KeyState,
    'segmented.Item': _d_segmented.SegmentItem,
    # records kept while pending (every output record type: 'io.<Name>', below)
    'queries.LinearQuery': _linear.LinearQuery,
    # mechanisms
    'mech.BalancedTreeState': balanced_tree.BalancedTreeState,
    'mech.BandedState': banded.BandedState,
    'mech.BBState': bb_scheduler.BBState,
    'mech.BBEpochRelease': bb_scheduler.EpochRelease,
    'mech.BinaryTreeState': binary_tree.TreeState,
    'mech.VectorRelease': black_boxes._VectorRelease,  # pylint: disable=protected-access
    'mech.BLTState': blt.BLTState,
    'mech.FinalReleaseState': final_release.FinalReleaseState,
    'mech.FullyDynamicState': dynamic.FullyDynamicState,
    'mech.TwoStreamState': dynamic.TwoStreamState,
    'mech.DynamicNodeState': dynamic_node.NodeState,
    'mech.GrowingSVTState': growing_svt.GrowingSVTState,
    'mech.SVTRound': growing_svt.SVTRound,
    'mech.InfiniteTreeState': infinite_counter.InfiniteTreeState,
    'mech.KaryTreeState': kary_tree.KaryTreeState,
    'mech.KeySelectionState': key_selection.KeySelectionState,
    'mech.PerStepState': per_step.PerStepState,
    'mech.PMWState': pmw.PMWState,
    'mech.PMWGPublic': pmwg.PMWGPublic,
    'mech.PMWGState': pmwg.PMWGState,
    'mech.SmallDBSynthetic': _smalldb.SyntheticDatabase,
    'mech.ERMGModel': _ermg.ERMModel,
    'mech.SparseCounterState': sparse_counter.SparseCounterState,
    'mech.SparseVectorState': sparse_vector.SparseVectorState,
    'mech.PartitionerState': time_partition.PartitionerState,
    'mech.UnboundedTreeState': unbounded_tree.UnboundedTreeState,
    'boost.CachedResult': _boost_cache.CachedResult,
    'boost.PMap': _boost_cache.PMap,
    'boost.BlockFilters': _boost_filters.BlockFilters,
    'boost.NodeHistogram': _boost_histogram.NodeHistogram,
    'boost.State': _boost_state.BoostState,
    'erm.FTRLState': ftrl.FTRLState,
    'erm.BlockLedger': ledger.BlockLedger,
    'erm.ReleasedModel': psgd.ReleasedModel,
    'erm.ReleaseState': release.ReleaseState,
    'erm.ContinualState': schedules.ContinualState,
    'erm.DyadicState': schedules.DyadicState,
    'erm.SlidingState': sliding.SlidingState,
    'erm.BaselineClock': baselines._Clock,
}

#: Value types held inside the states above (found by reading the mechanisms and drivers; the
#: tests run every family through the coder, which refuses any type missing here).
_NESTED = {
    'mech.NodeNoise': ('beam_dp.mechanisms._dyadic', 'NodeNoise'),
    'mech.BBAnswer': ('beam_dp.mechanisms.bb_scheduler', 'BBAnswer'),
    'boost.BoundedCache': ('beam_dp.mechanisms.boost.cache', 'BoundedCache'),
    'boost.ZCDPFilters': ('beam_dp.mechanisms.boost.filters', 'ZCDPFilters'),
    'boost.RenyiFilters': ('beam_dp.mechanisms.boost.filters', 'RenyiFilters'),
    'boost.LiveSV': ('beam_dp.mechanisms.boost.grid_sv', 'LiveSV'),
    'boost.Readiness': ('beam_dp.mechanisms.boost.heuristic', 'Readiness'),
    'boost.LearningRate': ('beam_dp.mechanisms.boost.heuristic', 'LearningRate'),
    'boost.Request': ('beam_dp.mechanisms.boost.state', 'BoostRequest'),
    'boost.Answer': ('beam_dp.mechanisms.boost.state', 'BoostAnswer'),
    'boost.Run': ('beam_dp.mechanisms.boost.state', 'Run'),
    'mech.NoisyHistogram': ('beam_dp.mechanisms.contribution_histogram', 'NoisyHistogram'),
    'mech.DynamicUpdate': ('beam_dp.mechanisms.dynamic', 'Update'),
    'mech.DynamicRelease': ('beam_dp.mechanisms.dynamic', 'DynamicRelease'),
    'erm.RunningCombination': ('beam_dp.mechanisms.erm.combine', 'RunningCombination'),
    'erm.ReleaseEvent': ('beam_dp.mechanisms.erm.release', 'ReleaseEvent'),
    'erm.ScheduleStep': ('beam_dp.mechanisms.erm.schedules', 'ScheduleStep'),
    'erm.TrainJob': ('beam_dp.mechanisms.erm.schedules', 'TrainJob'),
    'mech.SVTAnswer': ('beam_dp.mechanisms.growing_svt', 'SVTAnswer'),
    'mech.PMWAnswer': ('beam_dp.mechanisms.pmw', 'PMWAnswer'),
    'mech.SparseCounterRelease': ('beam_dp.mechanisms.sparse_counter', 'SparseCounterRelease'),
    'mech.SegmentClose': ('beam_dp.mechanisms.time_partition', 'SegmentClose'),
    'mech.WindowState': ('beam_dp.mechanisms.window', 'WindowState'),
    'bounding.Key': ('beam_dp.drivers.bounding', '_Key'),
    'growing.InstanceOutput': ('beam_dp.drivers.growing', 'InstanceOutput'),
    'segmented.SegmentClose': ('beam_dp.drivers.segmented', 'SegmentClose'),
    'segmented.Rejected': ('beam_dp.drivers.segmented', 'Rejected'),
    'keyed.PendingSums': ('beam_dp.drivers.keyed', 'PendingSums'),
    'private_keys.ShardKeys': ('beam_dp.drivers.private_keys', 'ShardKeys'),
    'growing.ClockState': ('beam_dp.drivers.growing', 'ClockState'),
    'growing.Item': ('beam_dp.drivers.growing', 'GrowingItem'),
    'mech.PluginCounterState': ('beam_dp.mechanisms.plugin', 'PluginCounterState'),
}
for _name, (_module, _attr) in _NESTED.items():
    _cls = getattr(importlib.import_module(_module), _attr, None)
    if _cls is not None:          # (a module of another branch may not have landed yet)
        STATE_TYPES[_name] = _cls

#: Schema upgrades of the types whose fields changed: ``{name: {v: fields of v → of v + 1}}``
#: (the type is at version ``len(upgrades) + 1``; tests/io/state_schema.json pins it).
_UPGRADES = {
    # v2 adds ``last`` (the latest released step a key kept: the distinct window's bounding).
    'bounding.Key': {1: lambda fields: tuple(fields) + (-1,)},
}

for _name, _cls in STATE_TYPES.items():
    _up = _UPGRADES.get(_name)
    state_coder.register(_cls, name=_name, version=1 + len(_up or ()), upgrades=_up)
del _name, _cls, _module, _attr, _up
