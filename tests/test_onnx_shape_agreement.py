"""Our infer_shape against ``onnx.shape_inference.infer_shapes(strict_mode=True)`` on one-node
models, over generated shapes (static, symbolic, unknown dims, unknown ranks), attributes and
types for every ai.onnx version at its own opset (Scatter-9 at 10 too; at 11, where onnx still
infers from a deprecated schema, we refuse it: a row).

Where onnx infers a dim (a value or its own symbol), ours must be the same; where onnx raises,
we raise. Where onnx's inference is weaker (it accepts what the spec forbids), the case must
match a DIVERGENCES row; each row is checked on its example, so a fix in onnx fails loudly.
"""

from __future__ import annotations

import random
import re
from typing import Any, Callable, NamedTuple

import ml_dtypes
import numpy as np
import onnx
import onnx.helper as oh
import pytest
from onnx import TensorProto as TP

from gather_scatter import (
    DTypeError,
    GatherScatterError,
    InvalidAttributeError,
    ShapeError,
    UnsupportedOpError,
    infer_shape,
)
from gather_scatter.rules.versions import REGISTRY

# Each ai.onnx version at its own opset; Scatter-9 also at 10, the last opset that has it.
VERSIONS = sorted([(v.op_type, v.since_version) for (d, _, _), v in REGISTRY.items() if d == ""] + [("Scatter", 10)])
NP = {TP.FLOAT: np.float32, TP.FLOAT16: np.float16, TP.BFLOAT16: ml_dtypes.bfloat16, TP.STRING: object,
      TP.INT64: np.int64, TP.INT32: np.int32, TP.INT16: np.int16,
      # TensorScatter-24's float8 and 4-bit types
      TP.FLOAT8E4M3FN: ml_dtypes.float8_e4m3fn, TP.FLOAT8E4M3FNUZ: ml_dtypes.float8_e4m3fnuz,
      TP.FLOAT8E5M2: ml_dtypes.float8_e5m2, TP.FLOAT8E5M2FNUZ: ml_dtypes.float8_e5m2fnuz,
      TP.FLOAT8E8M0: ml_dtypes.float8_e8m0fnu, TP.INT4: ml_dtypes.int4, TP.UINT4: ml_dtypes.uint4,
      TP.FLOAT4E2M1: ml_dtypes.float4_e2m1fn}
LOW_PRECISION = [t for t in NP if t not in (TP.FLOAT, TP.FLOAT16, TP.BFLOAT16, TP.STRING, TP.INT64, TP.INT32,
                                            TP.INT16)]
# Our input order is the node's: TensorScatter's (past_cache, update, write_indices) too.
CASES_PER_VERSION = 300


class Case(NamedTuple):
    op: str
    opset: int
    shapes: list  # per input: list of dims (int, str, None) or None for unknown rank
    elems: list  # per input: onnx element type
    attrs: dict

    def ours(self) -> Any:
        try:
            return infer_shape(self.op, self.shapes, [NP[e] for e in self.elems], self.attrs, opset=self.opset)
        except GatherScatterError as exc:
            return exc

    def theirs(self) -> Any:
        """onnx's (shape, elem type) of the output, or the InferenceError."""
        names = ["x0", "x1", "x2"][: len(self.shapes)]
        inputs = [oh.make_tensor_value_info(n, e, s) for n, e, s in zip(names, self.elems, self.shapes)]
        graph = oh.make_graph([oh.make_node(self.op, names, ["y"], **self.attrs)], "g", inputs, [])
        model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", self.opset)],
                              ir_version=10 if self.opset < 24 else 11)
        try:
            inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        except onnx.shape_inference.InferenceError as exc:
            return exc
        (y,) = [v for v in inferred.graph.value_info if v.name == "y"]
        t = y.type.tensor_type
        if not t.HasField("shape"):
            return None, t.elem_type
        # onnx names dims it cannot know 'unk__N': for comparing, those are unknown.
        dims = [d.dim_value if d.HasField("dim_value") else d.dim_param for d in t.shape.dim]
        return tuple(None if isinstance(d, str) and (not d or d.startswith("unk__")) else d for d in dims), t.elem_type


class Divergence(NamedTuple):
    id: str
    error: type | tuple[type, ...]  # what we raise where onnx infers a shape
    message: str  # pattern of our message
    reason: str
    example: Case
    when: Callable[[Case], bool] = lambda case: True


