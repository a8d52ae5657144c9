"""PyTorch tensors: the operators in native, differentiable ATen ops, on the tensor's device.

- Gathers: ``index_select`` (Gather, GatherND on flat offsets) and ``gather`` (GatherElements).
  On the CPU, Gather and GatherElements first run on the indices as given, since those ops
  check every index in their own loop; any refusal (a negative or bad index) falls back to
  the min/max check, which resolves negatives or raises our error.
- Scatters on the CPU: ``index_copy`` after keeping each target's last update (reduction
  'none'), ``index_add`` and ``index_reduce`` ('prod', 'amax', 'amin', ``include_self``):
  ATen applies them serially in index order, i.e. the spec's row-major order, so the result is
  bitwise the NumPy kernel's (tested). float16/bfloat16 'add' runs on single elements,
  where ATen rounds after every addition as NumPy does (on rows it sums in float32 first).
  'amax'/'amin' keep the value held on a tie, NumPy's float32/float64/bfloat16 loops take the
  update: a tie shows only as -0.0 against 0.0, so where an update is zero each zero result
  takes the last zero update's sign afterwards (float16 ties as ATen does).
- Scatter reductions (add/mul/max/min) on CUDA: one stable sort of the targets and one Triton
  kernel launch (:mod:`._torch_triton`) that folds each target's updates in row-major order,
  rounding to the data's type after every step — deterministic, bitwise the NumPy kernel's,
  unlike ``index_add``'s atomics. ScatterElements and Scatter take it as rows of one element
  (flat offsets in the spec's row-major order). Where triton does not import, for complex and
  bits-only types, where an input requires grad (the kernel has no backward), or when
  :func:`set_gpu_scatter` (or ``GATHER_SCATTER_GPU_SCATTER=rounds``) chooses them: the standard
  rounds of :meth:`ArrayAPIBackend.scatter_rows` in torch ops, one pass per duplicate depth,
  also exact. Reduction 'none' there too (one pass, each target's last update: no rounds).
  Other devices (MPS): the rounds.
- Bounds on CUDA: checked on the device without a host sync (:mod:`._torch_deferred`); a bad
  index raises at a later call or at :func:`gather_scatter.synchronize` (:mod:`._deferred`),
  ``out=`` written only where the check passed. Eagerly with ``set_bounds_check('eager')``,
  for indices given as NumPy or lists, and under ``torch.compile``. ATen's CPU scatter helpers
  (last update wins, NumPy's zero ties): :mod:`._torch_aten`.
- Types torch cannot compute on (float8, uint16/32/64) are moved as raw bits of an integer
  type of their size.
- Any ``torch.Tensor`` is one: ``nn.Parameter`` (a model's weights, the usual gather table)
  and other subclasses mix freely with plain tensors.
- Autograd: every op above is differentiable, so gradients reach ``data`` and ``updates``; the
  Triton kernel is not, so a scatter whose ``data`` or ``updates`` requires grad (grad enabled)
  takes the rounds on CUDA.
- ``torch.compile``: the bounds check needs the indices' values on the host, so in a graph
  it is a custom op (``gather_scatter::bounds``, ``gather_scatter::write_positions``) that
  the compiler does not look into: it runs on the real tensors when the compiled function
  runs and raises our IndexOutOfBoundsError with the eager message. No graph break, so
  ``fullgraph=True`` compiles, on every backend (inductor too), with no warning. Two things
  stay outside the graph, each a graph break whose reason ``fullgraph=True`` prints: inputs
  given as lists or NumPy arrays (read by NumPy's rules on the host) and ``out=`` (checked
  against the inputs' memory addresses). The backend is picked without array-api-compat and
  dtypes read from a table keyed by torch dtype: dynamo warned about their
  ``functools.lru_cache`` helpers. The Triton scatter is a custom op too
  (``gather_scatter::triton_scatter``), run on the real tensors.
- ``out=``: a tensor of the result's shape and dtype on data's device, written with ``copy_``
  after the whole result is computed. The memory rule is the NumPy path's
  (``_validate.refuse_broadcast``, ``refuse_overlap`` and ``same_memory`` on the tensors'
  addresses): a scatter's ``out`` that is exactly data's memory updates data in place (``out=data``,
  or the same view made twice); a broadcast ``out``, or one overlapping an input otherwise,
  is refused; a disjoint part of the same storage is fine.
"""

