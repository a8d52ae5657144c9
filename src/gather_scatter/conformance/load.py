"""Reading a test suite folder: ours (``export-tests``) or any in ONNX's backend-test layout.

A test is a folder holding ``model.onnx`` and one or more ``test_data_set_N/`` folders of
``input_K.pb`` (one ``TensorProto`` per graph input that is not an initializer, in the graph's
order) and ``output_K.pb`` (one per graph output). ``data.json`` may give ``rtol``/``atol``;
``error.json`` (our ``indexing_invalid/`` tests) says the inputs are invalid, and what error
the spec requires. :func:`load_suite` takes any of:

- a suite root: ``DIR/indexing/``, ``DIR/indexing_invalid/`` (with ``DIR/MANIFEST.json``), or
  any other folders of tests (onnx's ``node/``, ``simple/``...);
- one folder of tests (``DIR/test_*/model.onnx``);
- one test (``DIR/model.onnx``).

Comparison rule: in our suite (a ``MANIFEST.json`` of format 1 above the test), a test without
``data.json`` is exact (bits; any NaN equals any NaN). In any other folder a test without
``data.json`` takes onnx's loader defaults (``rtol=1e-3``, ``atol=1e-7``, as
``onnx.backend.test.loader.load_model_tests`` gives them), for floating-point outputs only, as
onnx's backend runner compares.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["ONNX_DEFAULT_ATOL", "ONNX_DEFAULT_RTOL", "SuiteError", "SuiteTest", "load_suite"]

ONNX_DEFAULT_RTOL = 1e-3
ONNX_DEFAULT_ATOL = 1e-7
_DATA_SET = re.compile(r"test_data_set_(\d+)$")
_TENSOR_FILE = re.compile(r"(input|output)_(\d+)\.pb$")


class SuiteError(ValueError):
    """A folder that holds no test, or a test folder that cannot be read (the message names it)."""


@dataclass
class SuiteTest:
    """One test of a suite folder: a model and its data sets, read lazily by :meth:`data_sets`.

    Attributes
    ----------
    name : str
        The test's folder name (``test_scatternd_18_float16_reduction_add_3``).
    path : str
        Its folder.
    group : str
        The folder it sits in (``indexing``, ``indexing_invalid``, ``node``...), or ``""``.
    op, domain : str
        The operator it tests: the manifest's, else the model's one node's (``"Gather+Shape"``
        for a model of several nodes, in their order, each type once); domain ``""`` for ai.onnx.
    version : int or None
        The operator's ``since_version``: the manifest's, else onnx's schema in effect at the
        model's opset (None where onnx has no schema for it).
    valid : bool
        False for a test with ``error.json``: the engine must refuse its inputs.
    rtol, atol : float or None
        The tolerance for floating-point outputs; None: exact.
    error : dict
        ``error.json`` (invalid tests): ``kind``, ``error``, ``message``, ``spec``...
    tags : list of str
        The manifest's tags (ours only).
    model : bytes
        The serialized model.
    input_names : list of str
        The graph's inputs that are not initializers, in order.
    output_names : list of str
    non_tensor : str or None
        Why the test cannot be compared here (a sequence, map or optional input or output).
    """

    name: str
    path: str
    group: str
    op: str
    domain: str
    version: int | None
    valid: bool
    rtol: float | None
    atol: float | None
    model: bytes = field(repr=False)
    input_names: list[str]
    output_names: list[str]
    error: dict = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    non_tensor: str | None = None

    @property
    def family(self) -> str:
        """The operator family the scores count it under: ``ScatterND``, ``com.microsoft.GatherND``.

        A model of several operators counts under ``(several operators)``.
        """
        if "+" in self.op:
            return "(several operators)"
        return f"{self.domain}.{self.op}" if self.domain not in ("", "ai.onnx") else self.op

    def data_sets(self) -> list[tuple[dict[str, Any], list[Any]]]:
        """Read the test's data sets: (inputs by graph input name, expected outputs in order).

        Returns
        -------
        list of (dict of str to numpy.ndarray, list of numpy.ndarray)
            One per ``test_data_set_N`` in the order of N. Strings are object arrays of str.

        Raises
        ------
        SuiteError
            A ``.pb`` file that is not a TensorProto, or more inputs than the graph has.
        """
        sets = []
        for folder in _data_set_dirs(self.path):
            inputs, outputs = _tensor_files(folder)
            if len(inputs) > len(self.input_names):
                raise SuiteError(
                    f"{folder}: {len(inputs)} input files for a graph of {len(self.input_names)} inputs "
                    f"({', '.join(self.input_names) or 'none'}) that are not initializers"
                )
            feeds = {name: _read_tensor(p) for name, p in zip(self.input_names, inputs, strict=False)}
            sets.append((feeds, [_read_tensor(p) for p in outputs]))
        return sets


def _data_set_dirs(path: str) -> list[str]:
    found = []
    for entry in os.listdir(path):
        match = _DATA_SET.match(entry)
        if match and os.path.isdir(os.path.join(path, entry)):
            found.append((int(match.group(1)), os.path.join(path, entry)))
    return [p for _, p in sorted(found)]


def _tensor_files(folder: str) -> tuple[list[str], list[str]]:
    """Return a data set's ``input_K.pb`` and ``output_K.pb`` files, each in the order of K."""
    files: dict[str, list[tuple[int, str]]] = {"input": [], "output": []}
    for entry in os.listdir(folder):
        match = _TENSOR_FILE.match(entry)
        if match:
            files[match.group(1)].append((int(match.group(2)), os.path.join(folder, entry)))
    return [p for _, p in sorted(files["input"])], [p for _, p in sorted(files["output"])]


