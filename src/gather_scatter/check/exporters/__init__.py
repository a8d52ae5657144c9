"""``gather-scatter check --exporter torch``: find where PyTorch's ONNX exporters write the wrong graph.

Every torch operation that lowers to ONNX's indexing family (:data:`samples.OPERATIONS`) runs on
sample inputs in torch eager and through each exporter; the exported graph runs with our
evaluator, which is the spec's loop, so a difference from eager is the exporter's (or one of the
documented classes: a float sum within a tolerance, and torch's own unspecified writes).
"""

from .run import ExporterSelectionError, run_exporter_check
from .samples import OPERATIONS

__all__ = ["OPERATIONS", "ExporterSelectionError", "run_exporter_check"]
