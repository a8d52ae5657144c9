"""Write the conformance suite as ONNX backend-test folders, with error.json and MANIFEST.json.

Layout (``docs/conformance.md``)::

    DIR/MANIFEST.json
    DIR/indexing/test_<op>_<version>_<what>_<n>/model.onnx
                                               /test_data_set_0/input_K.pb, output_0.pb
                                               /data.json        (only with a float tolerance)
    DIR/indexing_invalid/test_<...>/model.onnx
                                   /test_data_set_0/input_K.pb
                                   /error.json

``onnx.backend.test.loader.load_model_tests(DIR, kind="indexing")`` reads the valid cases, and
so do onnxruntime's ``onnx_test_runner DIR/indexing`` and other harnesses of that layout.
Files are written in a fixed order from a seeded suite (:func:`.suite.build_suite`), so the same
seed gives byte-identical files.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ..check.spec_quotes import SPEC_FILES, SPEC_QUOTES
from ..rules.versions import OpVersion, onnx_type_name
from .suite import DEFAULT_CASES_PER_VERSION, SuiteCase, _check_seed, build_suite

__all__ = ["FORMAT", "SuiteDirError", "export_tests", "input_names", "model_proto", "output_name"]

FORMAT = 1
"""The MANIFEST's ``format``: the layout and fields of this module (bumped on an incompatible change)."""

VALID_DIR, INVALID_DIR, MANIFEST = "indexing", "indexing_invalid", "MANIFEST.json"

# The inputs of the operators onnx has no schema for (com.microsoft), in node order.
_MS_INPUTS = {
    "GatherND": ("data", "indices"),
    "GatherBlockQuantized": ("data", "indices", "scales", "zero_points"),
}


class SuiteDirError(ValueError):
    """The destination of :func:`export_tests` is a file, or a non-empty folder that is not a suite."""


def input_names(spec: OpVersion, count: int) -> list[str]:
    """Return the node's first ``count`` input names as the version's schema spells them (``data``, ``indices``...)."""
    if spec.domain:
        return list(_MS_INPUTS[spec.op_type][:count])
    import onnx.defs

    schema = onnx.defs.get_schema(spec.op_type, spec.since_version)
    return [i.name for i in schema.inputs][:count]


def output_name(spec: OpVersion) -> str:
    """Return the node's output name as its schema spells it (``output``; TensorScatter's ``present_cache``)."""
    if spec.domain:
        return "output"
    import onnx.defs

    return str(onnx.defs.get_schema(spec.op_type, spec.since_version).outputs[0].name)


def _elem(array: np.ndarray) -> int:
    from onnx import helper

    return int(helper.np_dtype_to_tensor_dtype(np.dtype(object) if array.dtype.kind in "OUS" else array.dtype))


def _type_name(array: np.ndarray) -> str:
    return "string" if array.dtype.kind in "OUS" else (onnx_type_name(array.dtype) or str(array.dtype))


def model_proto(suite_case: SuiteCase) -> Any:
    """Return the case's one-node ``onnx.ModelProto``.

    Inputs named as the schema names them; ``case.constants`` (GatherBlockQuantized's data,
    scales, zero_points) as initializers, the others graph inputs in node order; the output
    typed, and shaped for a valid case. Opset imports: the version's domain at its
    ``since_version`` (com.microsoft cases import ai.onnx 13 too); ``ir_version`` as the
    checker's one-node models (``check.runner.model_bytes``).
    """
    from onnx import helper, numpy_helper

    spec, case = suite_case.spec, suite_case.case
    names = input_names(spec, len(case.inputs))
    out = output_name(spec)
    node = helper.make_node(spec.op_type, names, [out], domain=spec.domain, **case.attrs)
    constants = set(case.constants)
    inputs = [
        helper.make_tensor_value_info(n, _elem(a), a.shape)
        for i, (n, a) in enumerate(zip(names, case.inputs, strict=True))
        if i not in constants
    ]
    initializers = [
        numpy_helper.from_array(np.asarray(a), n)
        for i, (n, a) in enumerate(zip(names, case.inputs, strict=True))
        if i in constants
    ]
    if isinstance(suite_case.result, np.ndarray):
        output = helper.make_tensor_value_info(out, _elem(suite_case.result), suite_case.result.shape)
    else:
        typed = case.inputs[2] if spec.op_type == "GatherBlockQuantized" else case.inputs[0]
        output = helper.make_tensor_value_info(out, _elem(typed), _static_shape(suite_case))
    opsets = [helper.make_opsetid("", suite_case.opset if not spec.domain else 13)]
    if spec.domain:
        opsets.append(helper.make_opsetid(spec.domain, suite_case.opset))
    graph = helper.make_graph([node], suite_case.name, inputs, [output], initializer=initializers)
    model = helper.make_model(graph, opset_imports=opsets, producer_name="gather_scatter export-tests")
    model.ir_version = max(8, helper.find_min_ir_version_for(opsets[:1]))
    return model


