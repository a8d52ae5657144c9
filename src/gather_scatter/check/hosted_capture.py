"""Model mode on a model our evaluator cannot run: its indexing nodes' inputs captured through onnxruntime.

Real LLM exports hold onnxruntime-only operators beside their indexing nodes: onnxruntime-genai's
SimplifiedLayerNormalization and SkipSimplifiedLayerNormalization (registered by onnxruntime in
onnx's own domain, where onnx has no such operator), com.microsoft MatMulNBits,
GroupQueryAttention, RotaryEmbedding... Neither our kernels nor onnx.reference run them, so
model mode's first run (``capture.capture``) cannot. Such a model runs instead in the hosted
Session's engine with ``route="all"`` (:mod:`gather_scatter.models.hosted._engine`): onnxruntime runs every
other node, and every indexing node runs on our kernels inside its plan, recording what it saw
as in our own run. The whole model's expected outputs are that run's: onnxruntime's for the
non-indexing part, ours for the indexing nodes.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import onnx

from ..errors import GatherScatterError, one_line
from ..models import all_nodes
from ..rules.versions import FAMILY, normalize_domain
from .capture import ModelUsageError, NodeRun, capturing_ops, finish, recorder

__all__ = ["HOSTED", "OURS", "foreign_ops", "hosted_capture", "left_to_onnxruntime"]

#: How the report names who ran the model once, capturing the nodes' inputs and computing the
#: whole model's expected outputs (``result["captured_by"]``).
OURS = "our evaluator (our kernels, onnx.reference for the other operators)"
HOSTED = (
    "onnxruntime with route='all' (our kernels for the indexing nodes; onnxruntime computed the rest, "
    "and so the whole model's expected outputs)"
)

_INSTALL = 'pip install "gather_scatter[onnxruntime]"'
_EVALUATED_DOMAINS = ("", "ai.onnx.ml", "ai.onnx.preview.training")


def foreign_ops(model: onnx.ModelProto) -> list[str]:
    """Return the operators of ``model`` that our evaluator cannot run, each once, sorted.

    Those that are neither of the family, nor onnx's own (which onnx.reference runs), nor a
    call of a model-local function; main graph, subgraphs and functions.

    Parameters
    ----------
    model : onnx.ModelProto

    Returns
    -------
    list of str
        ``'SimplifiedLayerNormalization'`` for the default domain, ``'com.microsoft.MatMulNBits'``
        for another; empty where our evaluator runs every node.
    """
    functions = {(f.domain, f.name) for f in model.functions}
    found = set()
    for node in all_nodes(model):
        domain = normalize_domain(node.domain)
        if (domain, node.op_type) in FAMILY or (node.domain, node.op_type) in functions:
            continue
        if domain in _EVALUATED_DOMAINS and onnx.defs.has(node.op_type, domain):
            continue
        found.add(f"{domain + '.' if domain else ''}{node.op_type}")
    return sorted(found)


def _listed(ops: list[str], most: int = 4) -> str:
    return ", ".join(ops[:most]) + (f" and {len(ops) - most} more" if len(ops) > most else "")


def left_to_onnxruntime(path: str, ops: list[str]) -> frozenset[tuple[str, str]]:
    """Return the operators onnx's checker leaves to onnxruntime, for a model holding ``ops``.

    Parameters
    ----------
    path : str
        The model's file, for the message.
    ops : list of str
        As :func:`foreign_ops` returns them.

    Returns
    -------
    frozenset of (str, str)
        :func:`~gather_scatter.models.hosted._engine.onnxruntime_only_ops`; empty where ``ops`` is (our
        evaluator runs the model, and onnxruntime is not needed).

    Raises
    ------
    ModelUsageError
        onnxruntime is not installed: the message names the operators and the pip extra.
    """
    from ..models.hosted import import_onnxruntime, onnxruntime_only_ops

    if not ops:
        return frozenset()
    try:
        import_onnxruntime()  # importable now (onnxruntime_only_ops is cached)
        return onnxruntime_only_ops()
    except ModuleNotFoundError:
        raise ModelUsageError(
            f"{path!r} has operators that neither our kernels nor onnx.reference run ({_listed(ops)}): "
            "model mode then runs the model in onnxruntime, with our kernels for its indexing nodes, "
            f"to capture their inputs; that needs onnxruntime: {_INSTALL}"
        ) from None


def hosted_capture(
    model: onnx.ModelProto, path: str, feeds: Mapping[str, Any], ops: list[str], *, strict: bool
) -> tuple[list[NodeRun], list[Any] | None, GatherScatterError | None]:
    """Run ``model`` in onnxruntime with ``route="all"``, recording each indexing node's first call.

    Each indexing node (and each If, Loop, Scan or function call holding one) runs in our
    evaluator with our kernels, as ``capture.capture`` runs them; onnxruntime runs the rest.

    Parameters
    ----------
    model : onnx.ModelProto
        External data loaded; already checked (its onnxruntime-only operators left to it).
    path : str
        Its file (external data is read beside it).
    feeds : mapping of str to value
        As ``capture.make_feeds`` returns them.
    ops : list of str
        The operators our evaluator cannot run (:func:`foreign_ops`), for the messages.
    strict : bool
        As for ``capture.capture``.

    Returns
    -------
    runs, outputs, error
        As ``capture.capture`` returns them; ``outputs`` are the hosted run's.

    Raises
    ------
    ModelUsageError
        onnxruntime cannot load or run the model (a node neither it nor we run), or any other
        failure that is not one of our kernels raising on the model's inputs.
    """
    from ..models.hosted import Hosted

    runs, record = recorder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # strict=False: an off-spec node runs as the version it needs
        try:
            engine = Hosted(model, path=path, threads=None, route="all", strict=strict, new_ops=capturing_ops(record))
        except GatherScatterError as exc:  # onnxruntime cannot load a node, or one of ours refuses its attributes
            raise ModelUsageError(
                f"model mode runs a model with operators our evaluator cannot run ({_listed(ops)}) in onnxruntime, "
                f"our kernels running its indexing nodes, and this one cannot run so: {one_line(exc)}"
            ) from None
        outputs = None
        failure = None
        try:
            outputs = engine.run([o.name for o in model.graph.output], dict(feeds))
        except Exception as exc:  # noqa: BLE001 - ours (an invalid input) or onnxruntime's
            failure = exc
    return finish(runs, outputs, failure, who="the model's run in onnxruntime (our kernels for its indexing nodes)")
