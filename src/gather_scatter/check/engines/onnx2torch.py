"""onnx2torch as a ``gather-scatter check`` engine.

The model is converted to a ``torch.fx.GraphModule``, run eagerly on the CPU.

onnx2torch imports torchvision at its own import, only for the NonMaxSuppression and RoiAlign
converters. torchvision's registry wheel is a CUDA build whose compiled operators fail to
register against a CPU-only torch (``operator torchvision::nms does not exist``), and no
torchvision wheel matches every torch. Where ``import torchvision`` fails, the worker puts a
stand-in ``torchvision`` module in ``sys.modules`` first (:func:`guard_torchvision`), whose
``ops`` functions raise NotImplementedError: onnx2torch then imports, and every indexing
operator (Gather, GatherElements, GatherND, ScatterND, ScatterElements) converts as it would.
"""

from __future__ import annotations

import sys
import types
from typing import Any

import numpy as np

from ...errors import one_line
from ._protocol import BUILTIN_UNSUPPORTED, RunOptions, distribution_version, import_engine, installed

name = "onnx2torch"
unsupported = (*BUILTIN_UNSUPPORTED, "not implemented for")
"""onnx2torch's and torch's messages for an operator version, attribute or dtype they lack:
``Converter is not implemented (...)``, ``GatherND for batch_dims != 0 is not implemented``
(NotImplementedError), ``"gather_cpu" not implemented for 'UInt16'``."""


def available() -> str | None:
    """None when onnx2torch (and torch) are installed, else the pip extra to install."""
    return installed("onnx2torch", "onnx2torch", name) or installed("torch", "onnx2torch", name)


def guard_torchvision() -> str | None:
    """Make ``import torchvision`` succeed for onnx2torch.

    Where the real one fails to import, put a stand-in whose ``torchvision.ops`` functions raise
    NotImplementedError into ``sys.modules``.

    Returns
    -------
    str or None
        None where the real torchvision imports; else why it does not (one line).
    """
    if isinstance(sys.modules.get("torchvision"), types.ModuleType) and getattr(
        sys.modules["torchvision"], "_gather_scatter_stub", False
    ):
        return sys.modules["torchvision"].__doc__
    try:
        import torchvision  # noqa: F401 - imported to see whether it loads with this torch

        return None
    except Exception as exc:  # noqa: BLE001 - a CUDA build against a CPU torch, a missing library, ...
        why = f"torchvision cannot be imported here ({type(exc).__name__}: {one_line(exc)[:200]})"
    for key in [k for k in sys.modules if k == "torchvision" or k.startswith("torchvision.")]:
        del sys.modules[key]

    def missing(*args, **kwargs):
        raise NotImplementedError(why)

    stub = types.ModuleType("torchvision", why)
    ops = types.ModuleType("torchvision.ops", why)
    for function in ("nms", "roi_align", "box_convert", "batched_nms"):
        setattr(ops, function, missing)
    vars(stub).update(ops=ops, _gather_scatter_stub=True)
    sys.modules["torchvision"], sys.modules["torchvision.ops"] = stub, ops
    return why


def prepare() -> None:
    """Import torch and onnx2torch, with the torchvision guard (EngineBroken where that fails)."""
    import_engine("torch")
    guard_torchvision()
    import_engine("onnx2torch")


def version() -> str:
    """Return the installed onnx2torch's and torch's versions, e.g. ``1.5.15 (torch 2.13.0+cpu)``.

    ``, torchvision stubbed`` is added where the guard stands in for torchvision.
    """
    stubbed = getattr(sys.modules.get("torchvision"), "_gather_scatter_stub", False)
    return (
        f"{distribution_version('onnx2torch')} (torch {distribution_version('torch')}"
        f"{', torchvision stubbed' if stubbed else ''})"
    )