def _static_shape(suite_case: SuiteCase) -> tuple[int, ...] | None:
    """Return an invalid case's output shape where shapes, types and attributes alone allow one, else None.

    An index out of bounds is a fault of values: its model is well formed (``onnx.checker``
    with shape inference accepts it), so an engine refuses it at run time, for the index.
    """
    from .._nodes import infer_shape
    from ..errors import GatherScatterError

    case = suite_case.case
    try:
        shape, _ = infer_shape(
            suite_case.spec.op_type,
            [a.shape for a in case.inputs],
            [a.dtype for a in case.inputs],
            case.attrs,
            opset=suite_case.opset,
            domain=suite_case.spec.domain,
        )
    except GatherScatterError:
        return None
    if shape is None or not all(isinstance(d, int) for d in shape):
        return None
    return tuple(int(d) for d in shape if isinstance(d, int))


def _tensor_bytes(array: np.ndarray, name: str) -> bytes:
    from onnx import numpy_helper

    return bytes(numpy_helper.from_array(np.asarray(array), name).SerializeToString())


def _spec_quote(spec: OpVersion, kind: str, case_kind: str) -> tuple[str, str]:
    """Return the spec sentence an invalid case breaks, and the schema file it is quoted from.

    The most precise key of ``check.spec_quotes.SPEC_QUOTES`` wins: ``(op, "<kind>-<words>")``
    for the longest leading words of the case's description (``gather_axis out of range`` tries
    ``attribute-gather_axis_out_of_range``, ``attribute-gather_axis_out_of``... ``attribute-gather``),
    then ``(op, kind)``, then the operator's ``output`` sentence.
    """
    key = f"{spec.domain}.{spec.op_type}" if spec.domain else spec.op_type
    words = re.sub(r"[^a-z0-9]+", "_", case_kind.lower()).strip("_").split("_")
    for n in range(len(words), 0, -1):
        quote = SPEC_QUOTES.get((key, f"{kind}-{'_'.join(words[:n])}"))
        if quote:
            break
    else:
        quote = SPEC_QUOTES.get((key, kind)) or SPEC_QUOTES.get((key, "output"), "")
    return quote, SPEC_FILES.get(key, "")


