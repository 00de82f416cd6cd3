"""Typed records, Avro schemas (fastavro) and record parsing."""

from beam_dp.io.bounds import BoundsRecommendation
from beam_dp.io.epochs import EPOCH_RELEASE_SCHEMA
from beam_dp.io.epochs import EpochReleaseRecord
from beam_dp.io.epochs import epoch_release_from_avro
from beam_dp.io.epochs import epoch_release_to_avro
from beam_dp.io.quantiles import QUANTILE_RELEASE_SCHEMA
from beam_dp.io.quantiles import QuantileRelease
from beam_dp.io.quantiles import quantile_release_from_avro
from beam_dp.io.quantiles import quantile_release_to_avro
from beam_dp.io.queries import ANSWER_SCHEMA
from beam_dp.io.queries import QUERY_SCHEMA
from beam_dp.io.queries import REFUSAL_REASONS
from beam_dp.io.queries import QueryAnswer
from beam_dp.io.queries import answer_from_avro
from beam_dp.io.queries import answer_to_avro
from beam_dp.io.queries import parsed_answer_schema
from beam_dp.io.queries import parsed_query_schema
from beam_dp.io.queries import query_from_avro
from beam_dp.io.queries import query_to_avro
from beam_dp.io.records import DEAD_LETTER_SCHEMA
from beam_dp.io.records import DeadLetter
from beam_dp.io.records import RELEASE_SCHEMA
from beam_dp.io.records import Release
from beam_dp.io.records import dead_letter_from_avro
from beam_dp.io.records import dead_letter_to_avro
from beam_dp.io.records import release_from_avro
from beam_dp.io.records import release_to_avro

__all__ = [
    'ANSWER_SCHEMA',
    'BoundsRecommendation',
    'DEAD_LETTER_SCHEMA',
    'DeadLetter',
    'EPOCH_RELEASE_SCHEMA',
    'EpochReleaseRecord',
    'QUANTILE_RELEASE_SCHEMA',
    'QUERY_SCHEMA',
    'QuantileRelease',
    'QueryAnswer',
    'REFUSAL_REASONS',
    'RELEASE_SCHEMA',
    'Release',
    'answer_from_avro',
    'answer_to_avro',
    'dead_letter_from_avro',
    'dead_letter_to_avro',
    'epoch_release_from_avro',
    'epoch_release_to_avro',
    'parsed_answer_schema',
    'parsed_query_schema',
    'quantile_release_from_avro',
    'quantile_release_to_avro',
    'query_from_avro',
    'query_to_avro',
    'release_from_avro',
    'release_to_avro',
]
