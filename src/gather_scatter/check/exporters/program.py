"""A sample as Python source: the module an exporter sees, in-process and in a standalone script alike.

The module is built by executing the same source the reproduction script carries, so what the
check exported is what the script exports. Tensors are the module's inputs (``a0``, ``a1``, ...);
everything else of the call (dims, reductions, slices, flags) is a constant of its ``forward``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .samples import OPERATIONS, Sample

__all__ = ["build", "leaves", "module_source", "replace_leaves", "tensor_source", "to_numpy"]


def _is_tensor(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor)


def leaves(value: Any) -> list:
    """Return the tensors of ``value`` (args, kwargs, nested tuples and lists) in order."""
    if _is_tensor(value):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in leaves(item)]
    if isinstance(value, dict):
        return [t for key in value for t in leaves(value[key])]
    return []


def replace_leaves(value: Any, new: list) -> Any:
    """Return ``value`` with its tensors replaced, in order, by those of ``new`` (consumed)."""
    if _is_tensor(value):
        return new.pop(0)
    if isinstance(value, tuple):
        return tuple(replace_leaves(item, new) for item in value)
    if isinstance(value, list):
        return [replace_leaves(item, new) for item in value]
    if isinstance(value, dict):
        return {key: replace_leaves(item, new) for key, item in value.items()}
    return value


def _constant(value: Any, names: list[str]) -> str:
    """Return the source of ``value`` with each tensor as the next of ``names``."""
    if _is_tensor(value):
        return names.pop(0)
    if isinstance(value, tuple):
        items = [_constant(v, names) for v in value]
        return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
    if isinstance(value, list):
        return f"[{', '.join(_constant(v, names) for v in value)}]"
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    if value is Ellipsis:
        return "..."
    if isinstance(value, slice):
        return f"slice({value.start!r}, {value.stop!r}, {value.step!r})"
    return repr(value)


def input_names(sample: Sample) -> list[str]:
    """Return the module's input names: one per tensor of the sample."""
    return [f"a{k}" for k in range(len(leaves((sample.args, sample.kwargs))))]


def module_source(sample: Sample) -> str:
    """Return the source that defines ``F`` and ``Model``, whose ``forward`` makes the sample's call."""
    names = input_names(sample)
    pending = list(names)
    call = [_constant(a, pending) for a in sample.args]
    call += [f"{key}={_constant(value, pending)}" for key, value in sample.kwargs.items()]
    return (
        f"{OPERATIONS[sample.op].call.rstrip()}\n\n\n"
        "class Model(torch.nn.Module):\n"
        f"    def forward(self, {', '.join(names)}):\n"
        f"        return F({', '.join(call)})\n"
    )


def build(sample: Sample) -> tuple[Any, list, list[str]]:
    """Return the sample's module (executed from :func:`module_source`), its input tensors and their names."""
    import operator

    import torch

    namespace: dict[str, Any] = {"torch": torch, "operator": operator}
    exec(compile(module_source(sample), f"<{sample.op} sample>", "exec"), namespace)
    return namespace["Model"](), leaves((sample.args, sample.kwargs)), input_names(sample)


def to_numpy(tensor: Any) -> np.ndarray:
    """Return a torch tensor as NumPy, bfloat16 as ml_dtypes' (bits kept)."""
    import torch

    tensor = tensor.detach().cpu()
    if tensor.dtype == torch.bfloat16:
        import ml_dtypes

        return tensor.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return tensor.numpy()


def _value(item: Any) -> str:
    if isinstance(item, float) and not math.isfinite(item):
        return f"float({str(item)!r})"
    return repr(item)


def _nested(values: Any) -> str:
    if isinstance(values, list):
        return "[" + ", ".join(_nested(v) for v in values) + "]"
    return _value(values)


def tensor_source(tensor: Any) -> str:
    """Return ``torch.tensor(...)`` source that rebuilds ``tensor`` bit for bit (its dtype and shape)."""
    import torch

    dtype = str(tensor.dtype)  # 'torch.float32'
    if tensor.numel() == 0:
        return f"torch.zeros({tuple(tensor.shape)!r}, dtype={dtype})"
    values = tensor.detach().cpu()
    if values.is_floating_point():
        values = values.to(torch.float64)  # exact: every float16/bfloat16/float32 is a float64
    return f"torch.tensor({_nested(values.tolist())}, dtype={dtype})"
