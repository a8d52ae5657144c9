"""The hosted engine of :class:`~gather_scatter.Session` (``engine="onnxruntime"``, issue 25).

onnxruntime runs the model, our kernels the nodes it gets wrong or cannot load.

At build, :mod:`._partition` routes the nodes (the rules of :mod:`._ort_routes`, plus every
node onnxruntime refuses to load, found by building its sessions) and cuts the rest into
maximal segments, one ``InferenceSession`` each, built once. Where nothing is routed, the
original model goes to onnxruntime unchanged. A run hands values from step to step as
onnxruntime's own ``OrtValue`` where a segment exchanges only tensors of numbers (no copy,
bfloat16 included), as NumPy arrays, lists and None where strings, sequences or optionals
cross; NumPy arrays made from ``OrtValue`` share its memory.
"""

from __future__ import annotations

import functools
import itertools
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx

from ...errors import GatherScatterError, ModelInputError, NodeError, one_line
from ...rules.versions import normalize_domain
from .._graph import all_nodes, imported_opsets, node_name, subgraphs
from ..plan import Plan, PlanEntry
from ._aliases import split_aliases
from ._partition import (
    FAMILY,
    PlanStep,
    holds_family,
    route_nodes,
    segment_model,
    steps,
    value_types,
)
from ._routed import RoutedStep
from ._segment import Aliases, OrtStep
from ._values import mode, to_numpy

__all__ = ["Hosted", "default_threads", "import_onnxruntime", "onnxruntime_only_ops"]

_INSTALL = 'the onnxruntime engine needs onnxruntime: pip install "gather_scatter[onnxruntime]"'


