"""The dynamic driver (pure): the spec 001 §17.5 validity rule and what the mechanism receives."""

import pytest

from beam_dp import noise
from beam_dp.drivers.dynamic import DynamicDriver
from beam_dp.drivers.dynamic import classify
from beam_dp.drivers.dynamic import parse_op
from beam_dp.drivers.dynamic import parse_update
from beam_dp.drivers.segmented import KeyState
from beam_dp.mechanisms.dynamic import FullyDynamicCounter
from beam_dp.mechanisms.dynamic import TwoStreamCounter
from beam_dp.mechanisms.dynamic import Update

from tests.helpers import segment_one_pass


def make(construction, epsilon=1e6):
    if construction == 'two_stream':
        return DynamicDriver(TwoStreamCounter(epsilon, dimension=2), None, construction)
    return DynamicDriver(FullyDynamicCounter(epsilon), None, construction)


@pytest.mark.parametrize('op, expected', [(1, 1), ('insert', 1), ('+', 1), (-1, -1),
                                          ('delete', -1), ('-', -1)])
def test_parse_op(op, expected):
    assert parse_op(op) == expected


def test_parse_op_refuses_anything_else():
    with pytest.raises(ValueError, match="op must be"):
        parse_op(2)


def test_validity_rule():
    live = {'r1': 0}
    assert classify(live, 'r2', 1) is None
    assert classify(live, 'r1', -1) is None
    assert classify(live, None, 1).startswith('update without a record id')
    assert classify(live, 'r1', 1).startswith('duplicate insertion')
    assert classify(live, 'r2', -1).startswith('deletion of a record that is not live')


@pytest.mark.parametrize('construction, hidden_bin', [('two_stream', 1), ('fenwick', 0)])
def test_prepare_orders_insertions_first_and_keeps_rejected_updates_counted(construction,
                                                                             hidden_bin):
    d = make(construction)
    state = KeyState(-1, registry={'r1': 0})
    payload = (('r1', -1), ('r2', 1), ('r2', -1), ('zz', -1), ('r1', 1))
    fed, rejected, live = d.prepare(state, 3, payload)
    # Insertions first (r1 is live: duplicate; r2 inserted), then deletions sorted by id.
    assert fed == (Update(None, 1, hidden_bin), Update('r2', 1, 0), Update('r1', -1, 0),
                   Update('r2', -1, 0), Update(None, -1, hidden_bin))
    assert [r[1]['record_id'] for r in rejected] == ['r1', 'zz']
    assert all(r[1]['step'] == 3 for r in rejected)
    assert live == {}
    assert len(fed) == len(payload)          # every update reaches the partitioner


@pytest.mark.parametrize('construction', ['two_stream', 'fenwick'])
def test_invalid_updates_move_the_partitioner_like_valid_ones(construction):
    d = make(construction)
    invalid, _ = segment_one_pass(d, 'a', 'L', 0, [(4, (('x', -1),)), (7, ((None, 1),))], 11)
    valid, _ = segment_one_pass(d, 'a', 'L', 0, [(4, (('x', 1),)), (7, (('y', 1),))], 11)
    assert [c.step for c in invalid.closes] == [c.step for c in valid.closes]
    assert 4 in [c.step for c in invalid.closes] and 7 in [c.step for c in invalid.closes]
    assert all(c.answer == (0.0,) for c in invalid.closes)
    assert len(invalid.rejected) == 2 and valid.rejected == ()


def test_the_fenwick_selection_input_is_the_live_set_plus_placeholders():
    d = make('fenwick')
    state = KeyState(5, registry={'b': 0, 'a': 0})
    pre = (Update('a', 1, 0), Update('c', 1, 0), Update('c', -1, 0), Update('b', 1, 0))
    first = d.first_input(state, pre)
    assert first == (Update('a', 1, 0), Update('b', 1, 0), Update(None, 1, 0),
                     Update(None, -1, 0))


def test_parse_update_refuses_unhashable_ids_and_ops():
    assert parse_update('r', 'insert') == ('r', 1)
    assert parse_update(None, -1) == (None, -1)      # counted later, dead-lettered by the rule
    with pytest.raises(ValueError, match='record_id must be hashable'):
        parse_update(['r'], 1)
    with pytest.raises(ValueError, match='op must be'):
        parse_update('r', [1])
