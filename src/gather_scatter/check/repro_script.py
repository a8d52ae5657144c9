"""The standalone script that reproduces a finding of ``gather-scatter check``, with its arrays.

``gather-scatter check --report DIR`` writes one per class of findings (``upstream``), from the
class's smallest (shrunk) case: the script builds the one-node model with ``onnx.helper``, runs
it with the engine's own API (the engine's ``standalone_run_source``), prints the actual and the
expected output, and exits with one of :data:`EXIT_STATUSES`: 1 and ``DEFECT REPRODUCED`` where
the defect shows, 0 where it does not, :data:`COULD_NOT_RUN` (125) and ``COULD NOT RUN: why``
where the script itself could not run the model (numpy, onnx or the engine not installed, a
plugin not registered, the archive missing). It imports numpy, onnx and the engine only, never
gather_scatter. Arrays of up to :data:`LITERAL_LIMIT` elements are literals in the script;
larger ones are in an ``.npz`` archive beside it, written by the one codec
(``gather_scatter.models.save_npz``: ml_dtypes' types as raw void, strings as NumPy unicode, each
tagged with its ONNX type) and loaded without pickle; each array's line decodes it with the
codec's own source (``gather_scatter.models.decode_source``: ``.view(ml_dtypes.bfloat16)``,
``.astype(object)``), so that the script and the codec's reader cannot drift. A string array
that ``U`` cannot hold exactly (one with a trailing NUL) stays a literal.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto

from ..errors import GatherScatterError, one_line
from ..models import decode_source, onnx_type_of, storable
from . import engines, runner

__all__ = ["COULD_NOT_RUN", "EXIT_STATUSES", "LITERAL_LIMIT", "attr_source", "build", "op_name"]

LITERAL_LIMIT = 64
"""Arrays of at most this many elements are written into the script as literals."""

COULD_NOT_RUN = 125
"""A script's exit status where it could not run the model (``git bisect run`` skips such a revision)."""

EXIT_STATUSES = {
    0: "not reproduced: the engine gave what the spec requires",
    1: "DEFECT REPRODUCED: the defect shows",
    COULD_NOT_RUN: "COULD NOT RUN: the script could not run the model (the reason is printed)",
}
"""What a report script's exit status says (also in each script's docstring)."""


def op_name(check: runner.CheckCase) -> str:
    """Return the case's operator as issues name it: ``ScatterND``, ``com.microsoft.GatherND``."""
    spec = check.spec
    return f"{spec.domain}.{spec.op_type}" if spec.domain else spec.op_type


def _number(value: Any, kind: str) -> str:
    if kind == "b":
        return "True" if value else "False"
    if kind in "iu":
        return str(int(value))
    if kind == "c":
        return f"complex({_number(value.real, 'f')}, {_number(value.imag, 'f')})"
    value = float(value)
    if np.isnan(value):
        return "np.nan"
    if np.isinf(value):
        return "np.inf" if value > 0 else "-np.inf"
    return repr(value)


def _text(item: Any) -> str:
    """Python source of one string tensor element (bytes as str where they are UTF-8)."""
    if isinstance(item, bytes):
        try:
            item = item.decode()
        except UnicodeDecodeError:
            return repr(item)
    return repr(str(item))


def _nested(values: np.ndarray, kind: str) -> str:
    """Python source of ``values`` as nested lists of its elements (of NumPy ``kind``)."""

    def source(item: Any) -> str:
        if isinstance(item, list):
            return "[" + ", ".join(source(v) for v in item) + "]"
        return _text(item) if kind in "OUS" else _number(item, kind)

    return source(np.asarray(values).tolist())  # nested lists down to the elements, a str kept whole


def _dtype_expr(dtype: np.dtype) -> str:
    if dtype.kind in "OUS":
        return "object"
    if runner.is_ml_dtype(dtype):  # ml_dtypes (bfloat16, float8, 4-bit): an onnx dependency
        return f"ml_dtypes.{dtype.name}"
    return "np.bool_" if dtype.kind == "b" else f"np.{dtype.name}"


