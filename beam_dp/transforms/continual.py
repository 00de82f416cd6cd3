"""Continual per-key counts, sums, histograms, means and variances on a fixed event-time
schedule: the public transforms (arguments, documentation). Their wiring, labels and release
loop are ``_ContinualPerKey`` (``beam_dp.transforms.continual_wiring``).
"""

from beam_dp.drivers.private_keys import PrivateKeys
from beam_dp.transforms import arguments
from beam_dp.transforms.continual_wiring import _SECOND
from beam_dp.transforms.continual_wiring import _ContinualPerKey

__all__ = [
    'ContinualCountPerKey',
    'ContinualHistogramPerKey',
    'ContinualMeanPerKey',
    'ContinualSumPerKey',
    'ContinualVariancePerKey',
    'PrivateKeys',
]


_SUM_ONLY = 'only ContinualSumPerKey takes value bounds (it clamps each value to them)'
_NOT_FOR_COUNTS = {
    'value_fn': 'a count counts records; to add up a value use ContinualSumPerKey(value_fn=..., '
                'lower=..., upper=...), for bins ContinualHistogramPerKey(value_fn=..., bins=...)',
    'lower': _SUM_ONLY, 'upper': _SUM_ONLY, 'grid_bits': _SUM_ONLY,
    'bins': 'bins are for ContinualHistogramPerKey(bins=...)',
}
_NOT_FOR_SUMS = {'bins': _NOT_FOR_COUNTS['bins']}
_NOT_FOR_HISTOGRAMS = {'lower': _SUM_ONLY, 'upper': _SUM_ONLY, 'grid_bits': _SUM_ONLY}
#: The end of every keyed continual transform's docstring.
_RETURNS = """
    Returns:
      ``ContinualOutputs(releases, dead_letter)``.

    Raises:
      InvalidParamsError: on a bad or missing parameter, naming it.
      BudgetExceededError: if ``accountant`` cannot pay for ``budget``.
    """


@arguments.public(docs=arguments.KEYED_DOCS, drop=('value_fn', 'lower', 'upper', 'grid_bits',
                                                   'bins', 'count_share'), hints=_NOT_FOR_COUNTS)
class ContinualCountPerKey(_ContinualPerKey):
    """Continual counts per public key on a fixed event-time schedule.

    Releases, for every public key and every step (a fixed event-time period from ``start``), a
    noisy count of the records with that key from ``start`` up to the end of the step — including
    keys and steps with no records (zeros are counted like any other step). Step s is released
    when the watermark passes end(s) + ``allowed_lateness``.

    Privacy unit and neighbours: ``privacy_unit=EventLevel()`` (default) protects one record;
    ``UserLevel(unit_fn, max_keys_per_unit, max_contributions_per_step, max_steps_per_unit)``
    protects all records of a unit, which ``BoundContributions`` bounds first. Add/remove
    neighbours. The key set is public (``public_keys``): records of other keys are dead-lettered,
    never released.

    Guarantee: the whole (unbounded) sequence of releases is ε-DP with ``budget=PrivacyBudget(
    epsilon=ε)`` (discrete Laplace) or ρ-zCDP with ``PrivacyBudget(rho=ρ)`` (discrete Gaussian).
    The counter (``mechanism='auto'``) is the one with the lowest expected error for the known
    horizon (steps from ``start`` to ``end``) and budget: BLT (Dvijotham et al. 2024) for ρ;
    per-step noise summed, the k-ary tree with the variance-reduced estimator, or the
    infinite-horizon tree (Chan, Shi, Song 2011) for ε — ``python -m beam_dp.analysis`` shows
    the choice and every alternative before running; ``Release.mechanism`` and
    ``Release.noise_stddev`` say what ran. ``mechanism=`` forces one; ``estimator=`` alone
    selects the old trees. Noise is drawn once per tree node / step and kept in Beam state.

    Bounded input (batch) needs ``end``: the releases must not stop at a time set by the data,
    so a bounded input without a public end is refused when the pipeline is built. An unbounded
    stream without ``end`` releases until it is drained.

    Not guaranteed: records arriving after their step was released are not counted (each goes
    to the dead-letter output as the record it was, with its event time); records without an event timestamp,
    or before ``start``, are dead-lettered with their time and the start.

    Private keys: ``keys=PrivateKeys(budget=PrivacyBudget(epsilon=ε_s, delta=δ))`` instead of
    ``public_keys`` releases a key only from the step at which continual private key selection
    (``ContinualKeySelection``) selects it; a key with one unit appears with probability ≤ δ over
    the unbounded horizon; a selected key stays selected; its first release counts everything
    since ``start`` and earlier steps are never back-filled. With ``end`` most of the selection
    budget goes to one batch-quality test at the last step (``PrivateKeys(final_share=0.9)``;
    docs/continual_counts.md). The total cost is the selection's (ε_s, δ) plus ``budget``; both
    are spent on ``accountant``. Release.epsilon/delta then carry the total.

    ``public_keys`` may also be a ``PCollection`` of key strings (e.g. ``SelectKeys(...).keys``):
    read as a side input, its keys are released at every step like listed public keys.

    Returns:
      ``ContinualOutputs(releases, dead_letter)``.

    Raises:
      InvalidParamsError: on a bad parameter, naming it.
      BudgetExceededError: if ``accountant`` cannot pay for ``budget``.
    """
    _metric = 'count'


