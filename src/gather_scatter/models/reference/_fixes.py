"""onnx.reference's operators that give another answer than the ONNX spec's, replaced.

:class:`~gather_scatter.reference.Evaluator` (and so :func:`run_model` and ``Session``) runs
every operator outside the family on onnx.reference (onnx 1.23). Where one of those gives a
result the spec does not, or refuses a valid node that other engines run, its class here
takes its place (same ``op_domain`` and class name, so the evaluator's ``new_ops`` picks it).
Each class says what onnx.reference does and what the spec says; ``tests/test_onnx_node_suite.py``
runs ONNX's node test suite through :func:`run_model`, and ``tests/test_reference_fixes.py``
holds one regression test per fix, each checked against onnxruntime where it is installed.

- **Loop** (https://onnx.ai/onnx/operators/onnx__Loop.html): an omitted ``cond`` input is read
  as false, so the body never runs (onnx.reference's ``while cond and ...`` with None); the
  spec's table: ``input (trip_count, "")`` is a for loop whose body's ``cond`` output is
  ignored (onnxruntime 1.32 stops when that output is false: it differs from the spec there).
  Scan outputs are stacked with ``np.vstack``, which merges the first axis of per-iteration
  values instead of adding one (a scalar per iteration gives ``(N, 1)``, not ``(N,)``; Range's
  function body relies on it); a loop of zero iterations with scan outputs raised. Outer-scope
  values shadowed the body's own inputs of the same name.
- **CumSum** (https://onnx.ai/onnx/operators/onnx__CumSum.html): ``axis`` given as a
  1-element 1-D tensor (PyTorch's dynamo exporter writes one for ``repeat_interleave``) is
  refused with "Axis must be a rank-0 tensor", where onnxruntime runs it; an axis outside
  ``[-r, r-1]`` reached NumPy's error. The spec's sentence is "A 0-D tensor": a 1-element
  tensor is read as its value, as onnxruntime does.
- **Optional** (https://onnx.ai/onnx/operators/onnx__Optional.html): returns its input wrapped
  in a one-element list, so an optional holding a tensor became a sequence, and an empty
  optional ``[None]`` was reported by OptionalHasElement as holding a value.
- **Scan** (https://onnx.ai/onnx/operators/onnx__Scan.html): Scan-8 (a batch axis first and an
  optional ``sequence_lens``) ran as Scan-9, reading ``sequence_lens`` as the first state;
  ``scan_input_axes``, ``scan_output_axes`` other than 0 and reverse directions were refused,
  and a scan of length zero with scan outputs raised.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx.helper import tensor_dtype_to_np_dtype
from onnx.reference.op_run import OpRun
from onnx.reference.ops.op_cum_sum import CumSum as _CumSum
from onnx.reference.ops.op_loop import Loop as _Loop
from onnx.reference.ops.op_optional import Optional as _Optional
from onnx.reference.ops.op_scan import Scan as _Scan

__all__ = ["FIXED_OPS"]


def _empty_output(value_info: onnx.ValueInfoProto, axis: int = 0) -> np.ndarray:
    """The value of a scan output of zero iterations: shape 0 on ``axis``, the body's declared element type.

    A per-iteration dim the body does not fix is 0 as well (the output holds no element).
    """
    tensor = value_info.type.tensor_type
    dims = [d.dim_value if d.HasField("dim_value") else 0 for d in tensor.shape.dim]
    dtype = tensor_dtype_to_np_dtype(tensor.elem_type) if tensor.elem_type else np.float32
    axis = axis + len(dims) + 1 if axis < 0 else axis
    dims.insert(axis, 0)
    return np.empty(dims, dtype=dtype)


def _scalar(value: Any, what: str) -> Any:
    array = np.asarray(value)
    if array.size != 1:
        raise ValueError(f"{what} must hold one value, got shape {array.shape}")
    return array.reshape(()).item()


class Loop(_Loop):
    """Loop as the spec's table says, for every combination of ``M`` and ``cond`` given or omitted."""

    def _run(self, M, cond, *v_initial, context=None, body=None, attributes=None, bindings=None):
        del body  # the evaluator passes the attribute; the loaded subgraph is self.body
        names_in = list(self.body.input_names)
        names_out = list(self.body.output_names)
        n_carried = len(names_in) - 2
        n_scan = len(names_out) - 1 - n_carried
        trip_count = None if M is None else int(_scalar(M, "Loop's M"))
        # The condition is a loop-carried value of the body either way; it ends the loop only
        # where the node has a cond input (the spec's table: "cond = ...; // ignored").
        condition = True if cond is None else bool(_scalar(cond, "Loop's cond"))
        carried = list(v_initial)
        scans: list[list[Any]] = [[] for _ in range(n_scan)]
        iteration = 0
        while (condition or cond is None) and (trip_count is None or iteration < trip_count):
            feeds = dict(context or {})  # outer scope first: the body's own inputs shadow it
            feeds[names_in[0]] = np.array(iteration, dtype=np.int64)
            feeds[names_in[1]] = np.array(condition)
            feeds.update(zip(names_in[2:], carried, strict=True))
            outputs = self._run_body(feeds, attributes=attributes, bindings=bindings)
            condition = bool(_scalar(outputs[0], f"Loop's body output {names_out[0]!r}"))
            carried = list(outputs[1 : 1 + n_carried])
            for k in range(n_scan):
                scans[k].append(outputs[1 + n_carried + k])
            iteration += 1
        results = carried
        for k, values in enumerate(scans):
            if not values:
                results.append(_empty_output(self.body.proto_.output[1 + n_carried + k]))
            elif isinstance(values[0], np.ndarray) or np.isscalar(values[0]):
                results.append(np.stack([np.asarray(v) for v in values]))
            else:  # a sequence or other non-tensor scan output: as onnx.reference collects it
                results.append(values)
        return self._check_and_fix_outputs(tuple(results))