def _literal(array: np.ndarray) -> str:
    """Python source of ``array``: a nested list with its dtype (and shape where it has a zero)."""
    array = np.asarray(array)
    if runner.is_ml_dtype(array.dtype):
        bits = array.view(f"u{array.dtype.itemsize}")
        text = (
            f"np.array({_nested(bits, 'u')}, dtype=np.uint{8 * array.dtype.itemsize}).view({_dtype_expr(array.dtype)})"
        )
    else:
        text = f"np.array({_nested(array, array.dtype.kind)}, dtype={_dtype_expr(array.dtype)})"
    return text + f".reshape({tuple(array.shape)!r})" if 0 in array.shape else text


def _storable(name: str, array: np.ndarray) -> np.ndarray | None:
    """``array`` as the codec stores it (``gather_scatter.models.storable``); None where it cannot."""
    try:
        return storable(name, array, what="array")
    except ValueError:  # a string ending in NUL: no NumPy string array holds it
        return None


def _array_source(name: str, array: np.ndarray, stored: dict[str, np.ndarray], archive: str) -> str:
    """``NAME = <array>``: a literal, or (over :data:`LITERAL_LIMIT` elements) from the archive."""
    array = np.asarray(array)
    encoded = _storable(name, array) if array.size > LITERAL_LIMIT else None
    if encoded is None:
        return f"{name} = {_literal(array)}"
    stored[name] = encoded
    decoded = decode_source(f"ARRAYS[{name!r}]", onnx_type_of(array.dtype))  # the codec's reader, as source
    return f"{name} = {decoded}  # {array.dtype} {list(array.shape)}, from {archive}"


def _elem_name(array: np.ndarray) -> str:
    return TensorProto.DataType.Name(runner._elem(array))


def attr_source(value: Any) -> str:
    """Return Python source of an attribute's value (bytes as str, NumPy scalars as Python ones)."""
    if isinstance(value, bytes):
        return repr(value.decode())
    if isinstance(value, np.generic):
        return repr(value.item())
    return repr(value)


_DIFFERS = '''
def differs(actual, expected):
    """None where actual is expected (shape, dtype, every element; any two NaNs equal), else what differs."""
    actual = np.asarray(actual)
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return f"{actual.dtype} {list(actual.shape)}, expected {expected.dtype} {list(expected.shape)}"
    if expected.dtype == object:
        got = [v.decode() if isinstance(v, bytes) else str(v) for v in actual.reshape(-1).tolist()]
        bad = [i for i, (g, w) in enumerate(zip(got, expected.reshape(-1).tolist())) if g != w]
    else:
        a, e = actual.reshape(-1), expected.reshape(-1)
        if TOLERANCE and e.dtype.kind == "f":
            finite = np.isfinite(e)
            scale = max(1.0, float(np.abs(e[finite]).max())) if finite.any() else 1.0
            with np.errstate(invalid="ignore"):
                ok = (a == e) | (np.isnan(a) & np.isnan(e)) | (np.abs(a.astype(np.float64) - e) <= TOLERANCE * scale)
        else:  # bit for bit
            ok = (a.view(np.uint8).reshape(a.size, -1) == e.view(np.uint8).reshape(e.size, -1)).all(axis=1)
            if e.dtype.kind in "fc":
                ok |= np.isnan(a) & np.isnan(e)
        bad = np.flatnonzero(~ok).tolist()
    if not bad:
        return None
    first = ", ".join(f"[{i}] {actual.reshape(-1)[i]!r} (expected {expected.reshape(-1)[i]!r})" for i in bad[:3])
    return f"{len(bad)} of {expected.size} elements differ; flat positions {first}"
'''

_SHOW = """
def show(label, array):
    array = np.asarray(array)
    print(f"{label}: {array.dtype} {list(array.shape)}")
    print(np.array2string(array, threshold=60, edgeitems=3))
"""


