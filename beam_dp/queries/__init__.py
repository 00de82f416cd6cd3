"""Linear queries over a finite domain (point, range, marginal, arbitrary vectors). Pure Python +
numpy; no Beam import. Their Avro records (queries and ``QueryAnswer``) are in ``beam_dp.io``."""

from beam_dp.queries.linear import KINDS
from beam_dp.queries.linear import LinearQuery
from beam_dp.queries.linear import marginal_queries

__all__ = [
    'KINDS',
    'LinearQuery',
    'marginal_queries',
]
