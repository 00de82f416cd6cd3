"""Linear queries over a finite domain (point, range, marginal, arbitrary vectors) and their
Avro records. Pure Python + numpy; no Beam import."""

from beam_dp.queries.avro_schema import ANSWER_SCHEMA
from beam_dp.queries.avro_schema import QUERY_SCHEMA
from beam_dp.queries.avro_schema import REFUSAL_REASONS
from beam_dp.queries.avro_schema import QueryAnswer
from beam_dp.queries.avro_schema import answer_from_avro
from beam_dp.queries.avro_schema import answer_to_avro
from beam_dp.queries.avro_schema import parsed_answer_schema
from beam_dp.queries.avro_schema import parsed_query_schema
from beam_dp.queries.avro_schema import query_from_avro
from beam_dp.queries.avro_schema import query_to_avro
from beam_dp.queries.linear import KINDS
from beam_dp.queries.linear import LinearQuery
from beam_dp.queries.linear import marginal_queries

__all__ = [
    'ANSWER_SCHEMA',
    'KINDS',
    'LinearQuery',
    'QUERY_SCHEMA',
    'QueryAnswer',
    'REFUSAL_REASONS',
    'answer_from_avro',
    'answer_to_avro',
    'marginal_queries',
    'parsed_answer_schema',
    'parsed_query_schema',
    'query_from_avro',
    'query_to_avro',
]