def _write_case(root: Path, suite_case: SuiteCase) -> dict[str, Any]:
    """Write one case's folder; return its MANIFEST entry."""
    spec, case = suite_case.spec, suite_case.case
    folder = root / (VALID_DIR if suite_case.valid else INVALID_DIR) / suite_case.name
    data_set = folder / "test_data_set_0"
    data_set.mkdir(parents=True)
    model = model_proto(suite_case)
    (folder / "model.onnx").write_bytes(model.SerializeToString())
    names = input_names(spec, len(case.inputs))
    constants = set(case.constants)
    feeds = [(n, a) for i, (n, a) in enumerate(zip(names, case.inputs, strict=True)) if i not in constants]
    for k, (n, a) in enumerate(feeds):
        (data_set / f"input_{k}.pb").write_bytes(_tensor_bytes(a, n))
    entry: dict[str, Any] = {
        "name": suite_case.name,
        "path": f"{VALID_DIR if suite_case.valid else INVALID_DIR}/{suite_case.name}",
        "valid": suite_case.valid,
        "op": spec.op_type,
        "domain": spec.domain,
        "version": spec.since_version,
        "opset": suite_case.opset,
        "inputs": [
            {
                "name": n,
                "dtype": _type_name(a),
                "shape": list(a.shape),
                **({"initializer": True} if i in constants else {}),
            }
            for i, (n, a) in enumerate(zip(names, case.inputs, strict=True))
        ],
        "attributes": {k: (v.decode() if isinstance(v, bytes) else v) for k, v in case.attrs.items()},
        "tags": suite_case.tags,
    }
    if isinstance(suite_case.result, np.ndarray):
        result = suite_case.result
        (data_set / "output_0.pb").write_bytes(_tensor_bytes(result, output_name(spec)))
        entry["output"] = {"name": output_name(spec), "dtype": _type_name(result), "shape": list(result.shape)}
        if suite_case.tolerance is not None:
            rtol, atol = suite_case.tolerance
            (folder / "data.json").write_text(json.dumps({"rtol": rtol, "atol": atol}) + "\n")
            entry["rtol"], entry["atol"] = rtol, atol
    else:
        error = suite_case.result
        kind = suite_case.error_kind or ""
        quote, spec_file = _spec_quote(spec, kind, suite_case.kind)
        described = {
            "kind": kind,
            "error": type(error).__name__,
            "input": getattr(error, "input", None),
            "case": suite_case.kind,
            "message": str(error),
            "spec": quote,
            "spec_file": spec_file,
        }
        (folder / "error.json").write_text(json.dumps(described, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        entry["error"] = {
            "kind": kind,
            "error": type(error).__name__,
            "input": described["input"],
            "case": suite_case.kind,
        }
    return entry


def _is_suite(path: Path) -> bool:
    """Whether ``path`` holds a suite this module wrote, and nothing else."""
    manifest = path / MANIFEST
    if not manifest.is_file():
        return False
    try:
        head = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if (
        not isinstance(head, dict)
        or "format" not in head
        or not str(head.get("generator", "")).startswith("gather_scatter")
    ):
        return False
    return {p.name for p in path.iterdir()} <= {MANIFEST, VALID_DIR, INVALID_DIR}


def _prepare(path: Path) -> None:
    if path.exists() and not path.is_dir():
        raise SuiteDirError(
            f"{os.fspath(path)!r} is a file, not a folder: give a new or empty folder, or a previous suite"
        )
    if path.is_dir() and any(path.iterdir()):
        if not _is_suite(path):
            raise SuiteDirError(
                f"{os.fspath(path)!r} is not empty and is not a suite written by export-tests (no MANIFEST.json of "
                "ours beside only indexing/ and indexing_invalid/): give a new or empty folder"
            )
        for name in (VALID_DIR, INVALID_DIR):
            shutil.rmtree(path / name, ignore_errors=True)
        (path / MANIFEST).unlink()
    path.mkdir(parents=True, exist_ok=True)


def _command(seed: int, ops: list[str] | None, cases_per_version: int | None) -> str:
    parts = ["gather-scatter export-tests DIR", f"--seed {seed}"]
    parts += [f"--op {op}" for op in ops or []]
    if cases_per_version is not None:
        parts.append(f"--cases-per-version {cases_per_version}")
    return " ".join(parts)


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def export_tests(
    directory: str | os.PathLike,
    *,
    seed: int = 0,
    ops: Iterable[str] | None = None,
    cases_per_version: int | None = None,
) -> dict[str, Any]:
    """Write the conformance suite into ``directory`` and return its manifest.

    Parameters
    ----------
    directory : str or path-like
        A new or empty folder, or a previous suite (replaced whole).
    seed : int, default 0
        The suite's seed: the same seed (and options) gives byte-identical files.
    ops : iterable of str, optional
        Operators or versions (``ScatterND``, ``ScatterND-16``, ``com.microsoft.GatherND``);
        None: every version of the registry.
    cases_per_version : int, optional
        Random valid cases per version (default 150; targeted and invalid cases come on top).

    Returns
    -------
    dict
        The manifest, as written to ``MANIFEST.json``: ``format``, ``generator``, ``onnx``,
        ``seed``, ``cases_per_version``, ``command``, ``counts`` (``valid``, ``invalid``,
        ``by_op``, ``by_tag``), ``size_bytes`` and ``cases`` (one entry per case).

    Raises
    ------
    SuiteDirError
        ``directory`` is a file, or a non-empty folder that is not a previous suite.
    suite.SuiteSelectionError
        An ``ops`` entry names no operator or version, or ``seed`` is not an integer >= 0.
    """
    import onnx

    from .. import __version__

    ops = list(ops) if ops is not None else None
    seed = _check_seed(seed)  # an int in the manifest, whatever integer type was given
    cases = build_suite(seed=seed, ops=ops, cases_per_version=cases_per_version)
    root = Path(directory)
    _prepare(root)
    entries = [_write_case(root, c) for c in cases]
    by_op: Counter[str] = Counter()
    for c in cases:
        by_op[c.spec.name] += 1
    by_tag = Counter(t for c in cases for t in c.tags)
    manifest: dict[str, Any] = {
        "format": FORMAT,
        "generator": f"gather_scatter {__version__}",
        "onnx": onnx.__version__,
        "seed": seed,
        "cases_per_version": DEFAULT_CASES_PER_VERSION if cases_per_version is None else cases_per_version,
        "ops": ops,
        "command": _command(seed, ops, cases_per_version),
        "counts": {
            "valid": sum(c.valid for c in cases),
            "invalid": sum(not c.valid for c in cases),
            "by_op": {
                name: {
                    "valid": sum(c.valid for c in cases if c.spec.name == name),
                    "invalid": sum(not c.valid for c in cases if c.spec.name == name),
                }
                for name in by_op
            },
            "by_tag": dict(sorted(by_tag.items())),
        },
        "size_bytes": 0,
        "cases": entries,
    }
    manifest["size_bytes"] = _size(root) + len(_dump(manifest))
    # the size counts the MANIFEST itself, whose length depends on the number written: settle it
    for _ in range(3):
        size = _size(root) + len(_dump(manifest))
        if size == manifest["size_bytes"]:
            break
        manifest["size_bytes"] = size
    (root / MANIFEST).write_bytes(_dump(manifest))
    return manifest


def _dump(manifest: dict[str, Any]) -> bytes:
    return (json.dumps(manifest, indent=1, ensure_ascii=False) + "\n").encode("utf-8")
