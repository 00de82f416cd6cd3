"""Linear queries over a finite, enumerable domain {0, ..., N-1}.

A linear query is a vector f ∈ [0, 1]^N; its answer on a histogram h is <f, h> (on the fractional
histogram x = counts/t of a size-t database, <f, x> has sensitivity 1/t under the replacement of
one record; Cummings et al., "Differential Privacy for Growing Databases", 2018). This module
keeps queries compact (kind + parameters) and materialises the dense vector only when it is
needed:

* ``point``: f = e_i (a counting query for one domain element);
* ``range``: f = 1 on [start, stop), 0 elsewhere;
* ``marginal``: a product domain of shape (d_1, ..., d_m) flattened in C order (N = Π d_j); the
  query counts records whose attributes ``dims`` take the values ``values`` (one cell of the
  marginal on ``dims``; ``marginal_queries`` lists every cell);
* ``vector``: an arbitrary f with finite entries in [0, 1] (entries outside
  [0, 1] would break the 1/t sensitivity, so they are rejected, or clipped on request).

Evaluation of point, range and marginal queries never builds the dense vector.
"""

import dataclasses
import itertools
import math
import numbers
from typing import Optional, Sequence, Tuple

import numpy as np

from beam_dp.errors import InvalidParamsError
from beam_dp.errors import InvalidRecordError

__all__ = [
    'KINDS',
    'LinearQuery',
    'marginal_queries',
]

#: The query kinds, in the order of the Avro enum.
KINDS = ('point', 'range', 'marginal', 'vector')

_OWNER = 'LinearQuery'


def _fail(message: str) -> None:
    raise InvalidParamsError(f'{_OWNER}: {message}')


def _int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        _fail(f'{name} must be an integer, got {value!r}.')
    return int(value)


def _int_tuple(name: str, values) -> Tuple[int, ...]:
    if values is None or isinstance(values, (str, bytes)):
        _fail(f'{name} must be a sequence of integers, got {values!r}.')
    try:
        items = tuple(values)
    except TypeError:
        _fail(f'{name} must be a sequence of integers, got {values!r}.')
    return tuple(_int(name, x) for x in items)


def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


