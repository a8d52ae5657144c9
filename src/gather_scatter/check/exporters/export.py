"""Export one sample, run the graph with our evaluator, and compare with torch eager.

The kinds of outcome, in the order they are decided:

- ``export_refused``: the exporter raised; ``export_crashed``: it killed its process or hung
  (the worker's verdict).
- ``checker_refused``: ``onnx.checker.check_model`` refused the model it wrote.
- ``evaluator_refused``: our evaluator refused the graph as invalid (a typed
  :class:`~gather_scatter.GatherScatterError`: an attribute its version lacks, an index the
  exporter computed out of range, ...): the exporter wrote an invalid model.
- ``wrong_count``, ``wrong_dtype``, ``wrong_shape``, ``wrong_output``: the graph's outputs are not
  eager's (the first differing element is named).
- ``undefined``: the outputs differ only where torch's own result is unspecified (an element
  written twice without accumulation): counted, not a finding. A difference anywhere else is
  ``wrong_output`` as usual.
- ``not_evaluated``: onnx.reference failed on an operator outside the family: counted, not a finding.
- ``ok``.

Values compare bit for bit (NaN as NaN), except a float sum, product or mean, which torch may order
differently from the spec's loop: within ``TOLERANCE`` of the element's magnitude (at least 1).
"""

from __future__ import annotations

import contextlib
import io
import logging
import re
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import GatherScatterError, one_line
from ...rules.versions import FAMILY
from .program import build, to_numpy
from .samples import OPERATIONS, Sample

__all__ = [
    "FINDING_KINDS",
    "MODES",
    "TOLERANCE",
    "Exported",
    "carrier",
    "check_sample",
    "compare",
    "eager",
    "export",
    "nodes",
]

MODES = ("dynamo", "torchscript")
FINDING_KINDS = (
    "export_refused",
    "checker_refused",
    "evaluator_refused",
    "wrong_count",
    "wrong_dtype",
    "wrong_shape",
    "wrong_output",
    "export_crashed",
)
#: Relative tolerance of a float sum, product or mean, by torch dtype name.
TOLERANCE = {"float64": 1e-12, "float32": 1e-5, "float16": 2e-3, "bfloat16": 1.6e-2}


@dataclass
class Exported:
    """One sample through one exporter: the outcome and what it is made of."""

    kind: str
    detail: str = ""
    model: Any = None  # onnx.ModelProto where the export succeeded
    feeds: dict = field(default_factory=dict)
    eager: list = field(default_factory=list)  # NumPy outputs of torch eager
    ours: list | None = None  # NumPy outputs of our evaluator
    position: tuple | None = None  # of the first differing element, with ``output``
    output: int = 0


def eager(sample: Sample) -> list:
    """Return torch eager's outputs of ``sample`` as NumPy arrays (the inputs are cloned first).

    Raises whatever torch raises for a sample it refuses.
    """
    import torch

    module, tensors, _ = build(sample)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's deprecations of a sample's call are not the user's
        out = module(*[t.clone() for t in tensors])
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    return [to_numpy(o) for o in outs]


@contextlib.contextmanager
def _quiet():
    """Hold back the exporters' prints, warnings and log lines (they are not the user's)."""
    sink = io.StringIO()
    loggers = [
        logging.getLogger(n)
        for n in (
            "torch",
            "torch.onnx",
            "torch.export",
            "torch._dynamo",
            "torch.fx",
            "torch.fx.experimental.symbolic_shapes",
            "onnxscript",
        )
    ]
    levels = [log.level for log in loggers]
    for log in loggers:
        log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            warnings.simplefilter("ignore")
            yield
    finally:
        for log, level in zip(loggers, levels, strict=True):
            log.setLevel(level)


