"""Where onnxruntime is wrong or cannot run an indexing node: the routing table of the hosted
Session (issue 25), as data.

Each rule names the operators it covers, the condition on the node (its data type, its
``reduction``, the intra-op thread count onnxruntime would use), why a node it matches must run
on our kernels instead (with the onnxruntime version that showed it), and the first onnxruntime
release measured to fix it (None: none yet). A node that no rule matches stays in onnxruntime.
A release newer than the last one measured keeps every open rule: a rule ends only where a
release is measured to fix it.

This module is pure data and one lookup; it imports neither onnx nor onnxruntime.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CONDITIONS", "OUTCOMES", "RULES", "NodeFacts", "Rule", "route_reason", "routed_combinations"]

_SCATTER_REDUCTIONS = frozenset({("", "ScatterND"), ("", "ScatterElements")})  # Scatter-9 has no reduction
_GATHERS = frozenset({("", "Gather"), ("", "GatherElements"), ("", "GatherND"), ("com.microsoft", "GatherND")})
_HALVES = frozenset({"float16", "bfloat16"})
_FLOATS = frozenset({"float", "double", "float16", "bfloat16"})
_BLOCK_QUANTIZED = frozenset({("com.microsoft", "GatherBlockQuantized")})


#: Each rule kind's condition on a node, as the docs' table says it.
CONDITIONS = {
    "reduction_threads": "a reduction (add, mul, max, min) at more than one intra-op thread",
    "reduction_half": "a reduction on float16 or bfloat16 data, at any thread count",
    "nan_max_min": "reduction max or min on float, double, float16 or bfloat16 data",
    "bool_max_min": "reduction max or min on bool data",
    "string_max_min": "reduction max or min on string data",
    "string": "string data",
    "batch_dims": "batch_dims > 0",
    "output_bfloat16": "bfloat16 scales and output",
    "rank1_data": "data of rank 1 (which its schema allows)",
}

#: What onnxruntime does where a rule matches, as the docs' table says it.
OUTCOMES = {
    "wrong_value": "a wrong value",
    "wrong_shape": "a wrong shape",
    "accepts_invalid": "accepts an invalid input",
    "refuses_at_load": "refuses a valid model at load",
    "refuses_at_run": "refuses a valid input at run time",
    "crash": "ends the process",
}


@dataclass(frozen=True)
class NodeFacts:
    """What a rule looks at: the node's ``domain`` and ``op_type``, its data's ONNX type name
    (``"float"``, ``"float16"``, ``"string"``...; None where unknown), its ``reduction``
    attribute (``"none"`` where absent), onnxruntime's intra-op ``threads``, its output's
    type name (``output_dtype``; None where unknown), its data's rank (``data_rank``; None
    where unknown) and its ``batch_dims`` attribute (0 where absent)."""

    domain: str
    op_type: str
    dtype: str | None
    reduction: str = "none"
    threads: int = 1
    output_dtype: str | None = None
    data_rank: int | None = None
    batch_dims: int = 0


@dataclass(frozen=True)
class Rule:
    """Nodes of ``ops`` (``(domain, op_type)`` pairs) that match ``kind`` run on our kernels
    under onnxruntime releases before ``fixed_in`` (``(major, minor)``; None: every release),
    because of ``reason``.

    ``kind``: ``"reduction_threads"`` (a reduction other than none on more than one thread),
    ``"reduction_half"`` (a reduction on float16/bfloat16 data, any thread count),
    ``"bool_max_min"`` (reduction max or min on bool data), ``"string"`` (string data),
    ``"output_bfloat16"`` (a bfloat16 output), ``"rank1_data"`` (data of rank 1),
    ``"nan_max_min"`` (reduction max or min on floating-point data), ``"string_max_min"``
    (reduction max or min on string data), ``"batch_dims"`` (``batch_dims`` other than 0).

    ``outcome`` is what onnxruntime does wrong: ``"wrong_value"``, ``"wrong_shape"``,
    ``"accepts_invalid"``, ``"refuses_at_load"``, ``"refuses_at_run"`` or ``"crash"``.
    ``suite``: True where the conformance suite shows it (``tests/test_hosted_suite.py``
    checks that each such rule matches a test onnxruntime fails); False where it shows only
    outside the suite (a race between threads), which the reason says."""

    ops: frozenset[tuple[str, str]]
    kind: str
    reason: str
    fixed_in: tuple[int, int] | None = None
    outcome: str = "wrong_value"
    suite: bool = True

    def matches(self, node: NodeFacts, version: tuple[int, int]) -> bool:
        if (node.domain, node.op_type) not in self.ops:
            return False
        if self.fixed_in is not None and version >= self.fixed_in:
            return False
        if self.kind == "reduction_threads":
            return node.reduction != "none" and node.threads > 1
        if self.kind == "reduction_half":
            return node.reduction != "none" and node.dtype in _HALVES
        if self.kind == "bool_max_min":
            return node.reduction in ("max", "min") and node.dtype == "bool"
        if self.kind == "string":
            return node.dtype == "string"
        if self.kind == "output_bfloat16":
            return node.output_dtype == "bfloat16"
        if self.kind == "rank1_data":
            return node.data_rank == 1
        if self.kind == "nan_max_min":
            return node.reduction in ("max", "min") and node.dtype in _FLOATS
        if self.kind == "string_max_min":
            return node.reduction in ("max", "min") and node.dtype == "string"
        if self.kind == "batch_dims":
            return node.batch_dims != 0
        raise ValueError(f"unknown rule kind {self.kind!r}")


RULES: tuple[Rule, ...] = (
    Rule(
        frozenset({("", "ScatterND")}),
        "reduction_threads",
        "onnxruntime splits ScatterND's updates among its threads, which race on duplicate "
        "indices and lose updates (onnxruntime 1.32, 2 threads: 47 of 100 runs of PyTorch's "
        "index_add export, 200,000 rows of 8 float32 into 64 segments, differed from the spec's "
        "loop, python benchmarks/ort_race.py, 2026-11-27; and 298 of the 624 ScatterND cells of "
        "bench_reductions 2026-11-26, none of the 312 ScatterElements cells, whose reductions "
        "onnxruntime runs on one thread); a race, so the suite's small tests seldom show it",
        suite=False,
    ),
    Rule(
        _SCATTER_REDUCTIONS,
        "reduction_half",
        "onnxruntime has no float16/bfloat16 ScatterND reductions and no float16/bfloat16 "
        "ScatterElements add or mul: the node fails at run time (NOT_IMPLEMENTED, 'CPU execution "
        "provider: ... not supported'), and a few such failures in one process end it; its "
        "ScatterElements max/min of float16 drop a NaN as below (onnxruntime 1.32)",
        outcome="refuses_at_run",
    ),
    Rule(
        _SCATTER_REDUCTIONS,
        "nan_max_min",
        "onnxruntime's max/min scatter reductions drop a NaN of data or updates (std::max/std::min: "
        "[nan, 2, 3] with update 1.0 at 0 under max gives [1, 2, 3]); the project's rule, as "
        "onnx.reference, numpy.maximum and IEEE 754-2019 maximum, propagates it (onnxruntime 1.32, "
        "the suite's nan_max_min tests). Routed for every float type: whether a NaN is present is "
        "known only at run time, and looking costs a pass over data and updates, about what our "
        "kernel costs",
    ),
    Rule(
        _SCATTER_REDUCTIONS,
        "bool_max_min",
        "onnxruntime has no max/min scatter reduction of bool data: the node fails at run time "
        "('CPU execution provider: bool data type is not supported'; onnxruntime 1.32, found by "
        "gather-scatter check at 1 and 2 threads)",
        outcome="refuses_at_run",
    ),
    Rule(
        _SCATTER_REDUCTIONS,
        "string_max_min",
        "onnxruntime has no max/min scatter reduction of string data, which the spec's loop defines "
        "(code point order): the node fails at run time ('CPU execution provider: string data type "
        "is not supported with ScatterND opset 18 when reduction is 'max''; onnxruntime 1.32)",
        outcome="refuses_at_run",
    ),
    Rule(
        _GATHERS,
        "string",
        "onnxruntime's Gather of string rows returns empty strings past each row's first "
        "(onnxruntime 1.32: [['a', 'b'], ['c', 'd'], ['e', 'f']] at [2, 0] gave [['e', ''], "
        "['a', '']]); every gather of strings is routed until each is measured",
    ),
    Rule(
        frozenset({("", "GatherND")}),
        "batch_dims",
        "onnxruntime's GatherND does not check that data's and indices' batch dims agree: data "
        "(2, 3, 2) and indices (3, 2, 1) with batch_dims=1 return a (3, 2, 2) array of whatever "
        "memory held (onnxruntime 1.32). Routed for every batch_dims > 0: the dims are known only "
        "at run time, inside onnxruntime's segment",
        outcome="accepts_invalid",
    ),
    Rule(
        _BLOCK_QUANTIZED,
        "output_bfloat16",
        "onnxruntime's CPU has no GatherBlockQuantized with bfloat16 scales and output (onnxruntime "
        "1.32: NOT_IMPLEMENTED at load, 'Could not find an implementation for GatherBlockQuantized(1)'; "
        "its CPU kernel is registered for float and float16 only)",
        outcome="refuses_at_load",
    ),
    Rule(
        _BLOCK_QUANTIZED,
        "rank1_data",
        "onnxruntime refuses GatherBlockQuantized data of rank 1, which its schema allows ('Tensor of "
        "rank r >= 1'): FAIL at load, '[ShapeInferenceError] data tensor must have rank > 1' "
        "(onnxruntime 1.32, found by gather-scatter check)",
        outcome="refuses_at_load",
    ),
)


def route_reason(node: NodeFacts, ort_version: str) -> str | None:
    """Why ``node`` must run on our kernels under onnxruntime ``ort_version`` (e.g.
    ``"1.32.0"``), or None where onnxruntime runs it as the spec says. The first matching rule
    of :data:`RULES` gives the reason.

    Raises
    ------
    ValueError
        ``ort_version`` is not a ``MAJOR.MINOR[...]`` version string.
    """
    parts = ort_version.split(".")
    try:
        version = (int(parts[0]), int(parts[1]))
    except (IndexError, ValueError):
        raise ValueError(f"not an onnxruntime version: {ort_version!r} (expected MAJOR.MINOR[.PATCH])") from None
    for rule in RULES:
        if rule.matches(node, version):
            return rule.reason
    return None


def routed_combinations(ort_version: str, threads: int) -> tuple[int, int]:
    """Count the combinations the table routes under onnxruntime ``ort_version`` at ``threads``.

    A combination is an operator version of the registry, a data type it allows, an index type,
    a reduction it allows and, for GatherND-12/13, ``batch_dims`` 0 or 1 (GatherBlockQuantized:
    an output type, and data of rank 1 or 2). Returns ``(routed, total)``.
    """
    from ...rules.versions import REGISTRY

    routed = total = 0
    for spec in REGISTRY.values():
        outputs: list[str | None] = [*sorted(spec.input_types.get("scales", ()))] or [None]
        ranks = (1, 2) if spec.op_type == "GatherBlockQuantized" else (None,)
        batch = (0, 1) if "batch_dims" in spec.attributes else (0,)
        for dtype in sorted(spec.data_types):
            for _index in sorted(spec.index_types):
                for reduction in spec.reductions or ("none",):
                    for out in outputs:
                        for rank in ranks:
                            for batch_dims in batch:
                                node = NodeFacts(
                                    spec.domain, spec.op_type, dtype, reduction, threads, out or dtype, rank, batch_dims
                                )
                                total += 1
                                routed += route_reason(node, ort_version) is not None
    return routed, total


def _ops_text(ops: frozenset[tuple[str, str]]) -> str:
    names = sorted(f"{op_type} (com.microsoft)" if domain else op_type for domain, op_type in ops)
    return " / ".join(names)


def markdown(ort_version: str) -> str:
    """The docs' table of what the hosted Session routes under onnxruntime ``ort_version``
    (``docs/models.md`` holds it between its ``routes`` markers; ``scripts/routes_doc.py``
    writes it, and a test checks that it is current)."""
    (one, total), (two, _) = routed_combinations(ort_version, 1), routed_combinations(ort_version, 2)
    lines = [
        f"Routed under onnxruntime {ort_version}: {one} of {total} combinations at 1 thread, "
        f"{two} at 2 threads (operator version x data type x index "
        "type x reduction, x batch_dims 0/1 for GatherND, x output type and rank 1/2 for "
        "GatherBlockQuantized).",
        "",
        "| routed node | when | onnxruntime | shown by the suite | why |",
        "|---|---|---|---|---|",
    ]
    version = tuple(int(p) for p in ort_version.split(".")[:2])
    for rule in RULES:
        if rule.fixed_in is not None and version >= rule.fixed_in:
            continue
        why = rule.reason.replace("|", "\\|")
        lines.append(
            f"| {_ops_text(rule.ops)} | {CONDITIONS[rule.kind]} | {OUTCOMES[rule.outcome]} | "
            f"{'yes' if rule.suite else 'no'} | {why} |"
        )
    lines += [
        "| any node onnxruntime refuses to load (complex64 data, float8 types it lacks, an operator it "
        "lacks) | found at build | refuses at load | yes | its error names the node, or each node is "
        "tried alone; a refused node that neither our kernels nor `onnx.reference` run (a bfloat16 "
        "MatMulNBits) is refused at build, naming it |",
        "| an If / Loop / Scan or function call whose body holds a routed node | always | - | - | an "
        "If, Loop or Scan (9 and later) runs in our driver, each body hosted as the main graph is (its "
        "routed nodes on our kernels, the rest in onnxruntime); a function call, a Scan-8 and a body "
        "onnxruntime cannot load run in our evaluator (the body in `onnx.reference` and our kernels) |",
    ]
    return "\n".join(lines) + "\n"
