"""The sentences of the ONNX operator specification that decide a finding, quoted in issue texts.

``upstream`` picks the quote for a finding (``upstream.spec_quote``); a test checks each quote
against the schema text the onnx package carries.
"""

from __future__ import annotations

__all__ = ["SPEC_FILES", "SPEC_QUOTES"]

SPEC_FILES = {
    "Gather": "Gather-1-11-13.rst.txt",
    "GatherND": "GatherND-11-12-13.rst.txt",
    "GatherElements": "GatherElements-11-13.md.txt",
    "ScatterND": "ScatterND-11-13-16.rst.txt",
    "ScatterElements": "ScatterElements-11-13-16-18.md.txt",
    "Scatter": "Scatter-9-11.md.txt",
    "TensorScatter": "TensorScatter-24.md.txt",
    "com.microsoft.GatherND": "com.microsoft-GatherND-1.md.txt",
    "com.microsoft.GatherBlockQuantized": "GatherBlockQuantized-1.com.microsoft.txt",
}
"""The schema text (as the onnx package carries it, ``onnx.defs``) each quote is taken from."""

_BOUNDS = (
    "All index values are expected to be within bounds [-s, s-1] along axis of size s. "
    "It is an error if any of the index values are out of bounds."
)
_ELEMENTS_OUTPUT = (
    "For each entry in `updates`, the target index in `data` is obtained by combining the "
    "corresponding entry in `indices` with the index of the entry itself: the index-value for "
    "dimension = axis is obtained from the value of the corresponding entry in `indices` and the "
    "index-value for dimension != axis is obtained from the index of the entry itself."
)
_GATHER_AXIS = (
    "Which axis to gather on. Negative value means counting dimensions from the back. Accepted range is [-r, r-1] "
    "where r = rank(data)."
)
_REDUCTION = (
    "`reduction` allows specification of an optional reduction operation, which is applied to all values "
    "in `updates` tensor into `output` at the specified `indices`."
)