def _tensor(torch, array: np.ndarray):
    if array.dtype.kind == "V" or array.dtype.name.startswith(("float8", "int4", "uint4", "float4")):
        if array.dtype.name != "bfloat16":
            raise NotImplementedError(f"onnx2torch is not given {array.dtype} arrays (torch takes no such NumPy dtype)")
        return torch.from_numpy(np.array(array, order="C").view(np.int16)).view(torch.bfloat16)
    if array.dtype.kind in "OUS":
        raise NotImplementedError("torch tensors hold no strings")
    return torch.from_numpy(np.array(array, order="C"))


def _numpy(torch, value) -> list[Any]:
    if isinstance(value, (tuple, list)):
        return [a for v in value for a in _numpy(torch, v)]
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        if value.dtype == torch.bfloat16:
            import ml_dtypes

            return [value.view(torch.int16).numpy().view(ml_dtypes.bfloat16)]
        return [value.numpy()]
    return [np.asarray(value)]


def run(model: bytes, feeds: dict[str, np.ndarray], options: RunOptions) -> list[Any]:
    """Return the model's outputs: converted by ``onnx2torch.convert`` and called under ``torch.no_grad``.

    The inputs go in the graph's order (``torch.set_num_threads(options.threads)`` where given).

    Raises NotImplementedError for string inputs and ml_dtypes other than bfloat16.
    """
    import onnx
    import torch
    from onnx2torch import convert

    if options.threads:
        torch.set_num_threads(options.threads)
    proto = onnx.load_from_string(model)
    initialized = {t.name for t in proto.graph.initializer}
    names = [v.name for v in proto.graph.input if v.name not in initialized]
    args = [_tensor(torch, feeds[k]) for k in names]
    module = convert(proto)
    with torch.no_grad():
        return _numpy(torch, module(*args))


def repro(model_path: str, inputs_path: str) -> str:
    """Python code that converts the written model with onnx2torch and prints its outputs on the inputs ``i``."""
    return (
        "from gather_scatter.check.engines.onnx2torch import guard_torchvision; guard_torchvision(); "
        "import onnx, torch; from onnx2torch import convert; "
        f"print(convert(onnx.load({model_path!r}))(*[torch.from_numpy(v) for v in i.values()]))"
    )


standalone_requires = "onnx2torch and torch"


def standalone_run_source(threads: int | None) -> str:
    """Return Python source of ``run(model, feeds)`` with onnx2torch, for a standalone reproduction.

    The model is converted and called under ``torch.no_grad``; where torchvision cannot be
    imported, a stand-in takes its place, as :func:`guard_torchvision` does.
    """
    threads_line = f"torch.set_num_threads({threads})\n" if threads else ""
    return (
        "import types\n\n"
        "import torch\n\n"
        "try:  # onnx2torch imports torchvision, whose CUDA wheel may not import with a CPU torch\n"
        "    import torchvision  # noqa: F401\n"
        "except Exception:\n"
        '    for _key in [k for k in sys.modules if k.split(".")[0] == "torchvision"]:\n'
        "        del sys.modules[_key]\n"
        '    _ops = types.ModuleType("torchvision.ops")  # only NonMaxSuppression and RoiAlign use it\n'
        '    for _name in ("nms", "roi_align", "box_convert", "batched_nms"):\n'
        "        setattr(_ops, _name, None)\n"
        '    sys.modules["torchvision"] = types.ModuleType("torchvision")\n'
        '    sys.modules["torchvision"].ops = sys.modules["torchvision.ops"] = _ops\n'
        "from onnx2torch import convert  # noqa: E402\n\n"
        f"{threads_line}\n"
        "def run(model, feeds):\n"
        "    module = convert(onnx.load_from_string(model))\n"
        "    with torch.no_grad():\n"
        '        result = module(*[torch.from_numpy(np.array(v, order="C")) for v in feeds.values()])\n'
        "    return [r.numpy() for r in result] if isinstance(result, (tuple, list)) else [result.numpy()]\n"
    )