def _check_block(
    finding: runner.Finding,
    expected: Any,
    also: np.ndarray | None,
    tries: int,
    timeout: float,
    tolerance: float,
    stored: dict,
    archive: str,
) -> str:
    """Return the part of the script that runs the model and says whether the defect shows."""
    if isinstance(expected, GatherScatterError):
        lines = [f"EXPECTED_ERROR = {one_line(expected)!r}  # the spec requires an error"]
    else:
        lines = [_array_source("EXPECTED", expected, stored, archive) + "  # the spec's loop (see the issue)"]
    if finding.kind == "wrong_output":
        lines += [
            "ALSO_RIGHT = None"
            if also is None
            else _array_source("ALSO_RIGHT", also, stored, archive)
            + "  # the first of each duplicate winning: the spec leaves the winner open",
            f"TOLERANCE = {tolerance!r}  # of the largest expected magnitude: 0 is exact",
            f"TRIES = {tries}  # runs until it shows (a race shows on some runs only)",
            _DIFFERS + _SHOW,
            "for attempt in range(1, TRIES + 1):",
            "    try:",
            "        actual = np.asarray(run(MODEL, FEEDS)[0])",
            "    except Exception as exc:  # no output to compare: neither verdict",
            "        could_not_run(f'the engine raised {type(exc).__name__}: {exc} (the defect is a wrong output)')",
            "    problem = differs(actual, EXPECTED)",
            "    if problem and ALSO_RIGHT is not None and differs(actual, ALSO_RIGHT) is None:",
            "        problem = None",
            "    if problem:",
            "        break",
            "show('actual', actual)",
            "show('expected', EXPECTED)",
            "if problem:",
            "    print(f'DEFECT REPRODUCED (run {attempt} of {TRIES}): {problem}')",
            "    sys.exit(1)",
            "print(f'not reproduced in {TRIES} runs: the output is as expected')",
        ]
    elif finding.kind == "accepted_invalid":
        lines += [
            _SHOW,
            "try:",
            "    outputs = run(MODEL, FEEDS)",
            "except ImportError as exc:  # the engine is not installed: not its answer",
            "    could_not_run(f'{type(exc).__name__}: {exc}')",
            "except Exception as exc:  # what the spec requires",
            "    print(f'actual: the engine raised {type(exc).__name__}: {exc}')",
            "    print('not reproduced: the engine refuses the input, as the spec requires')",
            "    sys.exit(0)",
            "show('actual', outputs[0])",
            "print(f'expected: an error: {EXPECTED_ERROR}')",
            "print('DEFECT REPRODUCED: the engine returned a result for an input the spec refuses')",
            "sys.exit(1)",
        ]
    elif finding.kind == "rejected_valid":
        lines += [
            _SHOW,
            "try:",
            "    outputs = run(MODEL, FEEDS)",
            "except ImportError as exc:  # the engine is not installed: not its answer",
            "    could_not_run(f'{type(exc).__name__}: {exc}')",
            "except Exception as exc:",
            "    print(f'actual: the engine raised {type(exc).__name__}: {exc}')",
            "    show('expected', EXPECTED)",
            "    print('DEFECT REPRODUCED: the engine refused a valid input')",
            "    sys.exit(1)",
            "show('actual', outputs[0])",
            "show('expected', EXPECTED)",
            "print('not reproduced: the engine accepted the input')",
        ]
    else:  # crash, timeout: in a child process, so that this one can say what happened
        wanted = (
            "print(f'expected: an error: {EXPECTED_ERROR}')"
            if isinstance(expected, GatherScatterError)
            else "show('expected', EXPECTED)"
        )
        lines += [
            _SHOW,
            f"TIMEOUT = {max(timeout, 1.0)!r}  # seconds",
            "if sys.argv[1:] == ['--child']:",
            "    try:",
            "        show('actual', run(MODEL, FEEDS)[0])",
            "    except ImportError as exc:  # the engine is not installed: not its answer",
            "        could_not_run(f'{type(exc).__name__}: {exc}')",
            "    except Exception as exc:",
            "        print(f'actual: the engine raised {type(exc).__name__}: {exc}')",
            "    sys.exit(0)",
            "try:",
            "    child = subprocess.run([sys.executable, os.path.abspath(__file__), '--child'], timeout=TIMEOUT)",
            "except subprocess.TimeoutExpired:",
            "    " + wanted,
            "    print(f'DEFECT REPRODUCED: no answer within {TIMEOUT} s')",
            "    sys.exit(1)",
            "if child.returncode == COULD_NOT_RUN:",
            "    could_not_run('the process running the model could not run it (see above)')",
            wanted,
            "if child.returncode != 0:",
            "    print(f'DEFECT REPRODUCED: the process running the model died (exit code {child.returncode})')",
            "    sys.exit(1)",
            "print('not reproduced: the engine answered')",
        ]
    return "\n".join(lines) + "\n"


