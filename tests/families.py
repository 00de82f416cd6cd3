"""Helper module (no tests): one minimal instance of every public beam_dp transform, by name, so
that tests over "every family" (noise key wiring, seeds on production runners, fuzzing) build
each the same way. ``kind`` says what the transform is applied to: 'records' (one PCollection)
or 'growing' (a (data, queries) pair)."""

from beam_dp import PrivacyBudget
from beam_dp.mechanisms.black_boxes import LaplaceQueryVector
from beam_dp.privacy_unit import UserLevel
from beam_dp.queries import LinearQuery
from beam_dp.transforms.bb_scheduler import BBImproverQueries
from beam_dp.transforms.bb_scheduler import BBSchedulerQueries
from beam_dp.transforms.boost import BoostQueries
from beam_dp.transforms.choose_bounds import ChooseContributionBounds
from beam_dp.transforms.continual import ContinualCountPerKey
from beam_dp.transforms.continual import ContinualHistogramPerKey
from beam_dp.transforms.continual import ContinualMeanPerKey
from beam_dp.transforms.continual import ContinualSumPerKey
from beam_dp.transforms.continual import ContinualVariancePerKey
from beam_dp.transforms.continual import PrivateKeys
from beam_dp.transforms.distinct import ContinualDistinctCountPerKey
from beam_dp.transforms.dynamic import DynamicCountPerKey
from beam_dp.transforms.dynamic import DynamicHistogramPerKey
from beam_dp.transforms.dynamic import DynamicLinearQueriesPerKey
from beam_dp.transforms.erm import ContinualERM
from beam_dp.transforms.erm import SlidingWindowERM
from beam_dp.transforms.ermg import ERMGQueries
from beam_dp.transforms.pmwg import WindowedPMWG
from beam_dp.transforms.quantiles import ContinualQuantilesPerKey
from beam_dp.transforms.select_keys import SelectKeys
from beam_dp.transforms.smalldbg import SmallDBGQueries
from beam_dp.transforms.sparse_continual import SparseContinualCountPerKey
from beam_dp.transforms.sparse_continual import SparseContinualHistogramPerKey
from beam_dp.transforms.warm_up import WarmUpContinualCountPerKey

__all__ = ['FAMILIES', 'FIELDS', 'KEYS', 'BINS', 'DOMAIN', 'build', 'kind']

KEYS = ('a', 'b', 'c')
BINS = ('x', 'y')
DOMAIN = 4
EPS = PrivacyBudget(epsilon=1.0)
PRIVATE = PrivateKeys(PrivacyBudget(epsilon=1.0, delta=1e-6), num_shards=2)
_QUERIES = tuple(LinearQuery.range(DOMAIN, 0, b) for b in range(1, DOMAIN + 1))
_CLOCK = dict(start=0, step=1, end=10)
_ERM_POINTS = [[0.6, 0.8], [0.6, -0.8], [-0.6, 0.8], [-0.6, -0.8]]   # a DOMAIN-point table


def _user(max_keys=2, kw=None):
    field = (kw or {}).pop('privacy_unit_field', None)
    unit = dict(privacy_unit_field=field) if field else dict(unit_fn=lambda r: r[-1])
    return UserLevel(**unit, max_keys_per_unit=max_keys,
                     max_contributions_per_step=2, max_steps_per_unit=5)


def _fns(kw, **fns):
    """``kw`` with the default callables ``fns`` added, but not those whose field-name twin
    ``kw`` gives (``FIELDS``: a family built by field names)."""
    for fn in list(fns):
        twin = {'unit_fn': 'privacy_unit_field'}.get(fn, fn[:-3] + '_field')
        if twin in kw:
            del fns[fn]
    return {**fns, **kw}


def _dyn_bin(r):
    """A dynamic record's (key, record_id, op) bin label (a public function of its id)."""
    return BINS[len(str(r[1])) % 2]


