"""The hosted Session's onnxruntime steps: a segment run by its C session (:class:`OrtStep`),
and Identity outputs resolved in Python put among the values (:class:`Aliases`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ._partition import PlanStep
from ._values import to_numpy, to_ort

__all__ = ["Aliases", "OrtStep"]


class OrtStep:
    """One onnxruntime segment. What a run needs is fixed here: the names it feeds (those a
    run always holds, and the graph inputs with an initializer, fed or not), the mode, the
    C session and one ``RunOptions`` (``None`` makes a fresh one each call: 1.5 us)."""

    def __init__(
        self, hosted: Any, step: PlanStep, source: Any, ortvalues: bool, feeds: tuple[str, ...], maybe: frozenset
    ):
        self.hosted = hosted
        self.step = step
        self.ortvalues = ortvalues
        self.feeds = tuple(n for n in feeds if n not in maybe)
        self.maybe = tuple(n for n in feeds if n in maybe)
        self.outputs = list(step.outputs)
        session = hosted.ort.InferenceSession(source, hosted.options, providers=["CPUExecutionProvider"])
        self.session = session._sess  # the C session: the Python wrapper's checks cost 30 us a call
        self.run_options = hosted.ort.RunOptions()
        self.run: Callable[[dict[str, Any]], None] = self._ortvalues_run if ortvalues else self._numpy_run()

    def _ortvalues_run(self, values: dict[str, Any]) -> None:
        hosted = self.hosted
        c_ortvalue = hosted.c_ortvalue
        try:
            keep: list[Any] = []
            ort = hosted.ort
            feeds = {n: to_ort(values[n], ort, c_ortvalue, keep) for n in self.feeds}
            for n in self.maybe:
                if n in values:
                    feeds[n] = to_ort(values[n], ort, c_ortvalue, keep)
            out = self.session.run_with_ort_values(feeds, self.outputs, self.run_options)
        except Exception as exc:  # onnxruntime's errors are its own classes
            raise hosted.node_error(exc) from exc
        values.update(zip(self.outputs, out, strict=True))

    def _numpy_run(self) -> Any:
        """The run of a segment called with NumPy: its names and calls bound, and loops, not
        comprehensions (each a call of its own in Python 3.11: ~2 us of a 20-Relu segment's 17)."""
        names, maybe, outputs, c_ortvalue = self.feeds, self.maybe, self.outputs, self.hosted.c_ortvalue
        session_run, run_options, node_error = self.session.run, self.run_options, self.hosted.node_error
        ndarray = np.ndarray  # most values are arrays already: no call of to_numpy for them

        def run(values: dict[str, Any]) -> None:
            feeds = {}
            for n in names:
                v = values[n]
                feeds[n] = v if type(v) is ndarray else to_numpy(v, c_ortvalue)
            for n in maybe:
                if n in values:
                    feeds[n] = to_numpy(values[n], c_ortvalue)
            try:
                out = session_run(outputs, feeds, run_options)
            except Exception as exc:  # onnxruntime's errors are its own classes
                raise node_error(exc) from exc
            values.update(zip(outputs, out, strict=True))

        if len(names) != 1 or maybe or len(outputs) != 1:
            return run
        (name,), (output,) = names, outputs

        def run_one(values: dict[str, Any]) -> None:  # one value in, one out (a body's chain): no loops
            v = values[name]
            try:
                out = session_run(outputs, {name: v if type(v) is ndarray else to_numpy(v, c_ortvalue)}, run_options)
            except Exception as exc:  # onnxruntime's errors are its own classes
                raise node_error(exc) from exc
            values[output] = out[0]

        return run_one


class Aliases:
    """Identity outputs resolved in Python (:mod:`._aliases`) that a later step reads, put among
    the values after the step whose segment held them."""

    def __init__(self, pairs: tuple[tuple[str, str], ...]) -> None:
        self.pairs = pairs

    def run(self, values: dict[str, Any]) -> None:
        for out, root in self.pairs:
            values[out] = values[root]
