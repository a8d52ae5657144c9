"""Running whole ONNX models: intake, Session and run_model, shape inference, the two engines.

Intake, before anything runs: ``_model_check`` (a model file refused in one line: structure,
strings, external data via ``_external_data``, off-spec nodes of the family), ``_feeds`` (each
input checked against its graph input's type) and ``_arrays_io`` (the one codec of arrays in
.npy/.npz files, ml_dtypes and strings included: ``save_npz``, ``read_npz``/``load_npz``, and
``decode_source`` for a standalone script's lines). ``_graph`` is the one walk over a model's
subgraphs and functions. ``session`` builds a model once for one of the engines, ``reference/``
(onnx.reference with our operators) or ``hosted/`` (onnxruntime, with our kernels on the nodes it
gets wrong); ``plan`` is what each runs where. ``shape_inference`` infers a model's shapes with
our rules for the family's nodes.
"""

from ._arrays_io import (
    decode_source,
    load,
    load_npz,
    not_numpy,
    onnx_type_of,
    read_npz,
    save_npz,
    storable,
    typed_inputs,
)
from ._feeds import check_inputs, type_str
from ._graph import all_nodes
from ._model_check import check_model, load_model, off_spec_nodes
from .plan import Plan, PlanEntry
from .session import NodeArg, Session, run_model
from .shape_inference import check_for_inference, infer_model_shapes, node_shapes

__all__ = [
    "NodeArg",
    "Plan",
    "PlanEntry",
    "Session",
    "all_nodes",
    "check_for_inference",
    "check_inputs",
    "check_model",
    "decode_source",
    "infer_model_shapes",
    "load",
    "load_model",
    "load_npz",
    "node_shapes",
    "not_numpy",
    "off_spec_nodes",
    "onnx_type_of",
    "read_npz",
    "run_model",
    "save_npz",
    "storable",
    "type_str",
    "typed_inputs",
]
