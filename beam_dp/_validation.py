"""Shared argument validators.

Messages name the owner, the argument and the value, e.g.
``"ContinualCountPerKey: epsilon must be positive, got 0."``.
"""

import dataclasses
import difflib
import functools
import math
import numbers
from typing import Any, Mapping, Optional

from beam_dp.errors import InvalidParamsError


def _fail(owner: str, message: str) -> None:
    raise InvalidParamsError(f'{owner}: {message}')


def keyword_checked(hints: Optional[Mapping[str, str]] = None):
    """Class decorator of a parameter dataclass: a keyword it does not take raises
    ``InvalidParamsError`` naming the class, what to write instead (``hints``: name → hint, or a
    near miss: "did you mean ...?") and the keywords it takes, not Python's bare ``TypeError``.
    Apply it above ``@dataclasses.dataclass``."""
    hints = dict(hints or {})

    def decorate(cls):
        init = cls.__init__
        names = [f.name for f in dataclasses.fields(cls) if f.init]

        @functools.wraps(init)
        def __init__(self, *args, **kwargs):
            unknown = [n for n in kwargs if n not in names]
            if unknown:
                by_hint = {}
                for name in unknown:
                    hint = hints.get(name)
                    if hint is None:
                        close = difflib.get_close_matches(name, names, n=1)
                        hint = f'did you mean {close[0]}?' if close else ''
                    by_hint.setdefault(hint, []).append(name)
                problems = [f'{", ".join(group)} '
                            f'{"is not an argument" if len(group) == 1 else "are not arguments"}'
                            f' of {cls.__name__}' + (f': {hint}' if hint else '')
                            for hint, group in by_hint.items()]
                _fail(cls.__name__, '; '.join(problems)
                      + f'; {cls.__name__} takes: {", ".join(names)}.')
            init(self, *args, **kwargs)

        cls.__init__ = __init__
        return cls

    return decorate


def check_real(owner: str, name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        _fail(owner, f'{name} must be a real number, got {value!r}.')
    value = float(value)
    if math.isnan(value):
        _fail(owner, f'{name} must not be NaN.')
    return value


def check_positive(owner: str, name: str, value: Any, allow_inf: bool = False) -> float:
    value = check_real(owner, name, value)
    if not value > 0:
        _fail(owner, f'{name} must be positive, got {value:g}.')
    if math.isinf(value) and not allow_inf:
        _fail(owner, f'{name} must be finite, got {value:g}.')
    return value


def check_non_negative(owner: str, name: str, value: Any) -> float:
    value = check_real(owner, name, value)
    if value < 0 or math.isinf(value):
        _fail(owner, f'{name} must be finite and non-negative, got {value:g}.')
    return value


def check_probability(owner: str, name: str, value: Any, allow_zero: bool = True,
                      allow_one: bool = False) -> float:
    value = check_real(owner, name, value)
    low_ok = value >= 0 if allow_zero else value > 0
    high_ok = value <= 1 if allow_one else value < 1
    if not (low_ok and high_ok):
        low = '[0' if allow_zero else '(0'
        high = '1]' if allow_one else '1)'
        _fail(owner, f'{name} must be in {low}, {high}, got {value:g}.')
    return value


def check_positive_int(owner: str, name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        _fail(owner, f'{name} must be an integer, got {value!r}.')
    if value < 1:
        _fail(owner, f'{name} must be a positive integer, got {value}.')
    return int(value)


def check_non_negative_int(owner: str, name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        _fail(owner, f'{name} must be an integer, got {value!r}.')
    if value < 0:
        _fail(owner, f'{name} must be a non-negative integer, got {value}.')
    return int(value)


def check_optional_positive_int(owner: str, name: str, value: Any) -> Optional[int]:
    return None if value is None else check_positive_int(owner, name, value)


def check_choice(owner: str, name: str, value: Any, choices) -> Any:
    if value not in choices:
        options = ', '.join(repr(c) for c in choices)
        _fail(owner, f'{name} must be one of {options}, got {value!r}.')
    return value


def check_bounds(owner: str, lower_name: str, lower: Any, upper_name: str, upper: Any):
    lower = check_real(owner, lower_name, lower)
    upper = check_real(owner, upper_name, upper)
    if math.isinf(lower) or math.isinf(upper):
        _fail(owner, f'{lower_name} and {upper_name} must be finite, got [{lower:g}, {upper:g}].')
    if lower > upper:
        _fail(owner, f'{lower_name} must not exceed {upper_name}, got [{lower:g}, {upper:g}].')
    return lower, upper


def check_distinct_strings(owner: str, name: str, value: Any) -> None:
    """``value`` must be a non-empty collection (not a string) of distinct strings."""
    if (isinstance(value, (str, bytes)) or not value
            or not all(isinstance(s, str) for s in value) or len(set(value)) != len(value)):
        _fail(owner, f'{name} must be a non-empty collection of distinct strings, got {value!r}.')