@arguments.public(docs=arguments.KEYED_DOCS, drop=('bins', 'count_share'),
                  required=('lower', 'upper'), defaults={'value_fn': _SECOND},
                  hints=_NOT_FOR_SUMS)
class ContinualSumPerKey(_ContinualPerKey):
    __doc__ = """Continual sums per public key of a clamped value.

    As ``ContinualCountPerKey``, with each record's value (``value_fn``, default ``record[1]``)
    clamped to [``lower``, ``upper``] and snapped to the grid 2**-``grid_bits``: the sums are
    integer in grid units, the noise is exact discrete noise in grid units, and every released
    value is a multiple of 2**-grid_bits (no floating-point Laplace). One record's sensitivity is
    max(|lower|, |upper|) (rounded up to the grid). ``lower`` and ``upper`` have no defaults:
    they set the noise (wider bounds, more noise) and the bias (values outside are clamped).

""" + _RETURNS
    _metric = 'sum'


@arguments.public(docs={**arguments.KEYED_DOCS, 'value_fn': arguments.BIN_FN_DOC},
                  drop=('lower', 'upper', 'grid_bits', 'count_share'), required=('bins',),
                  defaults={'value_fn': _SECOND}, hints=_NOT_FOR_HISTOGRAMS)
class ContinualHistogramPerKey(_ContinualPerKey):
    __doc__ = """Continual histograms per public key over public bins.

    As ``ContinualCountPerKey``, with each record counted in the bin ``value_fn(record)``
    (default ``record[1]``), which must be one of ``bins`` (else dead-lettered). One tree per
    shard runs over the vector keys × bins; ``Release.values`` holds the per-bin estimates.
    One record changes one bin by one (L1 = L2 = 1 at event level).

""" + _RETURNS

    FIELD_ALIASES = {'value_fn': 'bin_field'}   # the bin is read by value_fn
    _metric = 'histogram'


_NOT_FOR_RATIOS = {'bins': _NOT_FOR_COUNTS['bins']}
_COUNT_SHARE_DOC = ('the share of the budget for the count, the rest split equally between the '
                    'sums (None, default: an equal split, the minimax choice). A public prior: '
                    'when the mean is expected near the midpoint of [lower, upper] the count '
                    'matters less (docs/mean.md).')


@arguments.public(docs={**arguments.KEYED_DOCS, 'value_fn': 'record → the value to average '
                        '(default ``record[1]``).',
                        'grid_bits': 'each clamped value is snapped to 2**-grid_bits of the '
                                     'half-range (upper − lower)/2 around the midpoint (default '
                                     '10).', 'count_share': _COUNT_SHARE_DOC},
                  drop=('bins',), required=('lower', 'upper'), defaults={'value_fn': _SECOND},
                  hints=_NOT_FOR_RATIOS)
class ContinualMeanPerKey(_ContinualPerKey):
    __doc__ = """Continual means per key of a value clamped to [``lower``, ``upper``].

    As ``ContinualSumPerKey`` (same keys, schedule, privacy units, private keys, counters and
    dead letters), releasing for every key and step the mean of the values of the key's records
    from ``start`` to the end of the step. Each key holds one 2-vector in the shard's vector
    counter: the count and the sum of the values centred on the midpoint of [lower, upper]
    (``beam_dp.drivers.mean``: the accounting of PipelineDP's MEAN, one budget split equally
    between the two, as one joint counter). A value outside the bounds is clamped; a value that
    is not a number (or NaN) is dead-lettered ('value is not a number: ...').

    Release: ``value`` the mean (always within [lower, upper]); ``values`` = [noisy count,
    noisy sum, mean_stddev] (``beam_dp.drivers.mean.MEAN_VALUES``); ``noise_stddev`` the exact
    sd of the count's noise (public). ``mean_stddev`` is the delta-method estimate of the mean's
    noise sd at the noisy values, capped at upper − lower; it is honest when the count is large
    against ``noise_stddev`` (docs/mean.md: behaviour at tiny counts).

""" + _RETURNS
    _metric = 'mean'


@arguments.public(docs={**arguments.KEYED_DOCS, 'value_fn': 'record → the value whose variance '
                        'is released (default ``record[1]``).',
                        'grid_bits': 'each clamped value is snapped to 2**-grid_bits of the half-range '
                        '(upper − lower)/2 around the midpoint (default 10).',
                        'count_share': _COUNT_SHARE_DOC},
                  drop=('bins',), required=('lower', 'upper'), defaults={'value_fn': _SECOND},
                  hints=_NOT_FOR_RATIOS)
class ContinualVariancePerKey(_ContinualPerKey):
    __doc__ = """Continual variances (and means) per key of a value clamped to [``lower``, ``upper``].

    As ``ContinualMeanPerKey``, with a 3-vector per key: the count, the centred sum and the
    centred sum of squares (PipelineDP's VARIANCE accounting: the budget split in three equal
    parts, as one joint counter). Release: ``value`` the population variance of the clamped
    values (always within [0, ((upper − lower)/2)²]); ``values`` = [noisy count, noisy sum,
    mean, mean_stddev, variance_stddev] (``beam_dp.drivers.mean.VARIANCE_VALUES``);
    ``noise_stddev`` the exact sd of the count's noise. The sds are delta-method estimates
    (docs/mean.md).

""" + _RETURNS
    _metric = 'variance'