def export(module: Any, tensors: list, names: list[str], mode: str, opset: int | None) -> Any:
    """Return ``module`` exported by torch's ``mode`` exporter at ``opset`` (its own default: None).

    Parameters
    ----------
    module : torch.nn.Module
    tensors : list of torch.Tensor
        The inputs, named ``names`` in the graph.
    mode : {'dynamo', 'torchscript'}
        ``torch.onnx.export(dynamo=True)`` (onnxscript's torchlib) or the TorchScript exporter
        (opset 18 unless ``opset`` says otherwise).

    Returns
    -------
    onnx.ModelProto

    Raises
    ------
    Exception
        Whatever the exporter raises.
    """
    import onnx
    import torch

    with _quiet():
        if mode == "dynamo":
            program = torch.onnx.export(
                module, tuple(tensors), dynamo=True, opset_version=opset, input_names=names, verbose=False
            )
            if program is None:
                raise RuntimeError("torch.onnx.export(dynamo=True) returned no program")
            return program.model_proto
        buffer = io.BytesIO()
        export_to: Any = buffer  # the TorchScript exporter writes to a file object (its annotation says a path)
        torch.onnx.export(module, tuple(tensors), export_to, dynamo=False, opset_version=opset or 18, input_names=names)
        return onnx.load_from_string(buffer.getvalue())


def compare(
    got: list, want: list, tolerance: float | None, unspecified: np.ndarray | None = None
) -> tuple[str, str, int, tuple | None]:
    """Return (kind, detail, output, position): how the graph's outputs ``got`` differ from eager's ``want``.

    ``unspecified`` (a mask of output 0) marks elements torch writes twice without accumulating:
    a difference only there is ``undefined``, not ``wrong_output``.
    """
    if len(got) != len(want):
        return "wrong_count", f"{len(got)} outputs, eager gives {len(want)}", 0, None
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        g = np.asarray(g)
        if g.dtype != w.dtype:
            return "wrong_dtype", f"output {k} is {g.dtype}, eager gives {w.dtype}", k, None
        if g.shape != w.shape:
            return "wrong_shape", f"output {k} has shape {g.shape}, eager gives {w.shape}", k, None
        if w.dtype.kind in "fV":  # ml_dtypes' bfloat16 is of kind V
            a, e = g.astype(np.float64), w.astype(np.float64)
            with np.errstate(invalid="ignore"):
                bad = ~((a == e) | (np.isnan(a) & np.isnan(e)))
                if tolerance is not None:
                    bad &= ~(np.abs(a - e) <= tolerance * np.maximum(1.0, np.abs(e)))
                else:
                    bad |= (a == e) & (np.signbit(a) != np.signbit(e))  # -0.0 and 0.0 are different bits
        else:
            bad = g != w
        loose = None
        if k == 0 and unspecified is not None and unspecified.shape == bad.shape:
            loose, bad = bad & unspecified, bad & ~unspecified
        if bad.any():
            flat = int(np.argmax(bad.reshape(-1)))
            position = tuple(int(i) for i in np.unravel_index(flat, w.shape))
            how = f"within {tolerance:g} of its magnitude" if tolerance is not None else "bit for bit"
            return (
                "wrong_output",
                f"{int(bad.sum())} of {w.size} elements of output {k} differ ({how}); first at {list(position)}: "
                f"{g[position]!r}, eager gives {w[position]!r}",
                k,
                position,
            )
        if loose is not None and loose.any():
            at = tuple(int(i) for i in np.unravel_index(int(np.argmax(loose.reshape(-1))), w.shape))
            return (
                "undefined",
                f"{int(loose.sum())} elements written twice without accumulation differ (torch leaves which write "
                f"wins unspecified); first at {list(at)}: {g[at]!r}, eager gives {w[at]!r}",
                k,
                at,
            )
    return "ok", "", 0, None


def _tolerance(sample: Sample, want: list) -> float | None:
    """Return the relative tolerance of a float sum, product or mean; None (bits) for anything else."""
    op = OPERATIONS[sample.op]
    if not op.reduces:
        return None
    if op.writes in ("index_put", "put"):  # they sum only with accumulate (put's may be positional)
        flags = [sample.kwargs.get("accumulate"), *(a for a in sample.args if isinstance(a, bool))]
        if not any(flags):
            return None
    names = {w.dtype.name for w in want}
    return max((TOLERANCE[n] for n in names if n in TOLERANCE), default=None)


