"""A conformance suite for ONNX's indexing operators, as files any runtime's test harness reads.

``load`` reads a suite folder (ours, or any in ONNX's backend-test layout) and ``run`` runs it
on an engine of the checker (``gather-scatter run-tests``).
"""

from __future__ import annotations

from .load import SuiteError, SuiteTest, load_suite
from .run import run_tests

__all__ = ["SuiteError", "SuiteTest", "load_suite", "run_tests"]