SPEC_QUOTES: dict[tuple[str, str], str] = {
    ("Gather", "bounds"): _BOUNDS,
    ("Gather", "output"): (
        "Given `data` tensor of rank r >= 1, and `indices` tensor of rank q, gather entries of the axis dimension "
        "of `data` (by default outer-most one as axis=0) indexed by `indices`, and concatenates them in an output "
        "tensor of rank q + (r - 1)."
    ),
    ("GatherND", "bounds"): (
        "All values in `indices` are expected to be within bounds [-s, s-1] along axis of size `s` (i.e.) "
        "`-data_shape[i] <= indices[...,i] <= data_shape[i] - 1`. It is an error if any of the index values are "
        "out of bounds."
    ),
    ("GatherND", "output"): (
        "The output tensor is obtained by mapping each index-tuple in the `indices` tensor to "
        "the corresponding slice of the input `data`."
    ),
    ("GatherElements", "bounds"): _BOUNDS,
    ("GatherElements", "output"): (
        "Its output shape is the same as the shape of `indices` and consists of one "
        "value (gathered from the `data`) for each element in `indices`."
    ),
    ("ScatterND", "bounds"): (
        "`indices` is treated as a (q-1)-dimensional tensor of k-tuples, where each k-tuple is a partial-index "
        "into `data`."
    ),
    ("ScatterND", "output"): (
        "The output of the operation is produced by creating a copy of the input `data`, and then updating its "
        "value to values specified by `updates` at specific index positions specified by `indices`. Its output "
        "shape is the same as the shape of `data`."
    ),
    ("ScatterND", "reduction-add"): _REDUCTION
    + (
        '\n\nWhen `reduction` is set to "add", `output` is calculated as follows:\n\n'
        "    output = np.copy(data)\n    update_indices = indices.shape[:-1]\n"
        "    for idx in np.ndindex(update_indices):\n        output[indices[idx]] += updates[idx]"
    ),
    ("ScatterND", "reduction-mul"): _REDUCTION
    + (
        '\n\nWhen `reduction` is set to "mul", `output` is calculated as follows:\n\n'
        "    output = np.copy(data)\n    update_indices = indices.shape[:-1]\n"
        "    for idx in np.ndindex(update_indices):\n        output[indices[idx]] *= updates[idx]"
    ),
    ("ScatterND", "reduction"): _REDUCTION,
    ("ScatterElements", "bounds"): _BOUNDS,
    ("ScatterElements", "output"): _ELEMENTS_OUTPUT,
    ("ScatterElements", "reduction"): _REDUCTION,
    ("Scatter", "bounds"): _BOUNDS,
    ("Scatter", "output"): _ELEMENTS_OUTPUT,
    ("TensorScatter", "bounds"): "`linear` mode requires write_indices+sequence_length<=max_sequence_length.",
    ("TensorScatter", "output"): (
        "The optional `write_indices` input indicates the write index for each sample in the batch, assumed to "
        'be zero if not provided. When the `mode` attribute is set to "circular", the write index is modulo '
        "max_sequence_length."
    ),
    # The sentences an invalid case of the conformance suite breaks (its error.json ``spec``), by
    # (op, kind) or, more precisely, (op, kind-<first word of the case>): issue 28.
    ("Gather", "attribute"): _GATHER_AXIS,
    ("GatherND", "shape"): (
        "4) The `indices_shape[-1]` should have a value between 1 (inclusive) and rank `r-b` (inclusive)"
    ),
    ("GatherND", "shape-batch"): (
        "2) The first `b` dimensions of the shape of `indices` tensor and `data` tensor must be equal."
    ),
    ("GatherND", "attribute"): "3) b < min(q, r) is to be honored.",
    ("GatherND", "type"): "**indices** (heterogeneous) - **tensor(int64)**: Tensor of rank q >= 1.",
    ("ScatterND", "shape"): (
        "Thus, the shape of `updates` must equal indices.shape[0:q-1] ++ data.shape[k:r-1], where ++ denotes "
        "the concatenation of shapes."
    ),
    ("ScatterND", "shape-indices"): "Hence, k can be a value at most the rank of `data`.",
    ("ScatterND", "type"): "**indices** (heterogeneous) - **tensor(int64)**: Tensor of rank q >= 1.",
    ("ScatterND", "type-updates"): (
        "**updates** (heterogeneous) - **T**: Tensor of rank q + r - indices_shape[-1] - 1."
    ),
    ("ScatterND", "attribute"): (
        "Type of reduction to apply: none (default), add, mul. 'none': no reduction applied. 'add': reduction "
        "using the addition operation. 'mul': reduction using the multiplication operation."
    ),
    ("GatherElements", "shape"): "GatherElements takes two inputs `data` and `indices` of the same rank r >= 1",
    ("GatherElements", "attribute"): (
        "Which axis to gather on. Negative value means counting dimensions from the back. Accepted range is "
        "[-r, r-1] where r = rank(data)."
    ),
    ("ScatterElements", "shape"): "- `updates` (T): Tensor of rank r >=1 (same rank and shape as indices)",
    ("ScatterElements", "shape-rank"): (
        "ScatterElements takes three inputs `data`, `updates`, and `indices` of the same rank r >= 1"
    ),
    ("ScatterElements", "attribute"): (
        "Type of reduction to apply: none (default), add, mul, max, min. 'none': no reduction applied."
    ),
    ("Scatter", "shape"): "- `updates` (T): Tensor of rank r >=1 (same rank and shape as indices)",
    ("Scatter", "shape-rank"): (
        "Given `data`, `updates` and `indices` input tensors of rank r >= 1, write the values provided by `updates`"
    ),
    ("ScatterElements", "attribute-axis"): (
        "Which axis to scatter on. Negative value means counting dimensions from the back. Accepted range is "
        "[-r, r-1] where r = rank(data)."
    ),
    ("Scatter", "attribute"): (
        "- `axis` (default 0): Which axis to scatter on. Negative value means counting dimensions from the back."
    ),
    ("TensorScatter", "shape"): (
        "The `update` tensor's shape only differs from the cache tensors in the sequence dimension: (batch_size, "
        "D1, D2, ..., sequence_length, ..., Dn), where sequence_length <= max_sequence_length."
    ),
    ("TensorScatter", "shape-write"): (
        "Write indices for the incoming update tensor in the cache. Shape is `(batch_size,)`."
    ),
    ("TensorScatter", "attribute"): "It cannot be 0 (the batch dimension).",
    ("TensorScatter", "attribute-mode"): "Supported modes include `linear` and `circular`.",
    ("com.microsoft.GatherBlockQuantized", "attribute"): (
        "`block_size` must be a power of 2 and not smaller than 16, like 16, 32, 64, 128, ..."
    ),
    ("com.microsoft.GatherBlockQuantized", "attribute-block_size_0"): (
        "A value of 0 is only valid for an FP8 or FP4 `data` type and means the entire `quantize_axis` dimension "
        "forms a single block."
    ),
    ("com.microsoft.GatherBlockQuantized", "attribute-bits"): (
        "Number of bits used for weight quantization. Must be 2, 4 or 8."
    ),
    ("com.microsoft.GatherBlockQuantized", "attribute-gather_axis_not"): (
        "5. For uint8 data, the `gather_axis` must be 0."
    ),
    ("com.microsoft.GatherBlockQuantized", "attribute-gather_axis_out"): (
        "(Optional) Which axis to gather on. Negative value means counting dimensions from the back. Accepted "
        "range is [-r, r-1] where r = rank(data)."
    ),
    ("com.microsoft.GatherBlockQuantized", "attribute-quantize_axis_out"): (
        "(Optional) Which axis to block-wise quantize. Negative value means counting dimensions from the back. "
        "Accepted range is [-r, r-1] where r = rank(data)."
    ),
    ("com.microsoft.GatherBlockQuantized", "attribute-quantize_axis_not"): (
        "for `bits` < 8 the values are packed along the last dimension (low-order bits first), and `gather_axis` "
        "and `quantize_axis` must differ."
    ),
    ("com.microsoft.GatherBlockQuantized", "attribute-uint8"): (
        "for `bits` < 8 the values are packed along the last dimension (low-order bits first), and `gather_axis` "
        "and `quantize_axis` must differ."
    ),
    ("com.microsoft.GatherBlockQuantized", "shape-zero_points"): (
        "2. Input `data`'s scale and zero point are specified by input `scales` and `zero_points`."
    ),
    ("com.microsoft.GatherBlockQuantized", "shape"): (
        "On any axis other than `quantize_axis`, the corresponding `scales` dimension must either equal `data`'s "
        "dimension, or be 1, in which case the scale is broadcast along that axis"
    ),
    ("com.microsoft.GatherBlockQuantized", "arity"): (
        "`zero_points` must not be provided when `data` is an FP8 or FP4 type: FP8/FP4 quantization is symmetric."
    ),
    ("com.microsoft.GatherBlockQuantized", "type"): (
        "4. The `output` and `scales` have the same type. The `data` and `zero_points` have the same type."
    ),
    ("com.microsoft.GatherND", "output"): (
        "Given data tensor of rank r >= 1, and indices tensor of rank q >= 1, gather slices of data into an "
        "output tensor of rank q - 1 + r - indices[-1]."
    ),
    ("com.microsoft.GatherBlockQuantized", "bounds"): (
        "Tensor of int32/int64 indices, of any rank q. Values in [-s, s-1] select elements along an axis of size "
        "s. Unlike ONNX Gather, an out-of-range index produces zeros for the corresponding output slice."
    ),
    ("com.microsoft.GatherBlockQuantized", "output"): (
        "Tensor of rank r >= 1. Block-wise quantized.\n\n"
        "3. During the op execution, `data` and `indices` are first used to generate the quantized output. Then, "
        "`scales` and `zero_points` are used to dequantize the output."
    ),
}
"""The sentences of the ONNX operator specification that decide a finding, by operator and topic:
``bounds`` (which index values are valid), ``output`` (what the output is), ``reduction`` (every
update applied; ``reduction-add`` with the spec's loop); each paragraph is checked against the
schema text in a test."""
