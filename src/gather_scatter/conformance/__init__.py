"""The conformance suite: ONNX backend-test folders for the indexing operators (issue 28).

:func:`export_tests` writes the suite (``gather-scatter export-tests``); the cases come from
:func:`build_suite`. :func:`load_suite` reads a suite folder (ours, or any in ONNX's backend-test
layout) and :func:`run_tests` runs it on an engine of the checker (``gather-scatter run-tests``).
See ``docs/conformance.md`` for the layout, MANIFEST fields and tags.
"""

from __future__ import annotations

from .export import SuiteDirError, export_tests
from .load import SuiteError, SuiteTest, load_suite
from .run import run_tests
from .suite import SuiteCase, SuiteSelectionError, build_suite
from .tags import tags_of

__all__ = [
    "SuiteCase",
    "SuiteDirError",
    "SuiteError",
    "SuiteSelectionError",
    "SuiteTest",
    "build_suite",
    "export_tests",
    "load_suite",
    "run_tests",
    "tags_of",
]