@dataclasses.dataclass(frozen=True, eq=False)
class LinearQuery:
    """A linear query f ∈ [0, 1]^N in compact form (build it with the classmethods).

    Args:
      kind: one of ``KINDS``.
      domain_size: N ≥ 1.
      index: the element of a point query.
      start, stop: the half-open interval [start, stop) of a range query, 0 ≤ start < stop ≤ N.
      shape, dims, values: a marginal cell: the product domain's shape, the attribute positions
        fixed and their values.
      vector: a vector query's entries (read-only float64, finite, in [0, 1]).
      query_id: an optional identifier carried to the answer (not part of the query's math).

    Raises:
      InvalidParamsError: on a wrong kind, an out-of-range index, an empty or inverted range, an
        inconsistent marginal, or a vector with NaN/inf or entries outside [0, 1].
    """
    kind: str
    domain_size: int
    index: Optional[int] = None
    start: Optional[int] = None
    stop: Optional[int] = None
    shape: Optional[Tuple[int, ...]] = None
    dims: Optional[Tuple[int, ...]] = None
    values: Optional[Tuple[int, ...]] = None
    vector: Optional[np.ndarray] = None
    query_id: Optional[str] = None

    def __post_init__(self):
        if self.kind not in KINDS:
            _fail(f'kind must be one of {", ".join(map(repr, KINDS))}, got {self.kind!r}.')
        n = _int('domain_size', self.domain_size)
        if n < 1:
            _fail(f'domain_size must be a positive integer, got {n}.')
        object.__setattr__(self, 'domain_size', n)
        if self.query_id is not None and not isinstance(self.query_id, str):
            _fail(f'query_id must be a string or None, got {self.query_id!r}.')
        getattr(self, f'_check_{self.kind}')()

    def _expect_only(self, *names):
        for field in ('index', 'start', 'stop', 'shape', 'dims', 'values', 'vector'):
            if field not in names and getattr(self, field) is not None:
                _fail(f'a {self.kind} query takes no {field}, got {getattr(self, field)!r}.')

    def _check_point(self):
        self._expect_only('index')
        i = _int('index', self.index)
        if not 0 <= i < self.domain_size:
            _fail(f'index must be in [0, {self.domain_size}), got {i}.')
        object.__setattr__(self, 'index', i)

    def _check_range(self):
        self._expect_only('start', 'stop')
        a, b = _int('start', self.start), _int('stop', self.stop)
        if not 0 <= a < b <= self.domain_size:
            _fail(f'range must satisfy 0 <= start < stop <= {self.domain_size}, got [{a}, {b}).')
        object.__setattr__(self, 'start', a)
        object.__setattr__(self, 'stop', b)

    def _check_marginal(self):
        self._expect_only('shape', 'dims', 'values')
        shape = _int_tuple('shape', self.shape)
        dims = _int_tuple('dims', self.dims)
        values = _int_tuple('values', self.values)
        if not shape or any(d < 1 for d in shape):
            _fail(f'shape must be a non-empty sequence of positive integers, got {shape}.')
        if math.prod(shape) != self.domain_size:
            _fail(f'shape {shape} has {math.prod(shape)} cells but domain_size is '
                  f'{self.domain_size}.')
        if len(dims) != len(values) or not dims:
            _fail(f'dims and values must be non-empty and of equal length, got {dims} and '
                  f'{values}.')
        if len(set(dims)) != len(dims) or any(not 0 <= d < len(shape) for d in dims):
            _fail(f'dims must be distinct attribute positions in [0, {len(shape)}), got {dims}.')
        for d, val in zip(dims, values):
            if not 0 <= val < shape[d]:
                _fail(f'values[{dims.index(d)}] must be in [0, {shape[d]}) for attribute {d}, '
                      f'got {val}.')
        object.__setattr__(self, 'shape', shape)
        object.__setattr__(self, 'dims', dims)
        object.__setattr__(self, 'values', values)

    def _check_vector(self):
        self._expect_only('vector')
        try:
            vec = np.array(self.vector, dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise InvalidParamsError(f'{_OWNER}: vector must be numeric, got '
                                     f'{self.vector!r}.') from e
        if vec.ndim != 1 or vec.size != self.domain_size:
            _fail(f'vector must be 1-D of length domain_size={self.domain_size}, got shape '
                  f'{vec.shape}.')
        if not np.all(np.isfinite(vec)):
            _fail('vector entries must be finite (no NaN or inf).')
        if vec.min() < 0 or vec.max() > 1:
            _fail(f'vector entries must be in [0, 1], got min {vec.min():g} and max '
                  f'{vec.max():g} (use clip=True to clip).')
        object.__setattr__(self, 'vector', _readonly(vec))

    # Constructors -----------------------------------------------------------------------------

    @classmethod
    def point(cls, domain_size: int, index: int, query_id: Optional[str] = None) -> 'LinearQuery':
        """The counting query of one element."""
        return cls('point', domain_size, index=index, query_id=query_id)

    @classmethod
    def range(cls, domain_size: int, start: int, stop: int,
              query_id: Optional[str] = None) -> 'LinearQuery':
        """The counting query of the half-open interval [start, stop)."""
        return cls('range', domain_size, start=start, stop=stop, query_id=query_id)

    @classmethod
    def marginal(cls, shape: Sequence[int], dims: Sequence[int], values: Sequence[int],
                 query_id: Optional[str] = None) -> 'LinearQuery':
        """One cell of the marginal on ``dims`` of a product domain of ``shape`` (C order)."""
        shape = _int_tuple('shape', shape)
        return cls('marginal', math.prod(shape) if shape else 0, shape=shape, dims=dims,
                   values=values, query_id=query_id)

    @classmethod
    def from_vector(cls, vector, clip: bool = False,
                    query_id: Optional[str] = None) -> 'LinearQuery':
        """An arbitrary query; ``clip=True`` clips entries to [0, 1] (NaN is still rejected)."""
        try:
            vec = np.array(vector, dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise InvalidParamsError(f'{_OWNER}: vector must be numeric, got {vector!r}.') from e
        if clip:
            if np.any(np.isnan(vec)):
                _fail('vector entries must be finite (no NaN or inf).')
            vec = np.clip(vec, 0.0, 1.0)
        if vec.ndim != 1:
            _fail(f'vector must be 1-D, got shape {vec.shape}.')
        return cls('vector', int(vec.size), vector=vec, query_id=query_id)

    def with_id(self, query_id: Optional[str]) -> 'LinearQuery':
        """The same query with another identifier."""
        return dataclasses.replace(self, query_id=query_id)

    # Evaluation -------------------------------------------------------------------------------

    def dense(self) -> np.ndarray:
        """The query vector f ∈ [0, 1]^N (read-only; built once, then cached)."""
        cached = self.__dict__.get('_dense')
        if cached is not None:
            return cached
        if self.kind == 'vector':
            vec = self.vector
        else:
            vec = np.zeros(self.domain_size, dtype=np.float64)
            if self.kind == 'point':
                vec[self.index] = 1.0
            elif self.kind == 'range':
                vec[self.start:self.stop] = 1.0
            else:
                vec.reshape(self.shape)[self._marginal_index()] = 1.0
            vec = _readonly(vec)
        self.__dict__['_dense'] = vec
        return vec

    def _marginal_index(self):
        index = [slice(None)] * len(self.shape)
        for d, val in zip(self.dims, self.values):
            index[d] = val
        return tuple(index)

    def check_domain(self, domain_size: int, owner: str = _OWNER) -> None:
        """Raises ``InvalidRecordError`` unless the query is over a domain of ``domain_size``."""
        if self.domain_size != domain_size:
            raise InvalidRecordError(f'{owner}: query must be over a domain of size {domain_size}, '
                                     f'got {self.domain_size}.')

    def evaluate(self, hist) -> float:
        """<f, hist> for a length-N histogram (counts or fractions).

        Raises:
          InvalidRecordError: if ``hist`` is not 1-D of length N.
        """
        h = np.asarray(hist)
        if h.ndim != 1 or h.shape[0] != self.domain_size:
            raise InvalidRecordError(f'{_OWNER}: histogram must be 1-D of length '
                                     f'{self.domain_size} (the domain size), got shape {h.shape}.')
        if self.kind == 'point':
            return float(h[self.index])
        if self.kind == 'range':
            return float(h[self.start:self.stop].sum())
        if self.kind == 'marginal':
            return float(h.reshape(self.shape)[self._marginal_index()].sum())
        return float(np.dot(self.vector, h))

    # Identity ---------------------------------------------------------------------------------

    def _key(self):
        vec = None if self.vector is None else self.vector.tobytes()
        return (self.kind, self.domain_size, self.index, self.start, self.stop, self.shape,
                self.dims, self.values, vec, self.query_id)

    def __eq__(self, other):
        if not isinstance(other, LinearQuery):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop('_dense', None)       # the cache is rebuilt on demand, never pickled
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        if self.vector is not None:
            self.vector.setflags(write=False)

    def __repr__(self):
        params = {'point': f'index={self.index}', 'range': f'[{self.start}, {self.stop})',
                  'marginal': f'shape={self.shape}, dims={self.dims}, values={self.values}',
                  'vector': f'vector=<{self.domain_size} entries>'}[self.kind]
        qid = '' if self.query_id is None else f', query_id={self.query_id!r}'
        return f'LinearQuery.{self.kind}(N={self.domain_size}, {params}{qid})'


def marginal_queries(shape: Sequence[int], dims: Sequence[int]) -> Tuple[LinearQuery, ...]:
    """Every cell of the marginal on ``dims`` (in C order of the cells' values)."""
    shape = _int_tuple('shape', shape)
    dims = _int_tuple('dims', dims)
    if any(not 0 <= d < len(shape) for d in dims):
        _fail(f'dims must be attribute positions in [0, {len(shape)}), got {dims}.')
    ranges = [range(shape[d]) for d in dims]
    return tuple(LinearQuery.marginal(shape, dims, values) for values in itertools.product(*ranges))
