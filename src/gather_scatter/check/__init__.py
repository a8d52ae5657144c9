"""``gather-scatter check``: find where other ONNX engines get these operators wrong.

``cases`` generates valid and invalid cases for every operator version (the test suite draws
from the same generators) and our kernels give the expected result or error (``runner``);
each engine, built in or a plugin found through the entry-point group ``gather_scatter.engines``,
runs out of process, restarted after a crash (``engines``); each finding is shrunk to a minimal
case (``shrink``) and written out with a one-line reproduction (``report``). Model mode
(``model.run_model_check``) replays each indexing node of a model on the engine with the tensors
the model gave it, and compares the whole model's outputs. Exporter mode
(``exporters.run_exporter_check``) exports torch's indexing operations with torch's ONNX exporters
and compares our evaluator's run of each graph with torch eager.
"""

from .exporters import run_exporter_check
from .model import run_model_check
from .operators import run_check
from .report import Interrupted

__all__ = ["Interrupted", "run_check", "run_exporter_check", "run_model_check"]