from __future__ import annotations

import warnings
from typing import Any

import array_api_compat.torch as torch_namespace
import numpy as np
import torch

from ..errors import InvalidAttributeError
from ..rules.validate import out_of_bounds, refuse_broadcast, refuse_overlap, same_memory
from ..rules.versions import Mode, Reduction
from . import _torch_deferred, _torch_triton
from ._torch_aten import (
    BITS,
    REDUCE,
    bits,
    first_nan,
    index_reduce,
    last_wins,
    last_zero,
    nans_met,
    pick_last,
    zero_ties,
)
from ._torch_compile import HOST_CHECK, HOST_INPUT, NUMPY_DTYPES, OUT_ADDRESSES, register_ops
from ._torch_triton import GPU_SCATTER_METHODS, set_gpu_scatter  # noqa: F401 (this module's API)
from .array_api import ArrayAPIBackend

# torch dtypes that index_select/index_copy move but arithmetic does not cover: copied as bits.
_NATIVE_COPY = {
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.complex64,
    torch.complex128,
}
_UNSIGNED = {torch.uint16, torch.uint32, torch.uint64}
_HALF_TYPES = {torch.float16, torch.bfloat16}


def _as_bits(x: torch.Tensor) -> torch.Tensor:
    return x if x.dtype in _NATIVE_COPY else x.view(BITS[x.element_size()])