DIVERGENCES = [
    Divergence("scatternd-updates-unchecked", ShapeError, r"^ScatterND-\d+: updates shape .* must equal",
               "onnx's ScatterND inference copies data's shape and never looks at updates",
               Case("ScatterND", 11, [[4, 5], [3, 1], [3, 4]], [TP.FLOAT, TP.INT64, TP.FLOAT], {})),
    Divergence("scatternd-k-unchecked", ShapeError, r"indices.shape\[-1\] = \d+ must be in \[0, ",
               "onnx's ScatterND inference does not bound indices.shape[-1] by rank(data)",
               Case("ScatterND", 18, [[4, 5], [3, 3], [3]], [TP.FLOAT, TP.INT64, TP.FLOAT], {})),
    Divergence("scatternd-rank-unchecked", ShapeError, r"^ScatterND-\d+: (data|indices) must have rank >= 1",
               "onnx's ScatterND inference accepts rank-0 data or indices",
               Case("ScatterND", 13, [[], [1, 0], [1]], [TP.FLOAT, TP.INT64, TP.FLOAT], {})),
    Divergence("gathernd-k-zero", ShapeError, r"^GatherND-\d+: indices.shape\[-1\] = 0 must be in \[1, ",
               "onnx's GatherND inference accepts indices.shape[-1] = 0 (the spec's lower bound is 1)",
               Case("GatherND", 13, [[2, 3], [4, 0]], [TP.FLOAT, TP.INT64], {})),
    Divergence("gathernd-batch-dims-range", InvalidAttributeError, r"^GatherND-1[23]: batch_dims = -?\d+ must be in",
               "onnx's GatherND inference does not check 0 <= batch_dims < min(q, r)",
               Case("GatherND", 12, [[2, 3, 4], [2, 1]], [TP.FLOAT, TP.INT64], {"batch_dims": 2})),
    Divergence("gathernd-batch-dims-equal", ShapeError, r"^GatherND-1[23]: batch dimension \d+ differs",
               "onnx's GatherND inference does not check that batch dims of data and indices agree",
               Case("GatherND", 13, [[2, 3, 4], [3, 1, 1]], [TP.FLOAT, TP.INT64], {"batch_dims": 1})),
    Divergence("elements-axis-unchecked", InvalidAttributeError, r"^(GatherElements|ScatterElements|Scatter)-\d+: "
               r"axis = -?\d+ is out of range",
               "onnx's GatherElements/ScatterElements/Scatter inference does not check the axis range",
               Case("GatherElements", 13, [[3, 4], [3, 4]], [TP.FLOAT, TP.INT64], {"axis": 2})),
    Divergence("elements-shapes-unchecked", ShapeError, r"^(GatherElements|ScatterElements|Scatter)-\d+: "
               r"((data|indices|updates) must have rank >= 1|indices must have the rank of data|indices.shape\[\d+\] = "
               r"\d+ exceeds data|updates shape .* must equal indices shape)",
               "onnx's GatherElements/ScatterElements/Scatter inference copies a shape and checks neither ranks, "
               "nor indices against data off the axis, nor updates against indices",
               Case("ScatterElements", 18, [[3, 4], [3, 5], [3, 5]], [TP.FLOAT, TP.INT64, TP.FLOAT], {})),
    Divergence("tensorscatter-shapes-unchecked", (ShapeError, InvalidAttributeError), r"^TensorScatter-24: ",
               "onnx's TensorScatter inference copies past_cache's shape and checks neither update, nor "
               "write_indices, nor the axis",
               Case("TensorScatter", 24, [[2, 8, 4, 16], [2, 8, 5, 16], [2]], [TP.FLOAT, TP.FLOAT, TP.INT64], {})),
    Divergence("scatter-deprecated-at-11", UnsupportedOpError, r"^Scatter: opset \d+ of domain ai.onnx has no Scatter",
               "onnx keeps a deprecated Scatter-11 schema whose inference still copies data's shape; Scatter "
               "exists at opsets 9-10 only (onnx.checker: 'Op registered for Scatter is deprecated in "
               "domain_version of 11')",
               Case("Scatter", 11, [[2, 3], [1, 3], [1, 3]], [TP.FLOAT, TP.INT64, TP.FLOAT], {"axis": 1})),
    Divergence("attributes-unchecked", InvalidAttributeError, r"(has no attribute|reduction = .* is not accepted)",
               "onnx's inference ignores attributes a version lacks and reduction values it does not accept "
               "(onnx.checker reports them)",
               Case("GatherND", 11, [[2, 3], [4, 1]], [TP.FLOAT, TP.INT64], {"batch_dims": 0})),
    Divergence("types-unchecked", DTypeError, r"(which this version does not allow|they must match|is not defined for)",
               "onnx's inference does not check type constraints (onnx.checker does not either)",
               Case("GatherND", 13, [[2, 3], [4, 1]], [TP.FLOAT, TP.INT32], {})),
    Divergence("gather-checks-skipped-rank-unknown", (ShapeError, InvalidAttributeError),
               r"^Gather(ND)?-\d+: ((data|indices) must have rank >= 1|axis = -?\d+ is out of range)",
               "onnx's Gather/GatherND inference returns before any check when the other input's rank is "
               "unknown; ours checks what the known shape proves",
               Case("Gather", 1, [[3], None], [TP.FLOAT, TP.INT64], {"axis": 1}),
               when=lambda case: None in case.shapes),
]

