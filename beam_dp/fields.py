"""Field names instead of callables: ``Field('user_id')`` is the callable ``record → its field``.

Every callable argument of a beam_dp transform (``key_fn``, ``value_fn``, ``unit_fn``, ...) has a
field-name twin (``key_field``, ``value_field``, ``privacy_unit_field``, ...; the table is
``beam_dp.transforms.arguments.field_arguments``) that the shared argument layer turns into a
``Field``. A ``Field`` reads schema'd records: a Beam ``Row`` (attribute), a ``NamedTuple``
(attribute) or a mapping (``dict``, e.g. a fastavro record: key). It never reads a positional
tuple or list (``record.count`` of a tuple is a method, not a field): such a record, a record
without the field, or a field that is None raises ``InvalidRecordError`` with the reason, which
the transform's 'CheckFields' stage turns into a dead letter before any other stage sees the
record.

This module is pure (no Beam): ``UserLevel(privacy_unit_field=...)`` uses it below the
transforms.
"""

from collections.abc import Mapping
from typing import Any, Sequence, Tuple

from beam_dp.errors import InvalidParamsError
from beam_dp.errors import InvalidRecordError

__all__ = ['Field', 'Fields', 'check_field_name', 'field_value']


def check_field_name(owner: str, argument: str, name) -> str:
    """``name`` if it is a field name (a non-empty string), else ``InvalidParamsError`` naming
    ``argument``."""
    if not isinstance(name, str) or not name:
        raise InvalidParamsError(f'{owner}: {argument} must be a field name (a non-empty string), '
                                 f'got {name!r}.')
    return name


def field_value(record, name: str) -> Any:
    """The field ``name`` of a Beam Row, NamedTuple or mapping.

    Raises:
      InvalidRecordError: the record is of none of these kinds, has no such field, or the
        field is None.
    """
    if isinstance(record, Mapping):
        if name not in record:
            raise InvalidRecordError(f'missing field {name!r}')
        value = record[name]
    else:
        fields = getattr(type(record), '_fields', None)           # NamedTuple
        if fields is None:
            attributes = getattr(record, '__dict__', None)         # beam.Row
            if isinstance(record, (tuple, list, str, bytes)) or attributes is None:
                raise InvalidRecordError(
                    f'record is not a Beam Row, NamedTuple or dict (looking for field '
                    f'{name!r}): {type(record).__name__}')
            fields = attributes
        if name not in fields:
            raise InvalidRecordError(f'missing field {name!r}')
        value = getattr(record, name)
    if value is None:
        raise InvalidRecordError(f'field {name!r} is None')
    return value


class Field:
    """``record → record.<name>`` (or ``record[name]`` of a mapping): a picklable callable that
    a transform accepts wherever it accepts a callable (see the module docstring)."""

    __slots__ = ('name',)

    def __init__(self, name: str):
        self.name = check_field_name('Field', 'name', name)

    def __call__(self, record):
        return field_value(record, self.name)

    @property
    def names(self) -> Tuple[str, ...]:
        return (self.name,)

    def __repr__(self):
        return f'Field({self.name!r})'

    def __eq__(self, other):
        return type(other) is Field and other.name == self.name

    def __hash__(self):
        return hash(('Field', self.name))

    def __getstate__(self):
        return self.name

    def __setstate__(self, state):
        self.name = state


class Fields:
    """``record → (record.<a>, record.<b>, ...)``: several fields as one tuple (e.g.
    ``DynamicCountPerKey``'s ``update_fn`` = (record id, op))."""

    __slots__ = ('names',)

    def __init__(self, names: Sequence[str]):
        self.names = tuple(check_field_name('Fields', 'names', n) for n in names)

    def __call__(self, record):
        return tuple(field_value(record, n) for n in self.names)

    def __repr__(self):
        return f'Fields({list(self.names)!r})'

    def __eq__(self, other):
        return type(other) is Fields and other.names == self.names

    def __hash__(self):
        return hash(('Fields', self.names))

    def __getstate__(self):
        return self.names

    def __setstate__(self, state):
        self.names = state