class TorchBackend(ArrayAPIBackend):
    """The operators on PyTorch tensors in native, differentiable ATen ops (rules in the module docstring).

    Tensors are writable, so ``out=`` is taken: a tensor of the result's shape and dtype on
    data's device, under the NumPy path's memory rules.
    """

    writable = True

    def __init__(self, spec, xp, first, first_name):
        super().__init__(spec, torch_namespace if xp is None else xp, first, first_name)
        self.kind, self.library = torch.Tensor, "torch.Tensor"  # nn.Parameter and other subclasses too
        self.first = first
        self.deferred_bad = None  # a deferred check's "any index bad" (0-d, on the device), for out=
        self.host_indices = False  # indices given as NumPy or a list: checked eagerly

    def _device_of(self, array: Any) -> Any:
        return array.device

    def array(self, name: str, value: Any, dtype: Any = None) -> Any:
        """Return ``value`` as a tensor on data's device (:meth:`ArrayAPIBackend.array`).

        Under ``torch.compile`` a list or NumPy array is converted eagerly, outside the graph.
        Indices given so are checked eagerly (their copy to the device waits for it anyway).
        """
        if not isinstance(value, torch.Tensor) and name in ("indices", "write_indices"):
            self.host_indices = True
        if isinstance(value, torch.Tensor) or not torch.compiler.is_compiling():
            return super().array(name, value, dtype)
        return self.host_array(name, value, dtype)

    @torch.compiler.disable(reason=HOST_INPUT)
    def host_array(self, name: str, value: Any, dtype: Any = None) -> Any:
        """Return ``value``, a list or NumPy array, as a tensor by NumPy's rules, outside any graph."""
        return super().array(name, value, dtype)

    def dtype(self, name: str, array: Any) -> np.dtype:
        """Return ``array``'s dtype as NumPy's, from a table keyed by torch dtype.

        :func:`numpy_dtype` gives the same answer, but its ``functools.cache`` makes
        ``torch.compile`` warn; a dict lookup on a ``torch.dtype`` traces as a constant.
        """
        if name not in self.host_dtypes:
            known = NUMPY_DTYPES.get(array.dtype)
            if known is not None:
                return known
        return super().dtype(name, array)

    def from_numpy(self, host: np.ndarray) -> torch.Tensor:
        """Return the NumPy array ``host`` as a tensor on this device.

        ml_dtypes arrays (bfloat16, float8, ...) go as their bits, viewed as torch's type of that name.
        """
        host = host if host.flags.c_contiguous else host.copy()  # ascontiguousarray makes 0-d 1-d
        if host.dtype.name in _NUMPY_NAMES:
            return torch.from_numpy(host).to(self.device)
        # ml_dtypes (bfloat16, float8...): their bits, viewed as torch's type of that name
        bits = torch.from_numpy(host.view(np.uint8 if host.dtype.itemsize == 1 else f"i{host.dtype.itemsize}"))
        native = getattr(torch, host.dtype.name, None)
        return (bits if native is None else bits.view(native)).to(self.device)

    def extremes(self, idx, sizes):
        """Return the minimum and maximum of non-empty int64 ``idx`` on the host, in one transfer."""
        # Whole-tensor min/max are ATen's fastest reductions (aminmax and per-dim ones are
        # several times slower); per component only where the whole range does not settle it.
        both = torch.stack([idx.min(), idx.max()]).cpu().numpy()  # one transfer
        if not isinstance(sizes, tuple):
            return both[0], both[1]
        k = idx.shape[-1]
        if both[0] >= 0 and both[1] < min(sizes):
            return np.full(k, both[0]), np.full(k, both[1])
        low, high = torch.aminmax(idx.reshape(-1, k), dim=0)
        both = torch.stack([low, high]).cpu().numpy()
        return both[0], both[1]

    def take_checked(self, indices, size, axis, take):
        """Return ``take(norm)`` for the checked ``indices``; on the CPU ATen's own check is tried first."""
        # On the CPU, index_select and gather check every index in their own loop (negatives
        # included): try them on the indices as given, a pass over the indices cheaper than
        # ours; any refusal falls back to our check, which resolves negatives or raises our
        # error. (On CUDA a bad index is a device-side assert, so there we check first.)
        # Under torch.compile the take is traced, not run, so it cannot refuse: check first.
        if _on_cpu(indices) and indices.numel() and not torch.compiler.is_compiling():
            try:
                return take(indices if indices.dtype == torch.int64 else indices.to(torch.int64))
            except (IndexError, RuntimeError):
                pass
        return super().take_checked(indices, size, axis, take)

    # The checks read values on the host. Under torch.compile they are one custom op each
    # (gather_scatter::bounds, gather_scatter::write_positions): opaque to the compiler, run
    # eagerly on the real tensors when the compiled function runs, so a bad index raises our
    # error from it, with no graph break (fullgraph=True compiles).
    def bounds(self, indices, sizes, axes):
        """Return ``indices`` checked and non-negative; on CUDA without a host sync, compiled as one custom op.

        On CUDA in the 'deferred' mode (:mod:`._deferred`) the check is queued on the device and
        bad indices are mapped onto valid ones; the error comes at a later call.
        """
        if not self.host_indices and _torch_deferred.applies(indices):
            spec = self.spec
            checked = _torch_deferred.bounds(
                indices, sizes, lambda position, value: out_of_bounds(spec, position, value, sizes, axes)
            )
            if checked is not None:
                norm, self.deferred_bad = checked
                return norm
        if not torch.compiler.is_compiling():
            return super().bounds(indices, sizes, axes)
        spec, per_component = self.spec, isinstance(sizes, tuple)
        return torch.ops.gather_scatter.bounds(
            indices,
            list(sizes) if per_component else [sizes],
            list(axes) if per_component else [axes],
            per_component,
            spec.domain,
            spec.op_type,
            spec.since_version,
        )

    def checked_writes(self, write, capacity, length, mode, ax):
        """Return TensorScatter's checked ``write`` as int64; on CUDA as :meth:`bounds`; compiled as one custom op."""
        if not self.host_indices and _torch_deferred.applies(write):
            from ..kernels.tensor_scatter import write_index_error

            spec = self.spec
            safe, self.deferred_bad = _torch_deferred.writes(
                write,
                capacity - length if mode is Mode.LINEAR else None,
                lambda b, value: write_index_error(spec, b, value, length, capacity, mode, ax),
            )
            return safe
        if not torch.compiler.is_compiling():
            return super().checked_writes(write, capacity, length, mode, ax)
        spec = self.spec
        return torch.ops.gather_scatter.write_positions(
            write, capacity, length, mode.value, ax, spec.domain, spec.op_type, spec.since_version
        )

    @torch.compiler.disable(reason=HOST_CHECK)
    def raise_first_bad(self, indices, bad, sizes, axes, error=None):
        """Raise IndexOutOfBoundsError at the first True of ``bad``, outside any ``torch.compile`` graph."""
        return super().raise_first_bad(indices, bad, sizes, axes, error)

    def take(self, x, idx, axis):
        """Return ``x`` at ``idx`` along ``axis`` by ``index_select`` (types without arithmetic as bits)."""
        return _restore(torch.index_select(_as_bits(x), axis, idx), x.dtype)

    def take_along(self, x, idx, axis):
        """Return ``x`` at ``idx`` along ``axis`` by ``torch.gather`` (types without arithmetic as bits)."""
        if x.dtype in _HALF_TYPES and not (x.requires_grad and torch.is_grad_enabled()):
            # ATen's CPU gather quiets a half type's signaling NaN (0x7C03 -> 0x7E03): its bits instead
            return torch.gather(bits(x), axis, idx).view(x.dtype)
        return _restore(torch.gather(_as_bits(x), axis, idx), x.dtype)

    def scatter_rows(self, data, targets, updates, reduction, unique=False):
        """Return ``data`` with rows ``updates[i]`` written or reduced into rows ``targets[i]``, in order.

        On the CPU by ``index_copy`` (each target's last update), ``index_add`` and
        ``index_reduce``, which ATen applies serially in index order. On CUDA, reductions take
        the Triton fold (:func:`._torch_triton.scatter_reduce_rows`) where
        :func:`._torch_triton.takes` allows; otherwise, on
        other devices, and for complex 'mul', the deterministic rounds of
        :meth:`ArrayAPIBackend.scatter_rows`.
        """
        if not _on_cpu(data) or (data.is_complex() and reduction is Reduction.MUL):  # no complex prod
            if reduction is not Reduction.NONE and not _on_cpu(data) and _torch_triton.takes(data, updates):

                def fold(d, u, r):  # None for a type the fold does not take (complex, float8): the rounds
                    return (
                        _torch_triton.scatter_reduce_rows(d, targets, u, r.value)
                        if _torch_triton.covers(d.dtype, r.value)
                        else None
                    )

                folded = _through_twin(data, updates, reduction, fold)
                if folded is None:
                    folded = fold(data, updates, reduction)
                if folded is not None:
                    return folded
            return super().scatter_rows(data, targets, updates, reduction, unique)
        if reduction is Reduction.NONE:
            if not unique and torch.compiler.is_compiling() and targets.shape[0]:
                # A graph has no data-dependent shapes: pick each row's last update instead.
                return _restore(pick_last(_as_bits(data), targets, _as_bits(updates)), data.dtype)
            if not unique:
                targets, updates = last_wins(targets, updates, data.shape[0])
            return _restore(_as_bits(data).index_copy(0, targets, _as_bits(updates)), data.dtype)
        twin = _through_twin(data, updates, reduction, lambda d, u, r: self.scatter_rows(d, targets, u, r))
        if twin is not None:
            return twin
        if reduction is Reduction.ADD:
            width = data.shape[1]
            if data.dtype in (torch.float16, torch.bfloat16):
                # ATen sums rows (even of one element) of half types in float32; a vector's
                # elements round after every addition, as NumPy does.
                cells = (targets[:, None] * width + torch.arange(width, device=data.device)).reshape(-1)
                return data.reshape(-1).index_add(0, cells, updates.reshape(-1)).reshape(data.shape)
            return data.index_add(0, targets, updates)
        if torch.compiler.is_compiling():  # dynamo cannot trace catch_warnings (see _torch_compile._spend_beta_warning)
            return index_reduce(data, targets, updates, reduction)
        with warnings.catch_warnings():  # "index_reduce() is in beta": our tests pin its results
            warnings.simplefilter("ignore", UserWarning)
            return index_reduce(data, targets, updates, reduction)

    def scatter_along(self, data, norm, updates, axis, reduction):
        """Return ScatterElements' bytes, by ATen's CPU ``scatter_add``/``scatter_reduce`` where it can.

        Those keep the spec's order; other devices, reduction 'none' and the types they do not
        cover take :meth:`ArrayAPIBackend.scatter_along`.
        """
        # ATen's CPU scatter loops over the axis in order for each other position, so every
        # element's updates apply in the spec's row-major order (tested); 'none' keeps the
        # flat last-wins path, whose gradient skips the overwritten updates (scatter's does not),
        # and half types that path too: ATen's scatter reduces them in float32, rounding once.
        if (
            not _on_cpu(data)
            or reduction is Reduction.NONE
            or data.dtype in _UNSIGNED
            or data.dtype in (torch.bool, torch.float16, torch.bfloat16)
            or (data.is_complex() and reduction is not Reduction.ADD)
        ):
            return super().scatter_along(data, norm, updates, axis, reduction)
        index = norm.contiguous()  # an expanded (stride-0) index takes ATen's sorting path: other order
        if reduction is Reduction.ADD:
            return data.scatter_add(axis, index, updates)
        result = data.scatter_reduce(axis, index, updates, REDUCE[reduction], include_self=True)
        if zero_ties(reduction, updates):
            order = torch.arange(updates.numel(), device=data.device).reshape(updates.shape)
            last = torch.full(data.shape, -1, dtype=torch.int64, device=data.device)
            last = last.scatter_reduce(axis, index, torch.where(updates == 0, order, -1), "amax", include_self=True)
            result = last_zero(result, last, updates.reshape(-1)[last.clamp(min=0)])
        if nans_met(reduction, updates):  # NumPy's NaN: the first met
            count = updates.numel()
            order = torch.arange(count, device=data.device).reshape(updates.shape)
            first = torch.full(data.shape, count, dtype=torch.int64, device=data.device)
            first = first.scatter_reduce(axis, index, torch.where(updates != updates, order, count), "amin")
            picked = bits(updates).reshape(-1)[first.clamp(max=count - 1)].view(updates.dtype)
            result = first_nan(result, data, first < count, picked)
        return result

    def check_out(self, out, shape, dtype):
        """Run the ``out=`` checks that need no result, then torch's own.

        A broadcast ``out`` is refused, and so is a leaf tensor that requires grad while grad is
        enabled (InvalidAttributeError: autograd cannot let an operation write into it).
        """
        super().check_out(out, shape, dtype)
        if out is None:
            return
        self.refuse_broadcast(out)
        if out.requires_grad and out.is_leaf and torch.is_grad_enabled():
            spec = self.spec
            raise spec.error(
                InvalidAttributeError,
                "out is a leaf tensor that requires grad (an nn.Parameter?), which autograd cannot "
                "let an operation write into; call under torch.no_grad() to update it, or use the returned tensor",
                input="out",
            )

    def write_out(self, result, out, inputs):
        """Copy ``result`` into ``out`` once :meth:`check_memory` allows it, and return ``out``.

        After a deferred check (:meth:`bounds` on CUDA) only where it passed: ``out`` keeps its
        values when an index was bad, decided on the device.
        """
        self.check_memory(out, inputs)
        if self.deferred_bad is None:
            _as_bits(out).copy_(_as_bits(result))
        else:
            torch.where(self.deferred_bad, _as_bits(out), _as_bits(result), out=_as_bits(out))
        return out

    def constant(self, values):
        """Return ``values`` (ints) as an int64 tensor on data's device, without a host sync."""
        return _torch_deferred.constant(tuple(values), self.device)

    @torch.compiler.disable(reason=OUT_ADDRESSES)  # addresses: real tensors only, never traced ones
    def refuse_broadcast(self, out: torch.Tensor) -> None:
        """Refuse a broadcast ``out`` (one memory location for several elements), by the NumPy path's rule."""
        refuse_broadcast(self.spec, _memory(out))

    @torch.compiler.disable(reason=OUT_ADDRESSES)  # addresses: real tensors only, never traced ones
    def check_memory(self, out: torch.Tensor, inputs: dict) -> None:
        """Refuse an ``out`` that overlaps an input's memory, by the NumPy path's rule.

        A scatter (whose caller leaves data out of ``inputs``) runs in place when ``out`` is
        exactly data's memory, and is refused when it overlaps data otherwise; ``out`` may share
        no memory with any input in ``inputs``.
        """
        view = _memory(out)
        if self.first_name not in inputs and not same_memory(view, _memory(self.first)):
            inputs = {self.first_name: self.first, **inputs}
        refuse_overlap(
            self.spec,
            view,
            {name: _memory(t) for name, t in inputs.items() if isinstance(t, torch.Tensor) and t.device == out.device},
        )