def _dyn_element(r):
    """A dynamic record's domain element (a public function of its id)."""
    return len(str(r[1])) % DOMAIN


def _dyn_label(kw, field, fn):
    """``kw`` plus ``value_fn=fn`` unless ``kw`` names the label's ``field``."""
    return kw if field in kw else {**kw, 'value_fn': fn}


#: name → (kind, factory(**shell kwargs)). Records of the 'records' kind are tuples
#: (key, value, unit); dynamic: (key, record_id, op); ERM: (stream, feature, unit), label 0;
#: growing data: domain indices.
FAMILIES = {
    'ContinualCountPerKey': ('records', lambda **kw: ContinualCountPerKey(
        public_keys=list(KEYS), budget=EPS, **_CLOCK, **kw)),
    'ContinualCountPerKey/user': ('records', lambda **kw: ContinualCountPerKey(
        public_keys=list(KEYS), budget=EPS, privacy_unit=_user(kw=kw), **_CLOCK, **kw)),
    'ContinualCountPerKey/private': ('records', lambda **kw: ContinualCountPerKey(
        keys=PRIVATE, budget=EPS, privacy_unit=_user(kw=kw), **_CLOCK, **kw)),
    'ContinualCountPerKey/window': ('records', lambda **kw: ContinualCountPerKey(
        public_keys=list(KEYS), budget=EPS, output=('window', 3), **_CLOCK, **kw)),
    'ContinualCountPerKey/per_step/private': ('records', lambda **kw: ContinualCountPerKey(
        keys=PRIVATE, budget=EPS, privacy_unit=_user(kw=kw), output='per_step', **_CLOCK, **kw)),
    'ContinualDistinctCountPerKey': ('records', lambda **kw: ContinualDistinctCountPerKey(
        public_keys=list(KEYS), budget=EPS, privacy_unit=_user(kw=kw), **_CLOCK, **kw)),
    'ContinualDistinctCountPerKey/private': ('records', lambda **kw: ContinualDistinctCountPerKey(
        keys=PRIVATE, budget=EPS, privacy_unit=_user(kw=kw), **_CLOCK, **kw)),
    'ContinualSumPerKey': ('records', lambda **kw: ContinualSumPerKey(
        public_keys=list(KEYS), budget=EPS, lower=-2.0, upper=3.0, **_CLOCK, **kw)),
    'ContinualMeanPerKey': ('records', lambda **kw: ContinualMeanPerKey(
        public_keys=list(KEYS), budget=EPS, lower=-2.0, upper=3.0, **_CLOCK, **kw)),
    'ContinualVariancePerKey': ('records', lambda **kw: ContinualVariancePerKey(
        public_keys=list(KEYS), budget=EPS, lower=-2.0, upper=3.0, **_CLOCK, **kw)),
    'ContinualHistogramPerKey': ('records', lambda **kw: ContinualHistogramPerKey(
        public_keys=list(KEYS), bins=list(BINS), budget=EPS, **_CLOCK, **kw)),
    'ContinualQuantilesPerKey': ('records', lambda **kw: ContinualQuantilesPerKey(
        public_keys=list(KEYS), budget=EPS, lower=-2.0, upper=3.0, percentiles=(50, 90),
        depth=3, **_CLOCK, **kw)),
    'ContinualQuantilesPerKey/user': ('records', lambda **kw: ContinualQuantilesPerKey(
        public_keys=list(KEYS), budget=EPS, lower=-2.0, upper=3.0, percentiles=(50, 90),
        depth=3, layout='tree', privacy_unit=_user(kw=kw), **_CLOCK, **kw)),
    'ContinualQuantilesPerKey/private': ('records', lambda **kw: ContinualQuantilesPerKey(
        keys=PRIVATE, budget=EPS, lower=-2.0, upper=3.0, depth=3, privacy_unit=_user(kw=kw),
        **_CLOCK, **kw)),
    'SparseContinualCountPerKey': ('records', lambda **kw: SparseContinualCountPerKey(
        public_keys=list(KEYS), budget=EPS, **_CLOCK, **kw)),
    'SparseContinualCountPerKey/private': ('records', lambda **kw: SparseContinualCountPerKey(
        keys=PRIVATE, budget=EPS, **_CLOCK, **kw)),
    'SparseContinualHistogramPerKey': ('records', lambda **kw: SparseContinualHistogramPerKey(
        public_keys=list(KEYS), bins=list(BINS), budget=EPS, **_CLOCK, **kw)),
    'DynamicCountPerKey': ('records', lambda **kw: DynamicCountPerKey(
        public_keys=list(KEYS), budget=EPS, **_CLOCK, **kw)),
    'DynamicCountPerKey/fenwick': ('records', lambda **kw: DynamicCountPerKey(
        public_keys=list(KEYS), budget=EPS, construction='fenwick', **_CLOCK, **kw)),
    'DynamicHistogramPerKey': ('records', lambda **kw: DynamicHistogramPerKey(
        public_keys=list(KEYS), bins=list(BINS), budget=EPS, **_CLOCK,
        **_dyn_label(kw, 'bin_field', _dyn_bin))),
    'DynamicHistogramPerKey/fenwick': ('records', lambda **kw: DynamicHistogramPerKey(
        public_keys=list(KEYS), bins=list(BINS), budget=EPS, construction='fenwick', **_CLOCK,
        **_dyn_label(kw, 'bin_field', _dyn_bin))),
    'DynamicLinearQueriesPerKey': ('records', lambda **kw: DynamicLinearQueriesPerKey(
        public_keys=list(KEYS), budget=EPS, domain_size=DOMAIN, queries=_QUERIES, **_CLOCK,
        **_dyn_label(kw, 'value_field', _dyn_element))),
    'DynamicLinearQueriesPerKey/laplace_histogram': ('records', lambda **kw: (
        DynamicLinearQueriesPerKey(
            public_keys=list(KEYS), budget=EPS, domain_size=DOMAIN, queries=_QUERIES,
            static_mechanism='laplace_histogram', **_CLOCK,
            **_dyn_label(kw, 'value_field', _dyn_element)))),
    'SelectKeys': ('records', lambda **kw: SelectKeys(
        budget=PrivacyBudget(epsilon=1.0, delta=1e-6), privacy_unit=UserLevel(
            **_fns({k: kw.pop(k) for k in ('privacy_unit_field',) if k in kw},
                   unit_fn=lambda r: r[-1]), max_keys_per_unit=2, max_steps_per_unit=1),
        **kw)),
    'WindowedPMWG': ('growing', lambda **kw: WindowedPMWG(
        budget=EPS, alpha=0.3, n=30, domain_size=DOMAIN,
        **_fns({**_CLOCK, **kw}, domain_fn=lambda r: r))),
    'BBSchedulerQueries': ('growing', lambda **kw: BBSchedulerQueries(
        mechanism=LaplaceQueryVector(_QUERIES), budget=EPS, beta=0.05, n=100,
        domain_size=DOMAIN, **_fns({**_CLOCK, **kw}, domain_fn=lambda r: r))),
    'ERMGQueries': ('growing', lambda **kw: ERMGQueries(
        points=_ERM_POINTS, labels=[1, 1, 0, 0], reg=0.1,
        budget=PrivacyBudget(epsilon=0.9, delta=1e-6), beta=0.05, n=30,
        **_fns({**_CLOCK, **kw}, domain_fn=lambda r: r))),
    'SmallDBGQueries': ('growing', lambda **kw: SmallDBGQueries(
        queries=_QUERIES, budget=PrivacyBudget(epsilon=40.0), beta=0.05, n=30,
        domain_size=DOMAIN, **_fns({**_CLOCK, **kw}, domain_fn=lambda r: r))),
    'BBImproverQueries': ('growing', lambda **kw: BBImproverQueries(
        mechanism=LaplaceQueryVector(_QUERIES), budget=PrivacyBudget(epsilon=0.9, delta=1e-6),
        beta=0.05, n=50, domain_size=DOMAIN, **_fns({**_CLOCK, **kw}, domain_fn=lambda r: r))),
    'ChooseContributionBounds': ('records', lambda **kw: ChooseContributionBounds(
        budget=EPS, release_budget=EPS, horizon=10, start=0, step=1,
        **_fns(kw, unit_fn=lambda r: r[-1]))),
    # A budget so large that the warm-up's histograms are exact and no chosen bound binds:
    # which of a unit's records a binding bound keeps depends on the runner's arrival order.
    'WarmUpContinualCountPerKey': ('records', lambda **kw: WarmUpContinualCountPerKey(
        public_keys=list(KEYS), budget=PrivacyBudget(epsilon=1e6), warm_up_steps=3, **_CLOCK,
        **_fns(kw, unit_fn=lambda r: r[-1]))),
    'ContinualERM': ('records', lambda **kw: ContinualERM(
        public_streams=list(KEYS), num_classes=2, feature_dim=1, records_per_block=2, mu=0.5,
        blocks_per_base=2, passes=1, budget=EPS,
        **_fns({**_CLOCK, **kw}, features_fn=lambda r: [r[1]], label_fn=lambda r: 0))),
    'SlidingWindowERM': ('records', lambda **kw: SlidingWindowERM(
        public_streams=list(KEYS), num_classes=2, feature_dim=1, records_per_block=2, mu=0.5,
        levels=2, passes=1, budget=EPS,
        **_fns({**_CLOCK, **kw}, features_fn=lambda r: [r[1]], label_fn=lambda r: 0))),
    'BoostQueries': ('growing', lambda **kw: BoostQueries(
        public_datasets=['d'], shape=[2, DOMAIN], budget=EPS, **{**_CLOCK, **kw})),
}


