"""The error hierarchy: one base class, one subclass per kind of fault.

Each subclass also derives from the builtin exception a caller would already catch
(IndexError, ValueError, TypeError, LookupError, MemoryError), so
``except IndexError`` keeps working around our calls. Every error keeps the facts
of its message as fields: ``op`` and ``since_version`` (the operator version that
rejected the input), ``input`` (which input or attribute), ``position`` (the first
bad position in row-major order), ``value``, ``valid_range`` and ``axis`` (the data or
input axis at fault); inside a model, ``node`` (the name of the node that raised it).
"""

from __future__ import annotations

from typing import Any, TypeVar

__all__ = [
    "ArityError",
    "DTypeError",
    "GatherScatterError",
    "IndexOutOfBoundsError",
    "InvalidAttributeError",
    "ModelInputError",
    "NodeError",
    "OutputTooLargeError",
    "ShapeError",
    "UnsupportedOpError",
]


_E = TypeVar("_E", bound="GatherScatterError")


class GatherScatterError(Exception):
    """Base class of every error raised by gather_scatter."""

    def __init__(
        self,
        message: str,
        *,
        op: str | None = None,
        since_version: int | None = None,
        input: str | None = None,
        position: tuple[int, ...] | None = None,
        value: Any = None,
        valid_range: tuple[int, int | None] | None = None,
        axis: int | None = None,
        node: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.op = op
        self.since_version = since_version
        self.input = input
        self.position = position
        self.value = value
        self.valid_range = valid_range
        self.axis = axis
        self.node = node

    def __reduce__(self):  # keep the fields through pickling (multiprocessing, pytest-xdist)
        return (_rebuild, (type(self), self.message, self.__dict__))

    def in_node(self: _E, name: str, op_type: str) -> _E:
        """Return the same error (class and fields) with ``node`` set, naming the node first.

        For an error raised while evaluating that node of a model: the new error's message
        starts with the node's name and operator type.

        Parameters
        ----------
        name : str
            The node's name (``''`` for an unnamed node).
        op_type : str
            The node's operator type, shown after the name.

        Returns
        -------
        GatherScatterError
            A new error of this error's class, ``node 'read' (Gather): <message>``; this one
            is not modified. Raises nothing itself, for every class here (MemoryError's
            subclass included).
        """
        message = f"{node_label(name)} ({op_type}): {self.message}"
        return _rebuild(type(self), message, {**self.__dict__, "message": message, "node": name})

    def with_note(self: _E, note: str) -> _E:
        """Return the same error (class and fields) with ``note`` appended to its message.

        For a fact about where the error was found, not about the input (a deferred bounds
        check says its call returned before it). This error is not modified.
        """
        message = self.message + note
        return _rebuild(type(self), message, {**self.__dict__, "message": message})


def node_label(name: str) -> str:
    """How messages name a model's node: ``node 'read'``, or ``unnamed node``."""
    return f"node {name!r}" if name else "unnamed node"


def one_line(exc: object, *, with_type: bool = False, limit: int | None = None) -> str:
    r"""Return an error's message (or any text) on one line, each run of white space one space.

    How a message of ours quotes another library's error (onnx's and onnxruntime's span lines,
    protobuf's embed whole protos); ``with_type=True`` puts the error's class first; ``limit``
    cuts the text to that many characters, the last three ``...``.

    >>> one_line(ValueError("bad\n  input"))
    'bad input'
    >>> one_line(ValueError("bad\n  input"), with_type=True)
    'ValueError: bad input'
    >>> one_line("a  long\ntext", limit=8)
    'a lon...'
    """
    text = " ".join(str(exc).split())
    text = f"{type(exc).__name__}: {text}" if with_type else text
    return text if limit is None or len(text) <= limit else text[: limit - 3] + "..."


def _rebuild(cls, message, fields):
    # Through the constructor: ``cls.__new__(cls)`` alone is refused for MemoryError's
    # subclasses ("MemoryError.__new__(OutputTooLargeError) is not safe").
    err = cls(message)
    err.__dict__.update(fields)
    return err


class IndexOutOfBoundsError(GatherScatterError, IndexError):
    """An index value lies outside ``[-s, s-1]`` for its data axis of size ``s``."""


class ShapeError(GatherScatterError, ValueError):
    """A rank, shape or batch-dimension mismatch between the inputs."""


class InvalidAttributeError(GatherScatterError, ValueError):
    """An attribute the version does not have, or a value it does not accept."""


class DTypeError(GatherScatterError, TypeError):
    """A data or index type the version does not allow, or mismatched data types."""


class UnsupportedOpError(GatherScatterError, LookupError):
    """An operator, domain or opset this library does not implement."""


class ModelInputError(GatherScatterError, ValueError):
    """A model input that is missing from the feeds, or a feed the model does not declare."""


class OutputTooLargeError(GatherScatterError, MemoryError):
    """The result would exceed the memory limit, or its offsets would overflow int64."""


class ArityError(GatherScatterError, ValueError):
    """A node given more or fewer inputs than its version takes, or a required input left out.

    ``value`` is the number of inputs given (``''`` for an input a model's node leaves out
    with an empty name), ``valid_range`` the numbers the version takes, ``input`` the first
    input missing (None when there are too many).
    """


class NodeError(GatherScatterError, RuntimeError):
    """An error raised inside a model's node by an operator that is not ours (onnx.reference's).

    The original exception is kept as ``__cause__``; ``node`` is the node's name, ``op`` its
    operator type and ``domain`` its domain (``'ai.onnx'`` for the default one).
    """

    domain: str | None = None
