"""Privacy budgets, costs, composition and conversions (pure Python; no Beam)."""

from beam_dp.accounting.accountant import BudgetAccountant
from beam_dp.accounting.accountant import LedgerEntry
from beam_dp.accounting.accountant import basel_weight
from beam_dp.accounting.accountant import compose_parallel
from beam_dp.accounting.accountant import compose_sequential
from beam_dp.accounting.accountant import series_weight
from beam_dp.accounting.budget import ADD_REMOVE
from beam_dp.accounting.ledger import LedgerRefusedError
from beam_dp.accounting.ledger import PrivacyLedger
from beam_dp.accounting.ledger import RunRecord
from beam_dp.accounting.ledger import key_fingerprint
from beam_dp.accounting.budget import RELATIONS
from beam_dp.accounting.budget import SWAP_ONE
from beam_dp.accounting.budget import PrivacyBudget
from beam_dp.accounting.budget import PrivacyCost
from beam_dp.accounting.budget import epsilon_from_rho
from beam_dp.accounting.budget import epsilon_from_rho_simple
from beam_dp.accounting.budget import rho_for_epsilon_delta

__all__ = [
    'ADD_REMOVE',
    'BudgetAccountant',
    'LedgerEntry',
    'LedgerRefusedError',
    'PrivacyBudget',
    'PrivacyCost',
    'PrivacyLedger',
    'RELATIONS',
    'RunRecord',
    'SWAP_ONE',
    'basel_weight',
    'compose_parallel',
    'compose_sequential',
    'epsilon_from_rho',
    'epsilon_from_rho_simple',
    'key_fingerprint',
    'rho_for_epsilon_delta',
    'series_weight',
]