_NUMPY_NAMES = {
    "bool",
    "uint8",
    "int8",
    "int16",
    "int32",
    "int64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "uint16",
    "uint32",
    "uint64",
}


def _through_twin(data: torch.Tensor, updates: torch.Tensor, reduction: Reduction, run):
    """Return ``run(data, updates, reduction)`` on the type torch reduces these with, converted back.

    None where ``data`` is neither of: bool as uint8 (or / and: max / min of 0 and 1), and
    uint16/32/64, which torch computes on only in part, as their signed twins (add/mul wrap the
    same bits either way; XOR of the sign bit makes signed order unsigned order for max/min).
    The CPU's ATen loops and the Triton fold take the same conversions.
    """
    if data.dtype == torch.bool:
        twin = {Reduction.ADD: Reduction.MAX, Reduction.MUL: Reduction.MIN}.get(reduction, reduction)
        return run(data.to(torch.uint8), updates.to(torch.uint8), twin).to(torch.bool)
    if data.dtype in _UNSIGNED:
        signed = BITS[data.element_size()]
        flip = 0 if reduction in (Reduction.ADD, Reduction.MUL) else torch.iinfo(signed).min
        return (run(data.view(signed) ^ flip, updates.view(signed) ^ flip, reduction) ^ flip).view(data.dtype)
    return None


def _on_cpu(t: torch.Tensor) -> bool:
    """Whether ``t`` is on the CPU, where ATen's own checks and serial scatters are used.

    Elsewhere (CUDA, MPS) the bounds are checked first and scatters take the standard rounds;
    tests patch this to run those paths on the CPU (tests/test_cuda.py).
    """
    return t.device.type == "cpu"


def _restore(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return x if x.dtype == dtype else x.view(dtype)


class _Addresses:
    """The ``__array_interface__`` of a tensor's memory: its first byte, shape and strides in bytes."""

    def __init__(self, t: torch.Tensor):
        size = t.element_size()
        self.__array_interface__ = {
            "version": 3,
            "data": (t.data_ptr() if t.numel() else 0, False),
            "shape": tuple(t.shape),
            "typestr": f"|V{size}",
            "strides": tuple(stride * size for stride in t.stride()),
        }


def _memory(t: torch.Tensor) -> np.ndarray:
    """Return an ndarray over ``t``'s addresses (on any device), for the memory rules of ``_validate``.

    Those rules compare addresses and never read the bytes (nor may anything else).
    """
    return np.asarray(_Addresses(t))


register_ops(TorchBackend)
