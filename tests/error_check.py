"""One assertion for the error tables: exact class, the builtin it must also be, the whole
message (a regex matched against all of it) and the structured fields."""

from __future__ import annotations

import re
from typing import Any, Mapping

from gather_scatter import (
    ArityError,
    DTypeError,
    GatherScatterError,
    IndexOutOfBoundsError,
    InvalidAttributeError,
    NodeError,
    OutputTooLargeError,
    ShapeError,
    UnsupportedOpError,
)

# Each class and the builtin a caller would already catch around our calls.
BUILTIN = {
    IndexOutOfBoundsError: IndexError,
    ShapeError: ValueError,
    InvalidAttributeError: ValueError,
    DTypeError: TypeError,
    UnsupportedOpError: LookupError,
    OutputTooLargeError: MemoryError,
    ArityError: ValueError,
    NodeError: RuntimeError,
}


def assert_error(err: BaseException, cls: type, pattern: str, fields: Mapping[str, Any]) -> None:
    assert type(err) is cls, f"{type(err).__name__}: {err}"
    assert isinstance(err, GatherScatterError)
    assert isinstance(err, BUILTIN[cls])
    assert re.fullmatch(pattern, str(err)), f"message {str(err)!r} does not match {pattern!r}"
    for name, expected in fields.items():
        actual = getattr(err, name)
        assert actual == expected and type(actual) is type(expected), (
            f"field {name}: {actual!r} != {expected!r}"
        )


def same_error(expected: BaseException | None, actual: BaseException | None) -> bool:
    """Whether two outcomes of :func:`raised` are the same: both None, or one class and one message."""
    return type(actual) is type(expected) and str(actual) == str(expected)


def raised(call) -> GatherScatterError | None:
    """The GatherScatterError ``call()`` raises, or None (other exceptions propagate)."""
    try:
        call()
    except GatherScatterError as exc:
        return exc
    return None
