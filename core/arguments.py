"""Checks for the counts and numbers a caller passes, with messages that name the argument.

A count of 0, a string where a count belongs, or a NaN rate does not fail
where it is given: Keras falls back to a default batch size for 0, a NaN
learning rate trains every weight into NaN, and `"2" < 1` fails deep inside
with a message about `<`. These checks refuse such values at the edge, in
the library's own words: the argument's name, the value, what is allowed.
Numbers from NumPy count as numbers; `True` and `"2"` do not.
"""

from __future__ import annotations

import math
import numbers
import string
from collections.abc import Container
from typing import Any


class FieldMessage:
    """An exception's message naming the settings fields it is about, for each edge to render.

    Library code speaks of fields and arguments as Python has them
    (`learning_rate`); a command line sets the same fields through flags of
    the same names (`--learning_rate`). So the message is a template whose
    named placeholders are fields and whose positional ones are values:

        FieldError("{train_batch_size}={0} is not divisible by "
                   "{gradient_accumulation_steps}={1}", 32, 3)

    reads `train_batch_size=32 is not divisible by gradient_accumulation_steps=3`
    from Python, and the program edge (`core.program`) renders each field
    that is one of its flags as `--field`. Values go in as positional
    arguments, never into the template, so a path or a text holding braces
    is kept as given.

    A mixin, so an error keeps the type callers catch: `FieldError` is a
    ValueError; a missing file can be `class X(FieldMessage, FileNotFoundError)`.
    """

    def __init__(self, template: str, *values: Any):
        self.template, self.values = template, values
        self.fields = tuple(dict.fromkeys(
            name for _, name, _, _ in string.Formatter().parse(template)
            if name and not name.isdigit()))
        super().__init__(self.render())

    def render(self, flags: Container[str] = ()) -> str:
        """The message, each field that is in `flags` written `--field`, the others bare."""
        return self.template.format(*self.values, **{
            field: f"--{field}" if field in flags else field for field in self.fields})

    def __reduce__(self):  # pickled (multiprocessing) as its template and values
        return type(self), (self.template, *self.values)


class FieldError(FieldMessage, ValueError):
    """A refused value, naming its fields (see `FieldMessage`). A ValueError, so callers
    that catch those keep working."""


class FieldFileNotFoundError(FieldMessage, FileNotFoundError):
    """A file that a field names, or every file of a pattern it names, is not there."""


class FieldOSError(FieldMessage, OSError):
    """A place a field names that cannot be read or written as asked (a folder where a file
    belongs, a folder that is missing or not writable)."""


def is_integer(value: Any) -> bool:
    """A Python or NumPy integer, not a bool (`True` is an int to Python, not a count)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """A finite real number (int or float, Python or NumPy), not a bool."""
    return (isinstance(value, numbers.Real) and not isinstance(value, bool)
            and math.isfinite(value))


def check_integer(name: str, value: Any, minimum: int = 1,
                  error: type[Exception] = FieldError) -> int:
    """`value` as an int, if it is an integer >= `minimum`.

    Args:
      name: the argument or field, as the message names it.
      value: what the caller gave.
      minimum: the smallest value allowed (1: a positive count).
      error: the exception class to raise (a ValueError subclass; a
        `FieldMessage` one names `name` as a field).
    """
    if not is_integer(value) or value < minimum:
        allowed = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise _refusal(error, name, f"must be {allowed}", value)
    return int(value)


INT32_MAX = 2**31 - 1  # TensorFlow's shapes, batch sizes and step counts are int32


def check_not_blank(name: str, value: Any) -> None:
    """Refuses a path of only spaces, naming `name` ("" is left to mean "not given")."""
    if isinstance(value, str) and value and not value.strip():
        raise FieldError("{%s}={0!r} is only blanks: give a path, or leave it out" % name, value)


def check_width(name: str, value: Any, minimum: int = 1,
                error: type[Exception] = FieldError) -> int:
    """A layer's width (units, labels) as `check_integer` takes it, at most INT32_MAX: a wider
    one would fail inside Keras as an out-of-range conversion, naming nothing."""
    value = check_integer(name, value, minimum, error)
    if value > INT32_MAX:
        raise _refusal(error, name, "must be at most 2**31 - 1 (a layer's width)", value)
    return value


def check_number(name: str, value: Any, minimum: float | None = None,
                 maximum: float | None = None, *, above: bool = False, below: bool = False,
                 error: type[Exception] = FieldError) -> float:
    """`value` as a float, if it is a finite number in the range given.

    Args:
      name: the argument or field, as the message names it.
      value: what the caller gave.
      minimum, maximum: the range's ends; None leaves that side open.
      above: `value` must exceed `minimum` rather than equal it at least.
      below: `value` must stay under `maximum` rather than reach it at most.
      error: the exception class to raise (a ValueError subclass; a
        `FieldMessage` one names `name` as a field).
    """
    inside = is_number(value) and (
        minimum is None or (value > minimum if above else value >= minimum)) and (
        maximum is None or (value < maximum if below else value <= maximum))
    if not inside:
        raise _refusal(error, name, f"must be {_range(minimum, maximum, above, below)}", value)
    return float(value)


def check_flag(name: str, value: Any, error: type[Exception] = FieldError) -> bool:
    """`value`, if it is True or False: a truthy string or number here is a typo, not a choice.

    Args:
      name: the argument or field, as the message names it.
      value: what the caller gave.
      error: the exception class to raise (a ValueError subclass).
    """
    if not isinstance(value, bool):
        raise _refusal(error, name, "must be True or False", value)
    return bool(value)


def _refusal(error: type[Exception], name: str, rule: str, value: Any) -> Exception:
    """`name rule, got value`, as a FieldError template where `name` is a field."""
    if issubclass(error, FieldMessage) and name.isidentifier():
        return error(f"{{{name}}} {rule}, got {{0!r}}", value)
    return error(f"{name} {rule}, got {value!r}")


def _range(minimum: float | None, maximum: float | None, above: bool, below: bool) -> str:
    if minimum == 0 and above and maximum is None:
        return "a positive finite number"
    if minimum is not None and maximum is not None:
        return (f"a finite number in {'(' if above else '['}{minimum:g}, "
                f"{maximum:g}{')' if below else ']'}")
    if minimum is not None:
        return f"a finite number {'>' if above else '>='} {minimum:g}"
    if maximum is not None:
        return f"a finite number {'<' if below else '<='} {maximum:g}"
    return "a finite number"


def check_positive(name: str, value: Any) -> Any:
    """`value` as given, if it is a finite number > 0: a size, rate or count of 0 trains nothing.

    For a count that must also be whole, `check_integer` is the stricter check.

    Args:
      name: the argument or field, as the message names it.
      value: what the caller gave.
    """
    check_number(name, value, 0, above=True)
    return value


def check_non_negative(name: str, value: Any) -> Any:
    """`value` as given, if it is a finite number >= 0 (NaN and infinity fail: a float flag
    parses "nan" and "inf").

    Args:
      name: the argument or field, as the message names it.
      value: what the caller gave.
    """
    check_number(name, value, 0)
    return value


def check_threshold(threshold: Any) -> float:
    """`threshold` as a float, if it lies strictly between 0 and 1 (a probability cut)."""
    return check_number("threshold", threshold, 0.0, 1.0, above=True, below=True)