# --- generated cases ---------------------------------------------------------------------

DIMS = [0, 1, 2, 3, 5, "N", "M", None]
DATA_TYPES = {11: [TP.FLOAT, TP.FLOAT, TP.BFLOAT16], 12: [TP.FLOAT, TP.BFLOAT16]}


def _dims(rng: random.Random, rank: int) -> list:
    return [rng.choice(DIMS) for _ in range(rank)]


def _blur(rng: random.Random, shape: list | None, p: float = 0.2) -> list | None:
    """Some dims made symbolic or unknown, and sometimes the whole rank unknown."""
    if shape is None or rng.random() < 0.07:
        return None
    return [rng.choice(["N", None]) if rng.random() < p else d for d in shape]


def _types(rng: random.Random, n: int) -> list:
    data = rng.choice([TP.FLOAT] * 6 + [TP.FLOAT16, TP.BFLOAT16, TP.STRING])
    index = TP.INT64 if rng.random() < 0.9 else rng.choice([TP.INT32, TP.INT16])
    elems = [data, index] + ([data if rng.random() < 0.93 else TP.FLOAT16] if n == 3 else [])
    return elems


def _gather(rng, since) -> Case:
    r, q = rng.choice([0, 1, 1, 2, 2, 3, 4]), rng.choice([0, 1, 2, 3])
    attrs = {} if rng.random() < 0.3 else {"axis": rng.randint(-r - 1, r)}
    return Case("Gather", since, [_blur(rng, _dims(rng, r)), _blur(rng, _dims(rng, q))], _types(rng, 2), attrs)


def _gather_nd(rng, since) -> Case:
    r, b = rng.choice([0, 1, 2, 3, 4]), rng.choice([0, 0, 0, 1, 2])
    data = _dims(rng, r)
    k = rng.choice([0] + list(range(1, max(r - b, 0) + 2)) * 3)
    mid = _dims(rng, rng.choice([0, 1, 2]))
    indices = (data[:b] if rng.random() < 0.8 else _dims(rng, b)) + mid + [k]
    if rng.random() < 0.05:
        indices = []
    attrs = {}
    if since >= 12 and rng.random() < 0.7 or rng.random() < 0.05:
        attrs["batch_dims"] = b
    return Case("GatherND", since, [_blur(rng, data), _blur(rng, indices, 0.1)], _types(rng, 2), attrs)


def _scatter_nd(rng, since) -> Case:
    r = rng.choice([0, 1, 1, 2, 3, 4])
    data = _dims(rng, r)
    k = rng.choice(list(range(0, r + 1)) * 4 + [r + 1])
    indices = _dims(rng, rng.choice([0, 1, 2])) + [k]
    if rng.random() < 0.04:
        indices = []
    updates = indices[:-1] + data[k:] if rng.random() < 0.7 else _dims(rng, rng.choice([0, 1, 2, 3]))
    attrs = {}
    if since >= 16 and rng.random() < 0.6 or rng.random() < 0.04:
        attrs["reduction"] = rng.choice(["none", "add", "mul", "max", "min", "sum"])
    shapes = [_blur(rng, data), _blur(rng, indices, 0.1), _blur(rng, updates)]
    return Case("ScatterND", since, shapes, _types(rng, 3), attrs)


def _elements(op):
    def make(rng, since) -> Case:
        r = rng.choice([0, 1, 1, 2, 3, 4])
        data = _dims(rng, r)
        axis = (rng.randint(-r, r - 1) if rng.random() < 0.9 else rng.choice([-r - 1, r])) if r else 0
        indices = [d if rng.random() < 0.75 else rng.choice(DIMS) for d in data]
        if rng.random() < 0.08:
            indices = _dims(rng, rng.choice([0, 1, 2, 3]))
        shapes = [_blur(rng, data), _blur(rng, indices, 0.1)]
        attrs = {} if rng.random() < 0.2 else {"axis": axis}
        if op != "GatherElements":
            shapes.append(_blur(rng, list(indices) if rng.random() < 0.8 else _dims(rng, len(indices))))
            if since >= 16 and rng.random() < 0.6 or rng.random() < 0.04:
                attrs["reduction"] = rng.choice(["none", "add", "mul", "max", "min", "sum"])
        return Case(op, since, shapes, _types(rng, len(shapes)), attrs)
    return make


