"""The Avro schema of a record type, built from its NamedTuple annotations (one field per
annotation, in order), so that a record's fields and its schema cannot drift apart."""

from typing import Any, Dict, List, Mapping, Optional

__all__ = [
    'MICROS',
    'record_schema',
]

#: An event time in microseconds as Avro's timestamp-micros.
MICROS = {'type': 'long', 'logicalType': 'timestamp-micros'}

_TYPES = {str: 'string', int: 'long', float: 'double', bool: 'boolean',
          Optional[int]: ['null', 'long'],
          List[float]: {'type': 'array', 'items': 'double'},
          List[List[int]]: {'type': 'array', 'items': {'type': 'array', 'items': 'long'}}}


def record_schema(record: type, doc: str, namespace: str = 'beam_dp',
                  types: Optional[Mapping[str, Any]] = None,
                  defaults: Optional[Mapping[str, Any]] = None,
                  name: Optional[str] = None) -> Dict[str, Any]:
    """The (unparsed) Avro schema of the NamedTuple ``record`` (named ``name``, default the
    class name): ``types`` overrides a field's Avro type, ``defaults`` gives a field its
    default."""
    types, defaults = types or {}, defaults or {}
    fields = []
    for field_name, kind in record.__annotations__.items():
        field = {'name': field_name, 'type': types.get(field_name) or _TYPES[kind]}
        if field_name in defaults:
            field['default'] = defaults[field_name]
        fields.append(field)
    return {'type': 'record', 'name': name or record.__name__, 'namespace': namespace,
            'doc': doc, 'fields': fields}
