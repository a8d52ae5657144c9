"""Apache TVM (the Relax ONNX frontend, compiled for the LLVM CPU target) as a ``gather-scatter check`` engine.

Each model is imported with ``tvm.relax.frontend.onnx.from_onnx`` (the inputs' shapes and dtypes
given, so no symbolic dimension is left), its operators legalized to TIR, compiled with
``tvm.compile(..., target="llvm")`` and run once on the Relax virtual machine. A compile that
hangs is the worker's timeout, like any engine call.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any

import numpy as np

from ._protocol import BUILTIN_UNSUPPORTED, RunOptions, distribution_version, import_engine, installed, is_ml_dtype

name = "tvm"
unsupported = (
    *BUILTIN_UNSUPPORTED,
    "OpNotImplemented",
    "unknown dtype `",
    "requires the input indices to have int64 dtype",
)
"""TVM's messages for an operator, opset or type its ONNX frontend lacks: ``The following operators
are not supported for frontend ONNX: ...``, ``unknown dtype `complex128```, ``GatherND requires
the input indices to have int64 dtype`` (com.microsoft.GatherND's int32 indices)."""

TARGET = "llvm"
"""The target every model is compiled for (the host CPU)."""


def available() -> str | None:
    """None when Apache TVM is installed, else the pip extra to install."""
    return installed("tvm", "tvm", name)


def prepare() -> None:
    """Import TVM and its Relax ONNX frontend (EngineBroken where that fails)."""
    import_engine("tvm")
    import_engine("tvm.relax.frontend.onnx")


def version() -> str:
    """Return the installed apache-tvm's version and the target, e.g. ``0.27.0.post1 (llvm)``."""
    return f"{distribution_version('apache-tvm')} ({TARGET})"


def _inputs(model) -> list[str]:
    """Return the graph's input names in order, less those an initializer gives."""
    initialized = {t.name for t in model.graph.initializer}
    return [v.name for v in model.graph.input if v.name not in initialized]


def _numpy(value) -> list[Any]:
    """Return the VM's result as a flat list of arrays (a tuple of outputs unpacked)."""
    if hasattr(value, "numpy"):
        return [value.numpy()]
    if hasattr(value, "__len__") and hasattr(value, "__getitem__"):  # a tuple, or TVM's Array of outputs
        return [a for k in range(len(value)) for a in _numpy(value[k])]
    return [np.asarray(value)]


def run(model: bytes, feeds: dict[str, np.ndarray], options: RunOptions) -> list[Any]:
    """Return the model's outputs: imported with the Relax ONNX frontend, compiled for ``llvm``, run on the Relax VM.

    It runs on the worker's default TVM thread pool: ``options.threads`` is not used. What the
    frontend prints goes to stderr (the worker's log), not into the checker's report.

    Raises NotImplementedError for string and ml_dtypes inputs, which TVM tensors do not hold.
    """
    import onnx
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    if any(a.dtype.kind in "OUS" or is_ml_dtype(a.dtype) for a in feeds.values()):
        raise NotImplementedError("TVM tensors hold no string or ml_dtypes (bfloat16, float8, 4-bit) arrays")
    proto = onnx.load_from_string(model)
    names = _inputs(proto)
    with contextlib.redirect_stdout(sys.stderr):  # the frontend prints its conversion errors
        mod = from_onnx(
            proto,
            shape_dict={k: list(feeds[k].shape) for k in names},
            dtype_dict={k: str(feeds[k].dtype) for k in names},
            keep_params_in_input=False,
        )
    mod = relax.transform.DecomposeOpsForInference()(mod)
    mod = relax.transform.LegalizeOps()(mod)
    executable = tvm.compile(mod, target=TARGET)
    device = tvm.cpu()
    vm = relax.VirtualMachine(executable, device)
    args = [tvm.runtime.tensor(np.array(feeds[k], order="C"), device) for k in names]
    return _numpy(vm["main"](*args))


def repro(model_path: str, inputs_path: str) -> str:
    """Python code that compiles the written model with TVM (llvm) and prints its outputs on the inputs ``i``."""
    return (
        "import onnx, tvm, numpy as np; from tvm import relax; from tvm.relax.frontend.onnx import from_onnx; "
        f"p = onnx.load({model_path!r}); "
        "m = from_onnx(p, shape_dict={k: list(v.shape) for k, v in i.items()}, "
        "dtype_dict={k: str(v.dtype) for k, v in i.items()}); "
        "m = relax.transform.LegalizeOps()(relax.transform.DecomposeOpsForInference()(m)); "
        "vm = relax.VirtualMachine(tvm.compile(m, target='llvm'), tvm.cpu()); "
        "print(vm['main'](*[tvm.runtime.tensor(np.ascontiguousarray(v)) for v in i.values()]))"
    )


standalone_requires = "apache-tvm"


def standalone_run_source(threads: int | None) -> str:
    """Return Python source of ``run(model, feeds)`` with TVM's own API, for a standalone reproduction.

    The Relax ONNX frontend, ``LegalizeOps``, compiled for ``llvm``, the Relax VM.
    """
    return (
        "import tvm\n"
        "from tvm import relax\n"
        "from tvm.relax.frontend.onnx import from_onnx\n\n\n"
        "def run(model, feeds):\n"
        "    mod = from_onnx(onnx.load_from_string(model), shape_dict={k: list(v.shape) for k, v in feeds.items()},\n"
        "                    dtype_dict={k: str(v.dtype) for k, v in feeds.items()}, keep_params_in_input=False)\n"
        "    mod = relax.transform.LegalizeOps()(relax.transform.DecomposeOpsForInference()(mod))\n"
        f"    vm = relax.VirtualMachine(tvm.compile(mod, target={TARGET!r}), tvm.cpu())\n"
        '    result = vm["main"](*[tvm.runtime.tensor(np.array(v, order="C"), tvm.cpu()) for v in feeds.values()])\n'
        '    if hasattr(result, "numpy"):\n'
        "        return [result.numpy()]\n"
        "    return [result[i].numpy() for i in range(len(result))]\n"
    )