def _read_tensor(path: str) -> np.ndarray:
    """Read a ``.pb`` TensorProto as NumPy (onnx's ``to_array``; strings as str, not bytes)."""
    import onnx
    from onnx import numpy_helper

    tensor = onnx.TensorProto()
    try:
        with open(path, "rb") as f:
            tensor.ParseFromString(f.read())
        array = numpy_helper.to_array(tensor)
    except Exception as exc:  # noqa: BLE001 - a broken file is the suite's, named in the message
        raise SuiteError(f"{path}: not a readable TensorProto ({type(exc).__name__}: {exc})") from None
    if array.dtype == object:
        flat = [v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else v for v in array.reshape(-1).tolist()]
        strings = np.empty(len(flat), dtype=object)
        strings[:] = flat
        array = strings.reshape(array.shape)
    return array


def _is_test(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "model.onnx"))


def _test_dirs(path: str) -> list[str]:
    """Return the test folders directly inside ``path``, sorted by name."""
    try:
        entries = sorted(os.listdir(path))
    except OSError:
        return []
    return [os.path.join(path, e) for e in entries if _is_test(os.path.join(path, e))]


def _manifest(root: str) -> dict[str, dict]:
    """Return our MANIFEST.json's cases by path relative to ``root`` (``root`` holds one)."""
    path = os.path.join(root, "MANIFEST.json")
    try:
        with open(path, encoding="utf-8") as f:
            manifest = json.load(f)
        return {os.path.normpath(c["path"]): c for c in manifest["cases"]}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SuiteError(f"{path}: not a readable manifest ({type(exc).__name__}: {exc})") from None


def _find_root(path: str) -> str | None:
    """Return the nearest folder at or above ``path`` (up to two levels) that holds MANIFEST.json."""
    for candidate in (path, os.path.dirname(path), os.path.dirname(os.path.dirname(path))):
        if os.path.isfile(os.path.join(candidate, "MANIFEST.json")):
            return candidate
    return None