#: name → (field-name arguments that replace every callable of the family, record → the same
#: record as a mapping of those fields). ``FIELDS[name][1]`` of a 'records' record (a tuple
#: above) or of a growing database's data element; ``build(name, **FIELDS[name][0])`` reads it.
_KEYED = lambda r: {'key': r[0], 'value': r[1], 'bin': r[1], 'unit': r[-1]}  # noqa: E731
FIELDS = {
    'ContinualCountPerKey': ({'key_field': 'key'}, _KEYED),
    'ContinualCountPerKey/user': ({'key_field': 'key', 'privacy_unit_field': 'unit'}, _KEYED),
    'ContinualCountPerKey/private': ({'key_field': 'key', 'privacy_unit_field': 'unit'},
                                     _KEYED),
    'ContinualCountPerKey/window': ({'key_field': 'key'}, _KEYED),
    'ContinualCountPerKey/per_step/private': ({'key_field': 'key',
                                               'privacy_unit_field': 'unit'}, _KEYED),
    'ContinualSumPerKey': ({'key_field': 'key', 'value_field': 'value'}, _KEYED),
    'ContinualMeanPerKey': ({'key_field': 'key', 'value_field': 'value'}, _KEYED),
    'ContinualVariancePerKey': ({'key_field': 'key', 'value_field': 'value'}, _KEYED),
    'ContinualDistinctCountPerKey': ({'key_field': 'key', 'privacy_unit_field': 'unit'},
                                     _KEYED),
    'ContinualDistinctCountPerKey/private': ({'key_field': 'key', 'privacy_unit_field': 'unit'},
                                             _KEYED),
    'ContinualHistogramPerKey': ({'key_field': 'key', 'bin_field': 'bin'}, _KEYED),
    'ContinualQuantilesPerKey': ({'key_field': 'key', 'value_field': 'value'}, _KEYED),
    'ContinualQuantilesPerKey/user': ({'key_field': 'key', 'value_field': 'value',
                                       'privacy_unit_field': 'unit'}, _KEYED),
    'ContinualQuantilesPerKey/private': ({'key_field': 'key', 'value_field': 'value',
                                          'privacy_unit_field': 'unit'}, _KEYED),
    'SparseContinualCountPerKey': ({'key_field': 'key'}, _KEYED),
    'SparseContinualCountPerKey/private': ({'key_field': 'key'}, _KEYED),
    'SparseContinualHistogramPerKey': ({'key_field': 'key', 'bin_field': 'bin'}, _KEYED),
    'DynamicCountPerKey': ({'key_field': 'key', 'record_id_field': 'record_id',
                            'op_field': 'op'},
                           lambda r: {'key': r[0], 'record_id': r[1], 'op': r[2]}),
    'DynamicCountPerKey/fenwick': ({'key_field': 'key', 'record_id_field': 'record_id',
                                    'op_field': 'op'},
                                   lambda r: {'key': r[0], 'record_id': r[1], 'op': r[2]}),
    'DynamicHistogramPerKey': ({'key_field': 'key', 'record_id_field': 'record_id',
                                'op_field': 'op', 'bin_field': 'bin'},
                               lambda r: {'key': r[0], 'record_id': r[1], 'op': r[2],
                                          'bin': _dyn_bin(r)}),
    'DynamicHistogramPerKey/fenwick': ({'key_field': 'key', 'record_id_field': 'record_id',
                                        'op_field': 'op', 'bin_field': 'bin'},
                                       lambda r: {'key': r[0], 'record_id': r[1], 'op': r[2],
                                                  'bin': _dyn_bin(r)}),
    'DynamicLinearQueriesPerKey': ({'key_field': 'key', 'record_id_field': 'record_id',
                                    'op_field': 'op', 'value_field': 'element'},
                                   lambda r: {'key': r[0], 'record_id': r[1], 'op': r[2],
                                              'element': _dyn_element(r)}),
    'DynamicLinearQueriesPerKey/laplace_histogram': (
        {'key_field': 'key', 'record_id_field': 'record_id', 'op_field': 'op',
         'value_field': 'element'},
        lambda r: {'key': r[0], 'record_id': r[1], 'op': r[2], 'element': _dyn_element(r)}),
    'SelectKeys': ({'key_field': 'key', 'privacy_unit_field': 'unit'}, _KEYED),
    'WindowedPMWG': ({'domain_field': 'index'}, lambda r: {'index': r}),
    'BBSchedulerQueries': ({'domain_field': 'index'}, lambda r: {'index': r}),
    'BBImproverQueries': ({'domain_field': 'index'}, lambda r: {'index': r}),
    'SmallDBGQueries': ({'domain_field': 'index'}, lambda r: {'index': r}),
    'ERMGQueries': ({'domain_field': 'index'}, lambda r: {'index': r}),
    'ChooseContributionBounds': ({'key_field': 'key', 'privacy_unit_field': 'unit'}, _KEYED),
    'WarmUpContinualCountPerKey': ({'key_field': 'key', 'privacy_unit_field': 'unit'}, _KEYED),
    'ContinualERM': ({'stream_field': 'stream', 'features_field': 'features',
                      'label_field': 'label'},
                     lambda r: {'stream': r[0], 'features': [r[1]], 'label': 0}),
    'SlidingWindowERM': ({'stream_field': 'stream', 'features_field': 'features',
                          'label_field': 'label'},
                         lambda r: {'stream': r[0], 'features': [r[1]], 'label': 0}),
    'BoostQueries': ({'dataset_field': 'dataset', 'attributes_field': 'attributes'},
                     lambda r: {'dataset': r[0], 'attributes': r[1]}),
}


def build(name: str, **kw):
    return FAMILIES[name][1](**kw)


def kind(name: str) -> str:
    return FAMILIES[name][0]
