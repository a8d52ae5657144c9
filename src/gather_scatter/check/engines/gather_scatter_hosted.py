"""gather_scatter hosted in onnxruntime (``Session(engine="onnxruntime")``) as a ``gather-scatter check`` engine.

onnxruntime runs the graph, our kernels the nodes it gets wrong or cannot run (the Session's
routing): the scoreboard's row for what a user of the fast engine gets. Named
``gather_scatter-hosted``. Its refusals are typed as :mod:`gather_scatter.check.engines.gather_scatter`'s
are (an onnxruntime error inside a segment is a :class:`~gather_scatter.NodeError`), so no
message fragment turns one into ``unsupported``; a gap is said as that module says it.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np

from ._protocol import RunOptions, distribution_version, import_engine
from .gather_scatter import session_run

name = "gather_scatter-hosted"
unsupported: tuple[str, ...] = ()  # a refusal is typed (GatherScatterError, NodeError): never a gap by its text


def available() -> str | None:
    """None when onnxruntime is installed, else what is missing and the pip extra to install."""
    if importlib.util.find_spec("onnxruntime") is not None:
        return None
    return f'engine {name!r} needs onnxruntime, which is not installed: pip install "gather_scatter[onnxruntime]"'


def prepare() -> None:
    """Import onnxruntime and the Session (EngineBroken where either fails)."""
    import_engine("onnxruntime")
    import_engine("gather_scatter.models.session")


def version() -> str:
    """Return gather_scatter's version and onnxruntime's: ``0.3.0 (onnxruntime 1.32.0)``."""
    import gather_scatter

    return f"{gather_scatter.__version__} (onnxruntime {distribution_version('onnxruntime')})"


def run(model: bytes, feeds: dict[str, np.ndarray], options: RunOptions) -> list[Any]:
    """Return the model's outputs from ``gather_scatter.Session(model, engine="onnxruntime")``.

    onnxruntime gets ``options.threads`` intra-op threads (None: the cores this process may use);
    the routing depends on the count.

    Raises
    ------
    GatherScatterError
        The model or its inputs break the spec, as our kernels or onnxruntime (a NodeError)
        found: the refusal.
    """
    return session_run(model, feeds, engine="onnxruntime", threads=options.threads or None)


def repro(model_path: str, inputs_path: str) -> str:
    """Python code that runs the written model on its inputs with the hosted Session and prints the outputs."""
    return f"import gather_scatter as gs; print(gs.Session({model_path!r}, engine='onnxruntime').run(None, i))"


standalone_requires = "gather_scatter and onnxruntime"


def standalone_run_source(threads: int | None) -> str:
    """Return Python source of ``run(model, feeds)`` with the hosted ``gather_scatter.Session``.

    For a standalone reproduction, onnxruntime on ``threads`` intra-op threads where given.
    """
    return (
        "import gather_scatter\n\n\n"
        "def run(model, feeds):\n"
        f'    session = gather_scatter.Session(model, engine="onnxruntime", threads={threads or None!r})\n'
        "    return session.run(None, feeds)\n"
    )