def _read_json(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except (OSError, ValueError) as exc:
        raise SuiteError(f"{path}: not readable JSON ({type(exc).__name__}: {exc})") from None
    if not isinstance(value, dict):
        raise SuiteError(f"{path}: expected a JSON object, got {type(value).__name__}")
    return value


def _tolerance(path: str, data: dict, key: str, default: float) -> float:
    """``data[key]`` (data.json's ``rtol`` or ``atol``) if it is a finite number >= 0, else a SuiteError naming it."""
    import math

    value = data.get(key, default)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0:
        return float(value)
    raise SuiteError(f"{path}: {key} must be a finite number >= 0, got {json.dumps(value)}")


def _operator(model: Any) -> tuple[str, str, int | None]:
    """(op, domain, since_version) of a model's node(s), from onnx's schemas at its opset."""
    import onnx

    nodes = list(model.graph.node)
    if not nodes:
        return "(no node)", "", None
    types = list(dict.fromkeys(n.op_type for n in nodes))
    domain = nodes[0].domain if len(types) == 1 else ""
    domain = "" if domain == "ai.onnx" else domain
    if len(types) > 1:  # onnx's *_expanded tests: a function's body
        return "+".join(types), "", None
    opsets = {o.domain if o.domain != "ai.onnx" else "": o.version for o in model.opset_import}
    opset = opsets.get(domain)
    if opset is None:
        return types[0], domain, None
    try:
        return types[0], domain, onnx.defs.get_schema(types[0], opset, domain).since_version
    except Exception:  # noqa: BLE001 - an operator onnx has no schema for (a contrib op): its opset
        return types[0], domain, opset


def _is_tensor(value_info: Any) -> bool:
    return value_info.type.HasField("tensor_type")


def _load_case(path: str, group: str, manifest: dict | None, ours: bool) -> SuiteTest:
    import onnx

    model_path = os.path.join(path, "model.onnx")
    try:
        with open(model_path, "rb") as f:
            model_bytes = f.read()
        model = onnx.load_from_string(model_bytes)
    except Exception as exc:  # noqa: BLE001 - a broken model file is the suite's
        raise SuiteError(f"{model_path}: not a readable ONNX model ({type(exc).__name__}: {exc})") from None
    initializers = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in initializers]
    error = _read_json(os.path.join(path, "error.json")) if os.path.isfile(os.path.join(path, "error.json")) else {}
    sets = _data_set_dirs(path)
    if not sets:
        raise SuiteError(f"{path}: a test folder without test_data_set_0/ (its inputs)")
    if not error and not _tensor_files(sets[0])[1]:
        raise SuiteError(
            f"{path}: no output_K.pb in {os.path.basename(sets[0])} and no error.json: neither a valid test "
            "(expected outputs) nor an invalid one (the error the spec requires)"
        )
    data_json = os.path.join(path, "data.json")
    tolerance = _read_json(data_json) if os.path.isfile(data_json) else {}
    rtol: float | None
    atol: float | None
    if tolerance or not ours:
        rtol = _tolerance(data_json, tolerance, "rtol", ONNX_DEFAULT_RTOL)
        atol = _tolerance(data_json, tolerance, "atol", ONNX_DEFAULT_ATOL)
    else:
        rtol = atol = None
    op, domain, version = _operator(model)
    if manifest:
        op, domain, version = manifest.get("op", op), manifest.get("domain", domain), manifest.get("version", version)
    odd = [v.name for v in (*inputs, *model.graph.output) if not _is_tensor(v)]
    return SuiteTest(
        name=os.path.basename(path),
        path=path,
        group=group,
        op=op,
        domain="" if domain == "ai.onnx" else domain,
        version=version,
        valid=not error,
        rtol=rtol,
        atol=atol,
        model=model_bytes,
        input_names=[i.name for i in inputs],
        output_names=[o.name for o in model.graph.output],
        error=error,
        tags=list((manifest or {}).get("tags", [])),
        non_tensor=f"non-tensor input or output ({', '.join(odd)}): run-tests compares tensors only" if odd else None,
    )


def load_suite(path: str | os.PathLike) -> list[SuiteTest]:
    """Find and read every test under ``path``.

    Parameters
    ----------
    path : str or os.PathLike
        A suite root (``indexing/``, ``indexing_invalid/`` or other folders of tests, with or
        without ``MANIFEST.json``), one folder of tests, or one test folder.

    Returns
    -------
    list of SuiteTest
        Sorted by group, then name. The models are read; the data sets are read when run.

    Raises
    ------
    SuiteError
        ``path`` is not a folder, holds no test folder (one with ``model.onnx``) at any of
        these levels, or a test folder cannot be read (no data set, no outputs and no
        ``error.json``, an unreadable model, manifest or JSON file, a ``data.json`` ``rtol`` or
        ``atol`` that is not a finite number >= 0).
    """
    root = os.path.abspath(os.fspath(path))
    if not os.path.isdir(root):
        raise SuiteError(f"{os.fspath(path)!r} is not a folder")
    if _is_test(root):
        groups = [(os.path.basename(os.path.dirname(root)), [root])]
    elif _test_dirs(root):
        groups = [(os.path.basename(root), _test_dirs(root))]
    else:
        groups = [(e, _test_dirs(os.path.join(root, e))) for e in sorted(os.listdir(root))]
        groups = [(g, tests) for g, tests in groups if tests]
    if not groups:
        raise SuiteError(
            f"{os.fspath(path)!r} holds no test: expected test folders (each with model.onnx and "
            "test_data_set_0/) in it, or in folders inside it (indexing/, indexing_invalid/, as "
            "'gather-scatter export-tests DIR' writes them; onnx's node/...)"
        )
    suite_root = _find_root(root)
    manifest = _manifest(suite_root) if suite_root else {}
    cases = []
    for group, tests in groups:
        for test in tests:
            entry = manifest.get(os.path.normpath(os.path.relpath(test, suite_root))) if suite_root else None
            cases.append(_load_case(test, group, entry, ours=suite_root is not None))
    return cases