def default_threads() -> int:
    """Return the cores this process may use (its CPU affinity where the OS tells it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # macOS, Windows
        return max(1, os.cpu_count() or 1)


def import_onnxruntime() -> Any:
    """Import onnxruntime; raises ModuleNotFoundError naming the pip extra where it is missing."""
    try:
        import onnxruntime
    except ImportError as exc:
        raise ModuleNotFoundError(_INSTALL, name="onnxruntime") from exc
    return onnxruntime


@functools.cache
def onnxruntime_only_ops() -> frozenset[tuple[str, str]]:
    """Return the operators onnxruntime registers in onnx's own domain and onnx does not.

    These are ``(domain, op_type)`` pairs (``SimplifiedLayerNormalization``, written by
    onnxruntime-genai's model builder), read from the installed onnxruntime's schema registry.
    onnx's checker refuses these ("No Op registered"); a model the hosted engine runs is
    checked with them left to onnxruntime, which judges them as it loads the model.

    Raises
    ------
    ModuleNotFoundError
        onnxruntime is not installed (the message names the pip extra).
    """
    ort = import_onnxruntime()
    schemas = ort.capi.onnxruntime_pybind11_state.get_all_operator_schema()
    return frozenset(("", s.name) for s in schemas if s.domain in ("", "ai.onnx") and not onnx.defs.has(s.name))


# --- steps ----------------------------------------------------------------------------------

_NAMED = (
    re.compile(r"node with name '([^']+)'"),
    re.compile(r"Name:'([^']+)'"),
    re.compile(r"node \(([^)]+)\)", re.IGNORECASE),  # "Node (g) Op (Gather) [ShapeInferenceError] ..."
)


def _named_node(message: str) -> str | None:
    for pattern in _NAMED:
        match = pattern.search(message)
        if match:
            return match.group(1)
    return None


class _Refused(Exception):
    """onnxruntime refused to load a segment; ``message`` is its error."""

    def __init__(self, message: str, index: int | None) -> None:
        super().__init__(message)
        self.message = message
        self.index = index


class Hosted:
    """The built steps of an ``engine="onnxruntime"`` Session; ``run`` takes checked feeds."""

    def __init__(
        self,
        model: onnx.ModelProto,
        *,
        path: str | os.PathLike | None,
        threads: int | None,
        route: str,
        strict: bool,
        new_ops: Sequence[type] = (),
        refused_at_run: Mapping[int, str] | None = None,
        base_dir: str | None = None,
        nested: bool = False,
    ) -> None:
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise ValueError(f"threads must be a positive int or None, not {threads!r}")
        ort = self.ort = import_onnxruntime()
        self.c_ortvalue = ort.capi._pybind_state.OrtValue
        self.model = model
        self.new_ops = tuple(new_ops)  # operators our steps' evaluators use instead of ours (check's capturing ones)
        self.base_dir = os.path.dirname(os.path.abspath(os.fspath(path))) if path is not None else base_dir
        self.threads = threads or default_threads()
        self.nested = nested  # a body of a control-flow node (see body())
        self._constants: dict[str, Any] = {}
        types = self.types = value_types(model)
        self._path, self._route, self._strict = path, route, strict  # for the build of _run_refused and body()
        self._fallbacks: dict[frozenset[int], Hosted] = {}
        routed = route_nodes(model, types, threads=self.threads, ort_version=ort.__version__, route=route)
        routed.update(refused_at_run or {})
        for _ in range(len(model.graph.node) + 1):
            try:
                self._build(routed, types, path, strict)  # _Refused: the node it names, or probed
                self.routed = routed
                return
            except _Refused as refused:
                if refused.index is None or refused.index in routed:
                    raise ModelInputError(
                        f"onnxruntime cannot load this model ({refused.message}); engine='reference' runs it"
                    ) from None
                node = model.graph.node[refused.index]
                if not self._ours(node):
                    label = node_name(node, refused.index)
                    domain = node.domain or "ai.onnx"
                    raise ModelInputError(
                        f"onnxruntime's CPU cannot load node '{label}' ({node.op_type}, domain {domain}): "
                        f"{refused.message}; {node.op_type} is not an operator our kernels or onnx.reference run, "
                        "so neither route nor engine='reference' can run this model",
                        node=label,
                    ) from None
                routed = {**routed, refused.index: f"onnxruntime refuses to load it: {refused.message}"}
        raise AssertionError("unreachable: each retry routes one more node")

    # -- build --

    def _ours(self, node: onnx.NodeProto) -> bool:
        """Tell whether our evaluator can run ``node``.

        That is an operator of the family, one of onnx's own, or a call of a model-local
        function (whose body it runs, or refuses naming the node).
        """
        domain = normalize_domain(node.domain)
        if (domain, node.op_type) in FAMILY or any(
            (f.domain, f.name) == (node.domain, node.op_type) for f in self.model.functions
        ):
            return True
        return domain in ("", "ai.onnx.ml", "ai.onnx.preview.training") and onnx.defs.has(node.op_type, domain)

    def _options(self, segments: int) -> Any:
        options = self.ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 4  # its errors are raised as ours or NodeErrors: not printed too
        if self.base_dir is not None:
            options.add_session_config_entry("session.model_external_initializers_file_folder_path", self.base_dir)
        if segments > 1:
            # Several pools take turns: a pool spinning after its segment would hold the cores the next one needs.
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        return options

    def _build(self, routed: Mapping[int, str], types: Mapping[str, onnx.TypeProto], path: Any, strict: bool) -> None:
        model = self.model
        self.labels = {node_name(node, i): i for i, node in enumerate(model.graph.node)}
        plan = steps(model, routed)
        self.passthrough = not routed
        # Bodies hosted within routed steps hold sessions of their own, taking turns with these.
        bodies = sum(bool(subgraphs(model.graph.node[i])) for i in routed) + self.nested
        self.options = self._options(sum(step.engine == "onnxruntime" for step in plan) + bodies)
        self.steps: list[OrtStep | RoutedStep | Aliases] = []
        initializers = {t.name for t in model.graph.initializer}
        graph_inputs = {v.name for v in model.graph.input}
        overridable = frozenset(initializers & graph_inputs)  # fed or not: every other name a step reads is there
        # A main graph's outputs stay onnxruntime's copies; a body's go to our driver.
        kept = frozenset() if self.nested else frozenset(o.name for o in model.graph.output)
        self.aliases: dict[str, str] = {}  # an Identity's output resolved in Python -> the value it is
        reads: set[str] = set()  # what the steps read of the values: a driver feeds only these
        for number, step in enumerate(plan):
            if step.engine == "gather_scatter":
                self.steps.append(RoutedStep(self, step, strict))
                reads.update(step.inputs)
                continue
            eager: tuple[tuple[str, str], ...] = ()
            if not self.passthrough:
                step, aliases = split_aliases(model, step, initializers, kept)
                aliases = {out: self.aliases.get(root, root) for out, root in aliases.items()}
                self.aliases.update(aliases)
                # those a later step reads are put among the values after this step, the rest read at the end
                later = {n for after in plan[number + 1 :] for n in after.inputs}
                eager = tuple((out, root) for out, root in aliases.items() if out in later)
                reads.update(root for _, root in eager)
                if not step.outputs:
                    if eager:
                        self.steps.append(Aliases(eager))
                    continue
            reads.update(step.inputs)
            crossing = (*step.inputs, *step.outputs)
            fed = tuple(n for n in step.inputs if n not in initializers or n in graph_inputs)
            ortvalues = mode([n for n in crossing if n not in initializers], types)
            if self.passthrough:
                source: Any = os.fspath(path) if path is not None else model.SerializeToString()
            else:
                try:
                    source = segment_model(model, step, types, f"segment{number}").SerializeToString()
                except KeyError as exc:
                    raise ModelInputError(
                        f"onnx's inference gives no type for {exc.args[0]!r}, which crosses between onnxruntime and "
                        "our kernels: declare it in the model's value_info, or use engine='reference'",
                        value=exc.args[0],
                    ) from None
            try:
                self.steps.append(OrtStep(self, step, source, ortvalues, fed, overridable))
            except Exception as exc:  # noqa: BLE001 - onnxruntime's load errors are its own classes
                raise _Refused(one_line(exc), self._refused_node(one_line(exc), step, types)) from None
            if eager:
                self.steps.append(Aliases(eager))
        self.plan_steps = plan
        self.reads = frozenset(reads)

    def _refused_node(self, message: str, step: PlanStep, types: Mapping[str, onnx.TypeProto]) -> int | None:
        """Return the node onnxruntime refused to load, by its index in the main graph.

        That is the node its error names (or the one holding it in a subgraph), else the first
        of ``step``'s nodes onnxruntime refuses alone; None where neither finds one.
        """
        name = _named_node(message)
        if name is not None:
            index = self._main_node(name)
            if index is not None:
                return index
        return self._probe(step, types)

    def _main_node(self, name: str) -> int | None:
        if name in self.labels:
            return self.labels[name]
        for index, node in enumerate(self.model.graph.node):
            if any(inner.name == name for graph in subgraphs(node) for inner in all_nodes(graph)):
                return index
        return None

    def _probe(self, step: PlanStep, types: Mapping[str, onnx.TypeProto]) -> int | None:
        """Return the first node of ``step`` that onnxruntime refuses to load on its own."""
        for index in step.nodes:
            node = self.model.graph.node[index]
            reads = [n for n in node.input if n]
            made = [n for n in node.output if n]
            single = PlanStep("onnxruntime", (index,), tuple(reads), tuple(made))
            try:
                source = segment_model(self.model, single, types, "probe").SerializeToString()
                self.ort.InferenceSession(source, self._options(1), providers=["CPUExecutionProvider"])
            except KeyError:
                continue  # a type we cannot declare: not probed
            except Exception:  # noqa: BLE001 - refused
                return index
        return None

    def body(self, model: onnx.ModelProto) -> Hosted:
        """Return a control-flow node's body, made a model (``_bodies.body_model``), built as this model is."""
        return Hosted(
            model,
            path=None,
            base_dir=self.base_dir,
            threads=self.threads,
            route=self._route,
            strict=self._strict,
            new_ops=self.new_ops,
            nested=True,
        )

    # -- run --

    def constants(self, name: str) -> Any:
        """Return an initializer's value as NumPy (read once, external data from its file)."""
        if name not in self._constants:
            from onnx import numpy_helper

            tensor = next(t for t in self.model.graph.initializer if t.name == name)
            self._constants[name] = numpy_helper.to_array(tensor, self.base_dir or "")
        return self._constants[name]

    def run(self, names: Sequence[str], feeds: Mapping[str, Any], *, owned: bool = False) -> list[Any]:
        """Run the steps on checked ``feeds``; ``owned``: ``feeds`` is a dict of this run's
        own (a body's scope and inputs), which the steps then fill, not a copy of it."""
        values = feeds if owned and type(feeds) is dict else dict(feeds)
        fed = len(values)
        for step in self.steps:
            try:
                step.run(values)
            except NodeError as exc:
                if not isinstance(step, OrtStep):
                    raise
                # the feeds come first among the values (the steps' outputs are new names: SSA)
                return self._run_refused(step, exc, names, dict(itertools.islice(values.items(), fed)))
        c_ortvalue, ndarray, aliases = self.c_ortvalue, np.ndarray, self.aliases
        results = []
        for name in names:  # a loop, not a comprehension: one call less (a body's run: 4 a Loop)
            name = aliases.get(name, name)
            if name in values:
                v = values[name]
                results.append(v if type(v) is ndarray else to_numpy(v, c_ortvalue))
            else:
                results.append(self.constants(name))
        return results

    def _run_refused(self, step: OrtStep, exc: NodeError, names: Sequence[str], feeds: Mapping[str, Any]) -> list[Any]:
        """Run again, with the family's nodes of the onnxruntime ``step`` that raised ``exc`` routed.

        onnxruntime refuses some valid inputs at run time that no rule names yet, and refuses
        invalid ones with fewer facts than our errors have. Our kernels then decide: a result
        means onnxruntime refused a valid input, and this Session keeps that routing for its
        later runs (the plan says why); our error (an index out of bounds, with its position,
        value and valid range) is raised from onnxruntime's. An error of a node outside the
        family is onnxruntime's own, raised as it was.
        """
        functions = {(f.domain, f.name): f for f in self.model.functions}
        nodes = self.model.graph.node
        why = f"onnxruntime refused it at run time ({exc}); a rule of the routing table it lacks"
        refused = {i: why for i in step.step.nodes if holds_family(nodes[i], functions)}
        if not refused:
            raise exc
        key = frozenset(refused)
        if key not in self._fallbacks:
            self._fallbacks[key] = Hosted(
                self.model,
                path=self._path,
                threads=self.threads,
                route=self._route,
                strict=self._strict,
                new_ops=self.new_ops,
                refused_at_run=refused,
                base_dir=self.base_dir,
                nested=self.nested,
            )
        fallback = self._fallbacks[key]
        try:
            outputs = fallback.run(names, feeds)
        except GatherScatterError as ours:
            if isinstance(ours, NodeError) and ours.op not in {op for _, op in FAMILY}:
                raise exc from None  # onnxruntime's own error, not the family's
            raise ours from exc
        # A valid input onnxruntime refused: the routing stays, for every later run.
        self.steps, self.plan_steps, self.passthrough = fallback.steps, fallback.plan_steps, fallback.passthrough
        self.routed, self.labels = fallback.routed, fallback.labels
        self.aliases, self.reads = fallback.aliases, fallback.reads
        return outputs

    def node_error(self, exc: BaseException) -> NodeError:
        """Return onnxruntime's run-time error as a NodeError naming the node onnxruntime names."""
        message = one_line(exc)
        name = _named_node(message)
        index = self.labels.get(name) if name is not None else None
        if index is None:
            return NodeError(f"onnxruntime: {message}", node=name)
        node = self.model.graph.node[index]
        opset = imported_opsets(self.model).get(normalize_domain(node.domain))  # 'ai.onnx' imports '' too
        domain = node.domain or "ai.onnx"
        where = f"node '{name}' ({node.op_type}, domain {domain}" + (f", opset {opset})" if opset else ")")
        err = NodeError(f"{where}: onnxruntime: {message}", op=node.op_type, node=name)
        err.domain = domain
        return err

    def plan(self) -> Plan:
        nodes = self.model.graph.node
        entries = []
        for step in self.plan_steps:
            labels = tuple(node_name(nodes[i], i) for i in step.nodes)
            reasons = {node_name(nodes[i], i): reason for i, reason in step.reasons.items()}
            entries.append(PlanEntry(step.engine, labels, reasons, step.inputs, step.outputs))
        return Plan("onnxruntime", tuple(entries), self.threads, self.ort.__version__, self.passthrough)
