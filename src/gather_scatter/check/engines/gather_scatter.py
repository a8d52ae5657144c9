"""gather_scatter itself, our oracle (``Session(engine="reference")``), as a ``gather-scatter check`` engine.

Our kernels run every operator of the family, onnx.reference the others: the scoreboard's row
for the exactness it measures everyone else by. Our refusals are typed (every one a
:class:`~gather_scatter.GatherScatterError`), so no message fragment turns one into
``unsupported`` (``UnsupportedOpError`` holds one, in its very name): a refusal counts as the
engine refusing the input (``error``), as it should (an invalid test passes when refused), and
the detail names its class. Only an operator outside the family that onnx.reference lacks (a
NodeError caused by its NotImplementedError) is ``unsupported``: a gap, not a refusal.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._protocol import RunOptions, import_engine

name = "gather_scatter"
unsupported: tuple[str, ...] = ()  # our errors say "is not supported" of an unknown op: a refusal, not a gap


def available() -> str | None:
    """Return None: gather_scatter is this package, always installed with the checker."""
    return None


def prepare() -> None:
    """Import the Session and its evaluator, onnx.reference included (EngineBroken where that fails)."""
    import_engine("gather_scatter.models.session")


def version() -> str:
    """Return gather_scatter's version."""
    import gather_scatter

    return str(gather_scatter.__version__)


def run(model: bytes, feeds: dict[str, np.ndarray], options: RunOptions) -> list[Any]:
    """Return the model's outputs from ``gather_scatter.Session(model)`` (our oracle).

    ``options.threads``, where given, is our kernels' thread count (``set_num_threads``): the
    results are the same bits at any count.

    Raises
    ------
    GatherScatterError
        The model or its inputs break the spec (an index out of bounds, a shape, type or
        attribute the version does not allow): the refusal.
    """
    import gather_scatter

    if options.threads and gather_scatter.get_num_threads() != options.threads:
        gather_scatter.set_num_threads(options.threads)
    return session_run(model, feeds)


def session_run(model: bytes, feeds: dict[str, np.ndarray], **session: Any) -> list[Any]:
    """Return ``Session(model, **session).run(None, feeds)``, a gap said as a gap.

    Raises
    ------
    NotImplementedError
        A node outside the family that the engine running it lacks (a NodeError caused by a
        NotImplementedError: onnx.reference's "is unknown"): ``unsupported``.
    GatherScatterError
        Any other: the refusal, typed.
    """
    import gather_scatter

    try:
        return gather_scatter.Session(model, **session).run(None, feeds)
    except gather_scatter.NodeError as exc:
        if isinstance(exc.__cause__, NotImplementedError):
            raise NotImplementedError(str(exc)) from exc
        raise


def repro(model_path: str, inputs_path: str) -> str:
    """Python code that runs the written model on its inputs with our Session and prints the outputs."""
    return f"import gather_scatter as gs; print(gs.Session({model_path!r}).run(None, i))"


standalone_requires = "gather_scatter"


def standalone_run_source(threads: int | None) -> str:
    """Return Python source of ``run(model, feeds)`` with ``gather_scatter.Session``, for a standalone reproduction.

    Our kernels on ``threads`` threads where given.
    """
    config = f"\ngather_scatter.set_num_threads({threads})\n" if threads else ""
    return (
        f"import gather_scatter\n{config}\n\n"
        "def run(model, feeds):\n"
        "    return gather_scatter.Session(model).run(None, feeds)\n"
    )