def _engine_source(engine: str, threads: int | None) -> tuple[str, str]:
    """Return the engine's standalone run source and what the script needs installed."""
    loaded = engines.load(engine)
    standalone = getattr(loaded, "standalone_run_source", None)
    if standalone is not None:
        return standalone(threads), getattr(loaded, "standalone_requires", engine)
    missing = f"no installed package registers the engine {engine!r} (entry-point group {engines.GROUP})"
    source = (
        "import importlib.metadata\n"
        "import types\n\n"
        f"_FOUND = [p for p in importlib.metadata.entry_points(group={engines.GROUP!r}) if p.name == {engine!r}]\n"
        "if not _FOUND:\n"
        f"    could_not_run({missing!r})\n"
        "_ENGINE = _FOUND[0].load()\n"
        "_ENGINE = _ENGINE() if isinstance(_ENGINE, type) else _ENGINE\n\n\n"
        "def run(model, feeds):\n"
        f"    options = types.SimpleNamespace(threads={threads!r}, output=None)\n"
        "    return list(_ENGINE.run(model, feeds, options))\n"
    )
    return source, f"the package registering the {engine!r} engine"


def build(
    finding: runner.Finding,
    *,
    engine: str,
    title: str,
    threads: int | None,
    tries: int,
    timeout: float,
    tolerance: float,
    archive: str,
) -> tuple[str, dict[str, np.ndarray]]:
    """Return the standalone reproduction of ``finding``: its source, and the arrays it loads from ``archive``.

    Parameters
    ----------
    finding : runner.Finding
        The finding reproduced (an issue class's smallest).
    engine : str
        The engine's name.
    title : str
        The script docstring's first line (the issue's title).
    threads : int or None
        The engine's intra-op threads, as the check ran it.
    tries : int
        Runs of the model until a wrong output shows (for a race).
    timeout : float
        Seconds a run may take (crash and timeout findings run in a child process).
    tolerance : float
        0 for an exact comparison; else how far (relative to the expected output's largest
        magnitude) a float may be off, for a reduction whose order is free.
    archive : str
        The file name of the ``.npz`` beside the script that holds arrays too large for literals.

    Returns
    -------
    tuple of (str, dict of str to ndarray)
        The script, and the arrays for ``archive`` (empty: no archive needed), as they are (not
        encoded): ``gather_scatter.models.save_npz`` writes them.
    """
    check = finding.check
    spec = check.spec
    stored: dict[str, np.ndarray] = {}
    inputs = [_array_source(name, a, stored, archive) for name, a in zip(check.names, check.case.inputs, strict=False)]
    expected = runner.expected(check)
    also = runner.first_wins(check) if finding.kind == "wrong_output" and runner.first_wins_allowed(check) else None
    if also is not None and isinstance(expected, np.ndarray) and runner.same(also, expected) is None:
        also = None
    block = _check_block(finding, expected, also, tries, timeout, tolerance, stored, archive)
    arrays = {**dict(zip(check.names, check.case.inputs, strict=False)), "EXPECTED": expected, "ALSO_RIGHT": also}
    stored = {name: np.asarray(arrays[name]) for name in stored}  # as they are: the codec's writer encodes them
    run_source, requires = _engine_source(engine, threads)
    attrs = "".join(f", {k}={attr_source(v)}" for k, v in check.case.attrs.items())
    domain = f", domain={spec.domain!r}" if spec.domain else ""
    opsets = [f'helper.make_opsetid("", {check.opset if not spec.domain else 13})']
    if spec.domain:
        opsets.append(f"helper.make_opsetid({spec.domain!r}, {check.opset})")
    ir = max(
        8,
        __import__("onnx").helper.find_min_ir_version_for(
            [__import__("onnx").helper.make_opsetid("", check.opset if not spec.domain else 13)]
        ),
    )
    value_infos = ",\n        ".join(
        f"helper.make_tensor_value_info({n!r}, TensorProto.{_elem_name(a)}, {list(a.shape)!r})"
        for n, a in check.feeds().items()
    )
    constants = list(check.initializers())  # inputs the model holds as initializers (constants by the spec)
    output_type = _elem_name(check.case.inputs[runner.output_input(check)])  # T2 for GatherBlockQuantized
    initializer = f", initializer=[{', '.join(f'numpy_helper.from_array({n}, {n!r})' for n in constants)}]"
    needs_ml = any(
        runner.is_ml_dtype(np.asarray(a).dtype)
        for a in [*check.case.inputs, *([expected] if isinstance(expected, np.ndarray) else [])]
    )
    head = [
        f'"""{title}',
        "",
        f"Standalone reproduction (generated by gather-scatter check --report): needs numpy, onnx and {requires}.",
        "Prints the engine's output and the one the ONNX spec gives. Exit status:",
        "",
        *(f"{status:>5}  {meaning}" for status, meaning in EXIT_STATUSES.items()),
        "       (numpy, onnx or the engine not installed, a plugin not registered, the .npz",
        "       missing, the engine raising where an output was to be compared); git bisect run",
        "       skips a revision on 125",
        '"""',
        "import os",
        "import subprocess",
        "import sys",
        "",
        f"COULD_NOT_RUN = {COULD_NOT_RUN}  # the exit status where this script could not run the model",
        f"NEEDS = {f'numpy, onnx and {requires}'!r}",
        "",
        "",
        "def could_not_run(why):",
        "    print(f'COULD NOT RUN: {why}', flush=True)",
        "    sys.exit(COULD_NOT_RUN)",
        "",
        "",
        "def _could_not_run(kind, error, trace):  # an error of this script's own is no verdict (else: exit 1)",
        "    sys.__excepthook__(kind, error, trace)  # the traceback, on stderr",
        "    if issubclass(kind, KeyboardInterrupt):",
        "        return",
        "    needs = f' (this script needs {NEEDS})' if issubclass(kind, ImportError) else ''",
        "    print(f'COULD NOT RUN: {kind.__name__}: {error}{needs}', flush=True)",
        "    sys.stderr.flush()",
        "    os._exit(COULD_NOT_RUN)",
        "",
        "",
        "sys.excepthook = _could_not_run",
        "",
        "import numpy as np  # noqa: E402",
        "import onnx  # noqa: E402",
        "from onnx import TensorProto, helper, numpy_helper  # noqa: E402",
    ]
    if needs_ml:
        head.append("import ml_dtypes  # noqa: E402 - installed with onnx")
    head.append("")
    if stored:
        head += [
            "HERE = os.path.dirname(os.path.abspath(__file__))",
            f"ARRAYS = np.load(os.path.join(HERE, {archive!r}))  # no pickle: strings as unicode, ml_dtypes as void",
            "",
        ]
    body = [
        "# The inputs (the smallest case found).",
        *inputs,
        "",
        f"# The model: one {op_name(check)} node at opset {check.opset}.",
        f'node = helper.make_node({spec.op_type!r}, {check.names!r}, ["y"]{domain}{attrs})',
        "graph = helper.make_graph(",
        '    [node], "repro",',
        f"    [{value_infos}],",
        f'    [helper.make_tensor_value_info("y", TensorProto.{output_type}, None)]'
        + (f"{initializer}," if constants else ","),
        ")",
        f"model = helper.make_model(graph, opset_imports=[{', '.join(opsets)}])",
        f"model.ir_version = {ir}",
        "MODEL = model.SerializeToString()",
        f"FEEDS = {{{', '.join(f'{n!r}: {n}' for n in check.feeds())}}}",
        "",
        f"# How {engine} runs a model, with its own API: run(model bytes, feeds) -> outputs.",
        run_source.rstrip(),
        "",
        "",
        block,
    ]
    return "\n".join(head + body), stored