class CumSum(_CumSum):
    """CumSum whose ``axis`` may also be a 1-element tensor, as onnxruntime reads it."""

    def _run(self, x, axis, exclusive=None, reverse=None):
        value = int(_scalar(axis, "CumSum's axis"))
        rank = np.ndim(x)
        if not -rank <= value < max(rank, 1):
            raise ValueError(f"CumSum's axis {value} is out of range for input of rank {rank} ([{-rank}, {rank - 1}])")
        return super()._run(x, np.array(value), exclusive=exclusive, reverse=reverse)


class Optional(_Optional):
    """Optional whose value is its input itself (or None: empty), as OptionalGetElement and graph outputs read it."""

    def _run(self, x=None, type=None):
        if x is not None and type is not None and isinstance(x, np.ndarray):
            expected = tensor_dtype_to_np_dtype(type.tensor_type.elem_type) if hasattr(type, "tensor_type") else None
            if expected is not None and expected != x.dtype:
                raise TypeError(f"Optional's input has dtype {x.dtype}, its type attribute says {expected}")
        return (x,)

    def _check_and_fix_outputs(self, res: tuple[Any, ...]) -> tuple[Any, ...]:
        return res  # None is an empty optional, not an error


class Scan(_Scan):
    """Scan-8 and Scan-9 and later, with any axes and directions, and zero iterations."""

    def __init__(self, onnx_node: onnx.NodeProto, run_params: dict[str, Any]):
        OpRun.__init__(self, onnx_node, run_params)  # onnx.reference's checks refuse axes and directions
        self.body: Any  # the subgraph's evaluator, set from the attribute by OpRun
        self.input_names = self.body.input_names
        self.output_names = self.body.output_names
        self.version8 = run_params["opsets"].get("", 9) < 9

    def _attr(self, name: str) -> list[int]:
        value = getattr(self, name, None)
        return [] if value is None else [int(v) for v in value]

    def _run(self, *args, context=None, attributes=None, bindings=None, **_attrs):
        m = int(self.num_scan_inputs)
        if self.version8:
            return self._run8(args[0], list(args[1:]), m, context, attributes, bindings)
        n_states = len(args) - m
        states, scan_inputs = list(args[:n_states]), list(args[n_states:])
        in_axes = self._attr("scan_input_axes") or [0] * m
        in_dirs = self._attr("scan_input_directions") or [0] * m
        moved = [np.moveaxis(x, axis, 0) for x, axis in zip(scan_inputs, in_axes, strict=True)]
        lengths = {x.shape[0] for x in moved}
        if len(lengths) != 1:
            raise ValueError(f"Scan's scan inputs have different lengths along their scan axes: {sorted(lengths)}")
        moved = [x[::-1] if d else x for x, d in zip(moved, in_dirs, strict=True)]
        states, scans = self._iterate(states, moved, lengths.pop(), context, attributes, bindings)
        n_scan = len(self.output_names) - n_states
        out_axes = self._attr("scan_output_axes") or [0] * n_scan
        out_dirs = self._attr("scan_output_directions") or [0] * n_scan
        results = list(states)
        for k in range(n_scan):
            values = scans[k][::-1] if out_dirs[k] else scans[k]
            if values:
                stacked = np.stack(values)
                axis = out_axes[k] + stacked.ndim if out_axes[k] < 0 else out_axes[k]
                results.append(np.moveaxis(stacked, 0, axis))
            else:
                results.append(_empty_output(self.body.proto_.output[n_states + k], out_axes[k]))
        return self._check_and_fix_outputs(tuple(results))

    def _iterate(self, states, scan_inputs, length, context, attributes, bindings):
        """Run the body ``length`` times; the scan inputs' first axis is the iteration's."""
        n_states = len(states)
        names_in = self.input_names
        scans: list[list[Any]] = [[] for _ in range(len(self.output_names) - n_states)]
        for t in range(length):
            feeds = dict(context or {})
            feeds.update(zip(names_in[:n_states], states, strict=True))
            feeds.update((name, x[t]) for name, x in zip(names_in[n_states:], scan_inputs, strict=True))
            outputs = OpRun._evaluate_subgraph(feeds, self.body, attributes, bindings)
            states = list(outputs[:n_states])
            for k, value in enumerate(outputs[n_states:]):
                scans[k].append(value)
        return states, scans

    def _run8(self, sequence_lens, args, m, context, attributes, bindings):
        """Scan-8: axis 0 of every input is the batch, axis 1 of a scan input the sequence."""
        n_states = len(args) - m
        states, scan_inputs = args[:n_states], args[n_states:]
        dirs = self._attr("directions") or [0] * m
        batch = scan_inputs[0].shape[0]
        max_len = scan_inputs[0].shape[1]
        lens = [max_len] * batch if sequence_lens is None else [int(v) for v in np.asarray(sequence_lens).reshape(-1)]
        if len(lens) != batch or any(not 0 <= n <= max_len for n in lens):
            raise ValueError(f"Scan-8's sequence_lens {lens} must hold {batch} lengths in [0, {max_len}]")
        final_states: list[list[Any]] = [[] for _ in range(n_states)]
        scan_rows: list[list[Any]] = [[] for _ in range(len(self.output_names) - n_states)]
        for b in range(batch):
            n = lens[b]
            inputs = [x[b, :n][::-1] if d else x[b, :n] for x, d in zip(scan_inputs, dirs, strict=True)]
            out_states, scans = self._iterate([s[b] for s in states], inputs, n, context, attributes, bindings)
            for k, s in enumerate(out_states):
                final_states[k].append(s)
            for k, values in enumerate(scans):
                scan_rows[k].append(values)
        results: list[Any] = [np.stack(s) for s in final_states]
        for k, rows in enumerate(scan_rows):
            example = next((row[0] for row in rows if row), None)
            if example is None:
                empty = _empty_output(self.body.proto_.output[n_states + k])
                results.append(np.zeros((batch, max_len, *empty.shape[1:]), empty.dtype))
                continue
            out = np.zeros((batch, max_len, *np.shape(example)), np.asarray(example).dtype)  # padded with zeros
            for b, row in enumerate(rows):
                if row:
                    out[b, : len(row)] = np.stack(row)
            results.append(out)
        return self._check_and_fix_outputs(tuple(results))


#: onnx.reference's operators replaced for :class:`~gather_scatter.reference.Evaluator`.
FIXED_OPS: tuple[type[OpRun], ...] = (Loop, CumSum, Optional, Scan)