def _tensor_scatter(rng, since) -> Case:
    r = rng.choice([1, 2, 3, 3, 4, 4])
    past = _dims(rng, r)
    axis = rng.choice([-2, -1, 0, 1, 2, r - 1] if r else [0])
    update = [d if rng.random() < 0.75 else rng.choice(DIMS) for d in past]
    shapes = [_blur(rng, past), _blur(rng, update)]
    if rng.random() < 0.7:
        shapes.append([past[0] if past and rng.random() < 0.85 else rng.choice(DIMS)])
    elems = _types(rng, 3)
    if rng.random() < 0.3:
        elems[0] = rng.choice(LOW_PRECISION)
    elems = [elems[0], elems[0] if rng.random() < 0.93 else TP.FLOAT16] + ([elems[1]] if len(shapes) == 3 else [])
    attrs = {} if rng.random() < 0.3 else {"axis": axis}
    if rng.random() < 0.5:
        attrs["mode"] = rng.choice(["linear", "circular", "ring"])
    return Case("TensorScatter", since, shapes, elems, attrs)


MAKERS = {"Gather": _gather, "GatherND": _gather_nd, "ScatterND": _scatter_nd,
          "GatherElements": _elements("GatherElements"), "ScatterElements": _elements("ScatterElements"),
          "Scatter": _elements("Scatter"), "TensorScatter": _tensor_scatter}


def _cases(op: str, since: int) -> list[Case]:
    rng = random.Random(f"{op}-{since}")
    return [MAKERS[op](rng, since) for _ in range(CASES_PER_VERSION)]


def _agrees(ours: tuple, theirs: tuple) -> bool:
    (shape, dtype), (their_shape, their_elem) = ours, theirs
    if their_elem and np.dtype(NP[their_elem]) != dtype:
        return False
    if their_shape is None:
        return True
    return shape is not None and len(shape) == len(their_shape) and all(
        t is None or s == t for s, t in zip(shape, their_shape)
    )


def _divergence(case: Case, ours: Any) -> Divergence | None:
    return next(
        (d for d in DIVERGENCES if isinstance(ours, d.error) and re.search(d.message, str(ours)) and d.when(case)),
        None,
    )


def compare(case: Case) -> str:
    """'agree', or the id of the listed divergence it is; AssertionError for anything else."""
    ours, theirs = case.ours(), case.theirs()
    if isinstance(theirs, Exception):
        assert isinstance(ours, GatherScatterError), f"onnx raised {theirs} but we inferred {ours} for {case}"
        return "agree"
    if isinstance(ours, GatherScatterError):
        row = _divergence(case, ours)
        assert row is not None, f"we raised {ours!r} but onnx inferred {theirs} for {case}"
        return row.id
    assert _agrees(ours, theirs), f"we inferred {ours}, onnx {theirs}, for {case}"
    return "agree"


@pytest.mark.parametrize("op, since", VERSIONS, ids=[f"{op}-{v}" for op, v in VERSIONS])
def test_agreement_with_onnx(op, since):
    outcomes = [compare(case) for case in _cases(op, since)]
    # The generator must exercise both sides: many agreements, of both successes and errors.
    assert outcomes.count("agree") >= CASES_PER_VERSION // 3


@pytest.mark.parametrize("row", DIVERGENCES, ids=[d.id for d in DIVERGENCES])
def test_divergence_still_holds(row):
    ours, theirs = row.example.ours(), row.example.theirs()
    assert not isinstance(theirs, Exception), f"onnx now raises for {row.id}: {theirs}; drop the row"
    assert isinstance(ours, row.error) and re.search(row.message, str(ours)), ours
    assert _divergence(row.example, ours) is row


def test_symbols_and_unknown_ranks_pass_through_like_onnx():
    case = Case("GatherND", 12, [["B", "S", 8], ["B", "Q", 1]], [TP.FLOAT, TP.INT64], {"batch_dims": 1})
    assert case.ours() == (("B", "Q", 8), np.dtype(np.float32))
    assert case.theirs() == (("B", "Q", 8), TP.FLOAT)
    case = Case("Gather", 13, [None, [2]], [TP.FLOAT, TP.INT64], {})
    assert case.ours() == (None, np.dtype(np.float32)) and case.theirs() == (None, TP.FLOAT)
