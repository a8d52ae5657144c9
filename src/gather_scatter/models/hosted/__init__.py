"""The hosted engine of :class:`~gather_scatter.Session` (``engine="onnxruntime"``).

onnxruntime runs the graph, our kernels the nodes it gets wrong or cannot load.

``_engine`` (:class:`Hosted`: the built steps and their run), ``_partition`` (which nodes are
routed, and the onnxruntime segments around them), ``_routed`` (the routed steps: each node's
kernel called straight), ``_bodies`` (our If, Loop and Scan, each body hosted as a graph),
``_routes`` (the routing table, as data checked against the conformance suite) and ``_values``
(values across the boundary: NumPy arrays and onnxruntime's ``OrtValue``).
"""

from ._engine import Hosted, default_threads, import_onnxruntime, onnxruntime_only_ops

__all__ = ["Hosted", "default_threads", "import_onnxruntime", "onnxruntime_only_ops"]
