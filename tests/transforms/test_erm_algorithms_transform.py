"""Pipeline tier: ``ContinualERM(algorithm='alg2')`` (Watson et al. Alg 2 alone, the dyadic
multi-resolution release) and ``algorithm='independent_blocks'`` (the baseline of spec 003
§7.1) on TestStream in streaming mode: the releases and ledger equal the pure driver's
(``beam_dp.testing.replay``) under a seed, the schedule's nodes are the paper's, the ledger
stays within ε, and arguments of other algorithms are refused by name."""

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that

from beam_dp import InvalidParamsError
from beam_dp.transforms.erm import ContinualERM
from tests.runners import DIRECT_RUNNER
from tests.runners import streaming_options
from tests.transforms.test_erm_transform import COMMON
from tests.transforms.test_erm_transform import LAST_BLOCK
from tests.transforms.test_erm_transform import SEED
from tests.transforms.test_erm_transform import check_dead
from tests.transforms.test_erm_transform import check_equal
from tests.transforms.test_erm_transform import expected
from tests.transforms.test_erm_transform import make_records
from tests.transforms.test_erm_transform import stream_of

pytestmark = pytest.mark.pipeline


def alg2(**kw):
    return ContinualERM(algorithm='alg2', **{**COMMON, 'blocks_per_base': 2,
                                             'testing_seed': SEED, **kw})


def independent(**kw):
    return ContinualERM(algorithm='independent_blocks', **{**COMMON, 'testing_seed': SEED, **kw})


@pytest.mark.parametrize('make', [alg2, independent], ids=['alg2', 'independent_blocks'])
def test_streaming_parity_with_reference(make):
    records = make_records()
    transform = make()
    want_releases, want_ledger = expected(transform, 'ERM', records)
    assert want_releases
    with beam.Pipeline(runner=DIRECT_RUNNER, options=streaming_options()) as p:
        out = p | stream_of(records, 3) | 'ERM' >> transform
        assert_that(out.releases, check_equal(want_releases), label='Releases')
        assert_that(out.ledger, check_equal(want_ledger), label='Ledger')
        assert_that(out.dead_letter, check_dead, label='Dead')


def test_alg2_releases_the_dyadic_nodes_and_the_ledger_stays_within_epsilon():
    releases, ledger = expected(alg2(), 'ERM', make_records())
    # B = 2 blocks: at t = q·2^k·B (t = 2, 4, 6, 8 blocks closed) the levels k with 2^k·B | t.
    nodes = sorted({(r.block_hi, r.level) for r in releases if r.stream == 'a'})
    assert nodes == [(2, 0), (4, 0), (4, 1), (6, 0), (8, 0), (8, 1), (8, 2)]
    assert all(r.algo == 'alg2' and r.kind == 'node' and r.block_lo == r.block_hi - (2 << r.level)
               for r in releases)
    epsilon = COMMON['budget'].epsilon
    # Level k costs ε/2^{k+1} per record: after levels 0..2 the worst record paid 7ε/8.
    assert ledger and max(row.worst_bound for row in ledger) == pytest.approx(7 * epsilon / 8)


def test_independent_blocks_publishes_one_model_per_block_at_the_whole_epsilon():
    releases, ledger = expected(independent(), 'ERM', make_records())
    assert sorted({r.t_block for r in releases if r.stream == 'a'}) == list(
        range(LAST_BLOCK + 1))
    assert all(r.algo == 'independent' and r.kind == 'block' for r in releases)
    assert {round(row.eps_cost, 12) for row in ledger} == {COMMON['budget'].epsilon}
    assert all(row.block_hi == row.block_lo + 1 for row in ledger)


@pytest.mark.parametrize('make, kwargs, says', [
    (alg2, dict(base_fraction=0.25), "base_fraction=0.25 applies to algorithm='alg4' only"),
    (alg2, dict(variant='chain'), 'variant'),
    (alg2, dict(learning_rate=1.0), "applies to algorithm='dp_ftrl' only"),
    (alg2, dict(blocks_per_base=None), 'blocks_per_base'),
    (independent, dict(blocks_per_base=2), 'blocks_per_base=2 applies to'),
    (independent, dict(max_level=2), 'max_level'),
    (independent, dict(sampling=True), 'sampling'),
])
def test_arguments_of_other_algorithms_are_refused_by_name(make, kwargs, says):
    with pytest.raises(InvalidParamsError, match=says):
        make(**kwargs)