def check_sample(
    sample: Sample, mode: str, opset: int | None, want: list, exporter: Any = None, phase: Any = None
) -> Exported:
    """Export ``sample`` with ``mode``, run it with our evaluator, and classify it against eager's ``want``.

    ``exporter``, where given, replaces :func:`export` (same arguments): a plugin's exporter, or
    a test's deliberately wrong one. ``phase``, where given, is called with ``'evaluate'`` before
    our evaluator runs (the worker tells an exporter's crash from ours by it).
    """
    import onnx

    from ...models import run_model

    module, tensors, names = build(sample)
    try:
        model = (exporter or export)(module, tensors, names, mode, opset)
    except Exception as exc:  # noqa: BLE001 - the exporter's refusal is the finding
        return Exported("export_refused", _first_line(exc), eager=want)
    by_name = dict(zip(names, tensors, strict=True))
    feeds = {i.name: to_numpy(by_name[i.name]) for i in model.graph.input if i.name in by_name}
    result = Exported("ok", model=model, feeds=feeds, eager=want)
    try:
        onnx.checker.check_model(model)
    except Exception as exc:  # noqa: BLE001
        result.kind, result.detail = "checker_refused", _first_line(exc)
        return result
    if phase is not None:
        phase("evaluate")
    try:
        with _quiet():
            outputs = run_model(model, feeds)
    except GatherScatterError as exc:
        result.kind, result.detail = "evaluator_refused", one_line(exc)
        return result
    except Exception as exc:  # noqa: BLE001 - onnx.reference on an operator outside the family
        result.kind, result.detail = "not_evaluated", _first_line(exc)
        return result
    result.ours = [outputs[o.name] for o in model.graph.output]
    kind, detail, output, position = compare(result.ours, want, _tolerance(sample, want), sample.undefined)
    result.kind, result.detail, result.output, result.position = kind, detail, output, position
    return result


def _first_line(exc: BaseException) -> str:
    """Return the exception in one line: its type, and the innermost cause's text (torch.onnx wraps it twice)."""
    inner = exc
    seen = {id(exc)}
    while (nxt := inner.__cause__ or inner.__context__) is not None and id(nxt) not in seen:
        seen.add(id(nxt))
        inner = nxt
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line).strip() for line in str(inner).splitlines()]
    text = " ".join(line for line in lines[:3] if line)
    head = type(exc).__name__ if inner is exc else f"{type(exc).__name__} from {type(inner).__name__}"
    return one_line(f"{head}: {text}")[:600]


def _in_family(node: Any) -> bool:
    return ("" if node.domain == "ai.onnx" else node.domain, node.op_type) in FAMILY


def _text(node: Any) -> str:
    """Return a node as ``ScatterElements(reduction='add', axis=0)`` for the family, its op type otherwise."""
    from onnx import helper

    if not _in_family(node):
        return node.op_type
    values = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    attrs = ", ".join(f"{k}={(v.decode() if isinstance(v, bytes) else v)!r}" for k, v in values.items())
    return f"{node.op_type}({attrs})"


def nodes(model: Any) -> list[str]:
    """Return the graph's nodes in order, the family's with their attributes (``ScatterElements(reduction='add')``)."""
    return [_text(node) for node in model.graph.node]


def carrier(model: Any, output: int) -> str | None:
    """Return the family node nearest graph output ``output`` (walking back through producers), or None."""
    produced = {name: node for node in model.graph.node for name in node.output}
    frontier = [model.graph.output[output].name]
    seen: set = set()
    while frontier:
        node = produced.get(frontier.pop(0))
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if _in_family(node):
            return _text(node)
        frontier.extend(node.input)
    return None
