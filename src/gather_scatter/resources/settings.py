"""The one rule for settings, whether set by a call or by an environment variable.

A call (``set_num_threads``, ``set_memory_limit``, ``set_buffer_cache_size``) takes any
integer — Python or NumPy, anything with ``__index__`` but bool — at or above its minimum,
and raises ValueError for anything else. An environment variable with a value the call would
refuse is ignored with one RuntimeWarning naming it, and the default applies: a typo in the
environment never stops ``import gather_scatter`` or a kernel call.
"""

from __future__ import annotations

import operator
import os
import warnings
from typing import Any

_warned: set[tuple[str, str]] = set()


def checked(caller: str, name: str, value: Any, minimum: int) -> int:
    """``value`` as an int, or ValueError unless it is an integer >= ``minimum``."""
    try:
        if isinstance(value, bool):
            raise TypeError
        number = operator.index(value)
    except TypeError:
        number = None
    if number is None or number < minimum:
        raise ValueError(f"{caller}: {name} must be an int >= {minimum}, got {value!r}")
    return number


def from_env(variable: str, minimum: int, default: str) -> int | None:
    """The environment variable as an int >= ``minimum``; None when unset, empty or invalid
    (invalid: one RuntimeWarning per value, saying that ``default`` is used instead).
    """
    text = os.environ.get(variable, "").strip()
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < minimum:
        if (variable, text) not in _warned:
            _warned.add((variable, text))
            warnings.warn(
                f"{variable}={text!r} is not an integer >= {minimum}; ignored, using {default}",
                RuntimeWarning,
                stacklevel=3,
            )
        return None
    return value


def choice_from_env(variable: str, choices: tuple[str, ...]) -> str:
    """The environment variable as one of ``choices`` (case and surrounding spaces ignored).

    ``choices[0]``, the default, when it is unset or empty, and for any other value, which is
    ignored with one RuntimeWarning per value: a typo never stops an import or a call.
    """
    text = os.environ.get(variable, "").strip().lower()
    if not text:
        return choices[0]
    if text in choices:
        return text
    if (variable, text) not in _warned:
        _warned.add((variable, text))
        warnings.warn(
            f"{variable}={text!r} is not one of {choices}; ignored, using {choices[0]!r}", RuntimeWarning, stacklevel=3
        )
    return choices[0]
