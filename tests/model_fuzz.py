"""Mutated models for tests/test_model_fuzz.py (issue 19), and the worker process that runs them.

Cases are made in the test's process: byte mutations of the model files (a seeded numpy
RNG) and structural mutations of their protos (hypothesis draws: dims, element types,
names, edges, attributes, opsets, external-data entries, initializers, op types). Each case
is a folder holding the mutated model, a copy of its external data and the name of its
inputs file. The worker (``python tests/model_fuzz.py CASES.jsonl RESULTS.jsonl START``)
runs each case through ``run_model``, ``infer_model_shapes`` and the CLI's ``run`` and
``shapes``, writing one ``start`` line before a case and one result line after it, so
the parent can tell which case hung or killed the process.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sys
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).parents[1]
SOURCES = [*sorted((ROOT / "tests" / "data").glob("*.onnx")),
           ROOT / "src" / "gather_scatter" / "data" / "decoder_step.onnx"]
MEMORY_LIMIT = 512 << 20  # GATHER_SCATTER_MEMORY_LIMIT in the worker
ADDRESS_LIMIT = 6 << 30  # RLIMIT_AS of the worker: a runaway allocation fails there, not the machine
RSS_LIMIT = 2 << 30  # a case whose peak RSS passes this is a finding


def inputs_of(source: Path) -> Path:
    return source.with_name(source.name.replace(".onnx", "_inputs.npz"))


# --- byte mutations -------------------------------------------------------------------------


def byte_mutation(raw: bytes, rng: np.random.Generator) -> tuple[bytes, str]:
    """One random byte-level mutation of ``raw`` and its description."""
    data = bytearray(raw)
    kind = rng.choice(["set", "bitflip", "truncate", "insert", "delete", "duplicate", "varint"])
    n = len(data)
    if kind == "set":
        at = sorted(rng.integers(0, n, size=int(rng.integers(1, 9))).tolist())
        for i in at:
            data[i] = int(rng.integers(0, 256))
        return bytes(data), f"bytes {at} set at random"
    if kind == "bitflip":
        at = sorted(rng.integers(0, n, size=int(rng.integers(1, 5))).tolist())
        for i in at:
            data[i] ^= 1 << int(rng.integers(0, 8))
        return bytes(data), f"one bit flipped in bytes {at}"
    if kind == "truncate":
        at = int(rng.integers(0, n))
        return bytes(data[:at]), f"truncated to {at} of {n} bytes"
    if kind == "insert":
        at, size = int(rng.integers(0, n)), int(rng.integers(1, 17))
        return bytes(data[:at]) + rng.bytes(size) + bytes(data[at:]), f"{size} random bytes inserted at {at}"
    if kind == "delete":
        at, size = int(rng.integers(0, n)), int(rng.integers(1, 33))
        return bytes(data[:at] + data[at + size:]), f"bytes [{at}, {at + size}) deleted"
    if kind == "duplicate":
        at, size = int(rng.integers(0, n)), int(rng.integers(1, 65))
        return bytes(data[:at + size] + data[at:]), f"bytes [{at}, {at + size}) duplicated"
    at = int(rng.integers(0, max(n - 10, 1)))  # a run of 0xff: varints and lengths far too large
    size = int(rng.integers(1, 11))
    data[at:at + size] = b"\xff" * size
    return bytes(data[:n]), f"bytes [{at}, {at + size}) set to 0xff"


# --- structural mutations -------------------------------------------------------------------

OP_TYPES = ["Gather", "GatherND", "GatherElements", "ScatterND", "ScatterElements", "Scatter", "TensorScatter",
            "Identity", "Reshape", "Expand", "ConstantOfShape", "Tile", "Loop", "If", "Range", "Resize", "NoSuchOp"]


def structural_mutation(model, draw) -> str:
    """Apply one drawn mutation to ``model`` in place; return its description. ``draw`` is a
    hypothesis ``data.draw``."""
    import hypothesis.strategies as st
    import onnx

    g = model.graph
    kind = draw(st.sampled_from(["dim", "elem_type", "rename", "edge", "attribute", "opset", "external",
                                 "initializer", "op_type", "drop_node", "dup_node", "domain", "graph_io"]))
    values = [*g.input, *g.output, *g.value_info]
    names = sorted({v for n in g.node for v in [*n.input, *n.output]} | {t.name for t in g.initializer})
    big_int = st.one_of(st.integers(-3, 70), st.sampled_from([2**31 - 1, 2**31, 2**32, 2**40, 2**62, 2**63 - 1,
                                                              -(2**63)]))
    if kind == "dim":
        shaped = [v for v in values if v.type.tensor_type.shape.dim]
        tensors = list(g.initializer)
        if tensors and (not shaped or draw(st.booleans())):
            t = draw(st.sampled_from(tensors))
            if not t.dims:
                t.dims.append(1)
                return f"dim: initializer {t.name!r} given dims (1,)"
            k = draw(st.integers(0, len(t.dims) - 1))
            t.dims[k] = draw(big_int)
            return f"dim: initializer {t.name!r}.dims[{k}] = {t.dims[k]}"
        v = draw(st.sampled_from(shaped or values))
        dims = v.type.tensor_type.shape.dim
        if not dims:
            dims.add().dim_value = draw(big_int)
            return f"dim: {v.name!r} given dim {dims[0].dim_value}"
        k = draw(st.integers(0, len(dims) - 1))
        how = draw(st.sampled_from(["value", "param", "clear", "add", "remove"]))
        if how == "value":
            dims[k].dim_value = draw(big_int)
            return f"dim: {v.name!r}.dim[{k}] = {dims[k].dim_value}"
        if how == "param":
            dims[k].dim_param = draw(st.sampled_from(["N", "", "batch", "x" * 300]))
            return f"dim: {v.name!r}.dim[{k}] = {dims[k].dim_param!r}"
        if how == "clear":
            dims[k].Clear()
            return f"dim: {v.name!r}.dim[{k}] cleared"
        if how == "add":
            dims.add().dim_value = draw(big_int)
            return f"dim: {v.name!r} one dim added"
        del dims[k]
        return f"dim: {v.name!r}.dim[{k}] removed"
    if kind == "elem_type":
        elem = draw(st.one_of(st.integers(0, 27), st.sampled_from([-1, 99, 2**31 - 1])))
        if g.initializer and draw(st.booleans()):
            t = draw(st.sampled_from(list(g.initializer)))
            t.data_type = elem
            return f"elem_type: initializer {t.name!r}.data_type = {elem}"
        v = draw(st.sampled_from(values))
        v.type.tensor_type.elem_type = elem
        return f"elem_type: {v.name!r}.elem_type = {elem}"
    if kind == "rename":
        old = draw(st.sampled_from(names))
        new = draw(st.one_of(st.sampled_from(names), st.sampled_from(["", "fresh", "a" * 1000, "\u00e9\u2603"])))
        scope = draw(st.sampled_from(["everywhere", "one use"]))
        hits = [(n.input, i) for n in g.node for i, v in enumerate(n.input) if v == old]
        hits += [(n.output, i) for n in g.node for i, v in enumerate(n.output) if v == old]
        hits += [(t, None) for t in [*g.initializer, *values] if t.name == old]
        if scope == "one use" and hits:
            hits = [hits[draw(st.integers(0, len(hits) - 1))]]
        for container, i in hits:
            if i is None:
                container.name = new
            else:
                container[i] = new
        return f"rename: {old!r} -> {new!r} ({scope}, {len(hits)} places)"
    if kind == "edge":
        n = draw(st.sampled_from(list(g.node)))
        how = draw(st.sampled_from(["swap", "feed", "drop", "add", "later"]))
        if how == "swap" and len(n.input) > 1:
            a, b = draw(st.integers(0, len(n.input) - 1)), draw(st.integers(0, len(n.input) - 1))
            n.input[a], n.input[b] = n.input[b], n.input[a]
            return f"edge: node {n.name!r} ({n.op_type}) inputs {a} and {b} swapped"
        if how == "feed" and n.input:
            k = draw(st.integers(0, len(n.input) - 1))
            n.input[k] = draw(st.sampled_from(names))
            return f"edge: node {n.name!r} ({n.op_type}).input[{k}] = {n.input[k]!r}"
        if how == "drop" and n.input:
            k = draw(st.integers(0, len(n.input) - 1))
            del n.input[k]
            return f"edge: node {n.name!r} ({n.op_type}).input[{k}] removed"
        if how == "later":  # an input from a node downstream: a cycle or an unsorted graph
            at = list(g.node).index(n)
            later = [o for m in list(g.node)[at:] for o in m.output if o]
            if later and n.input:
                k = draw(st.integers(0, len(n.input) - 1))
                n.input[k] = draw(st.sampled_from(later))
                return f"edge: node {n.name!r} ({n.op_type}).input[{k}] = {n.input[k]!r}, a later value"
        n.input.append(draw(st.sampled_from([*names, ""])))
        return f"edge: node {n.name!r} ({n.op_type}) given input {n.input[-1]!r}"
    if kind == "attribute":
        n = draw(st.sampled_from(list(g.node)))
        how = draw(st.sampled_from(["int", "string", "remove", "add", "retype", "ints"]))
        attrs = list(n.attribute)
        if how == "remove" and attrs:
            a = draw(st.sampled_from(attrs))
            n.attribute.remove(a)
            return f"attribute: node {n.name!r} ({n.op_type}) attribute {a.name!r} removed"
        if how == "retype" and attrs:
            a = draw(st.sampled_from(attrs))
            a.type = draw(st.integers(0, 14))
            return f"attribute: node {n.name!r} ({n.op_type}) attribute {a.name!r}.type = {a.type}"
        name = draw(st.sampled_from([a.name for a in attrs] + ["axis", "reduction", "batch_dims", "mode", "axes",
                                                               "value", "to", "perm"]))
        for a in attrs:
            if a.name == name:
                n.attribute.remove(a)
        if how == "string":
            value = draw(st.sampled_from(["none", "add", "mul", "max", "min", "sum", "", "linear", "circular"]))
            n.attribute.append(onnx.helper.make_attribute(name, value))
        elif how == "ints":
            value = draw(st.lists(big_int, max_size=4))
            n.attribute.append(onnx.helper.make_attribute(name, value, attr_type=onnx.AttributeProto.INTS))
        elif how == "add" and name == "value":
            value = draw(st.sampled_from([[2**40], [0], [-1]]))
            tensor = onnx.helper.make_tensor("v", onnx.TensorProto.INT64, [len(value)], value)
            n.attribute.append(onnx.helper.make_attribute(name, tensor))
        else:
            value = draw(big_int)
            n.attribute.append(onnx.helper.make_attribute(name, value))
        return f"attribute: node {n.name!r} ({n.op_type}) attribute {name!r} = {value!r}"
    if kind == "opset":
        how = draw(st.sampled_from(["version", "add", "remove", "domain"]))
        if how == "version" and model.opset_import:
            o = draw(st.sampled_from(list(model.opset_import)))
            o.version = draw(st.one_of(st.integers(-2, 30), st.sampled_from([2**31, 2**62, -(2**63)])))
            return f"opset: domain {o.domain!r} version {o.version}"
        if how == "remove" and model.opset_import:
            del model.opset_import[0]
            return "opset: first opset import removed"
        if how == "domain" and model.opset_import:
            o = model.opset_import[0]
            o.domain = draw(st.sampled_from(["ai.onnx", "com.microsoft", "ai.onnx.ml", "x"]))
            return f"opset: first opset import's domain = {o.domain!r}"
        o = model.opset_import.add()
        o.domain = draw(st.sampled_from(["", "ai.onnx", "com.microsoft", "x"]))
        o.version = draw(st.integers(-1, 30))
        return f"opset: import ({o.domain!r}, {o.version}) added"
    if kind == "external":
        external = [t for t in g.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
        if not external:  # move a stored initializer to external data that is not there
            if not g.initializer:
                return "external: no initializer (unchanged)"
            t = draw(st.sampled_from(list(g.initializer)))
            t.data_location = onnx.TensorProto.EXTERNAL
            entry = t.external_data.add()
            entry.key, entry.value = "location", draw(st.sampled_from(["model.onnx", "missing.bin", "..", "."]))
            return f"external: initializer {t.name!r} marked external at {entry.value!r}"
        t = draw(st.sampled_from(external))
        key = draw(st.sampled_from(["location", "offset", "length", "checksum", "bogus"]))
        value = (draw(st.sampled_from(["../escape.data", "/etc/passwd", "", "missing.data", ".", "sub/../x.data",
                                       "model.onnx", "C:\\x.data", "\x00"]))
                 if key == "location" else str(draw(st.one_of(big_int, st.sampled_from(["-5", "x", "1e3", "", " 4"])))))
        entries = [e for e in t.external_data if e.key == key]
        how = draw(st.sampled_from(["set", "remove", "duplicate"]))
        if how == "remove" and entries:
            t.external_data.remove(entries[0])
            return f"external: initializer {t.name!r} entry {key!r} removed"
        if how == "set" and entries:
            entries[0].value = value
        else:
            e = t.external_data.add()
            e.key, e.value = key, value
        return f"external: initializer {t.name!r} entry {key!r} = {value!r} ({how})"
    if kind == "initializer":
        if not g.initializer:
            return "initializer: none (unchanged)"
        t = draw(st.sampled_from(list(g.initializer)))
        how = draw(st.sampled_from(["raw_short", "raw_long", "typed", "clear", "remove", "duplicate"]))
        if how == "raw_short" and t.raw_data:
            t.raw_data = t.raw_data[: draw(st.integers(0, max(len(t.raw_data) - 1, 0)))]
        elif how == "raw_long":
            t.raw_data = bytes(t.raw_data) + bytes(draw(st.integers(1, 64)))
        elif how == "typed":
            t.int64_data.extend(draw(st.lists(big_int, min_size=1, max_size=4)))
        elif how == "clear":
            t.ClearField("raw_data")
        elif how == "remove":
            g.initializer.remove(t)
        else:
            g.initializer.add().CopyFrom(t)
        return f"initializer: {t.name!r} {how}"
    if kind == "op_type":
        n = draw(st.sampled_from(list(g.node)))
        old, n.op_type = n.op_type, draw(st.sampled_from(OP_TYPES))
        return f"op_type: node {n.name!r} {old} -> {n.op_type}"
    if kind == "drop_node":
        n = draw(st.sampled_from(list(g.node)))
        g.node.remove(n)
        return f"drop_node: node {n.name!r} ({n.op_type}) removed"
    if kind == "dup_node":
        n = draw(st.sampled_from(list(g.node)))
        at = draw(st.integers(0, len(g.node)))
        g.node.insert(at, n)
        return f"dup_node: node {n.name!r} ({n.op_type}) copied to position {at}"
    if kind == "domain":
        n = draw(st.sampled_from(list(g.node)))
        n.domain = draw(st.sampled_from(["ai.onnx", "com.microsoft", "x", "ai.onnx.ml"]))
        return f"domain: node {n.name!r} ({n.op_type}).domain = {n.domain!r}"
    how = draw(st.sampled_from(["drop input", "drop output", "add output", "output twice"]))
    if how == "drop input" and g.input:
        v = g.input[0]
        g.input.remove(v)
        return f"graph_io: graph input {v.name!r} removed"
    if how == "drop output" and g.output:
        v = g.output[0]
        g.output.remove(v)
        return f"graph_io: graph output {v.name!r} removed"
    if how == "output twice" and g.output:
        g.output.add().CopyFrom(g.output[0])
        return f"graph_io: graph output {g.output[0].name!r} listed twice"
    name = draw(st.sampled_from([*names, "nowhere"]))
    g.output.append(onnx.helper.make_tensor_value_info(name, draw(st.integers(0, 16)), None))
    return f"graph_io: graph output {name!r} added"


def bad_utf8(raw: bytes, names: list[str], pick: int) -> tuple[bytes, str]:
    """``raw`` with every occurrence of one name's bytes given an invalid UTF-8 first byte."""
    long_names = sorted(n for n in names if len(n.encode()) >= 5)
    if not long_names:
        return raw, "bad_utf8: no name long enough (unchanged)"
    name = long_names[pick % len(long_names)].encode()
    return raw.replace(name, b"\xff" + name[1:]), f"bad_utf8: name {name.decode()!r} made invalid UTF-8"


# --- cases on disk --------------------------------------------------------------------------


def write_case(root: Path, index: int, source: Path, raw: bytes, description: str, *, ort: bool) -> dict:
    """The case's folder: the model under its source's name, its external data copied."""
    folder = root / f"{index:05d}"
    folder.mkdir(parents=True)
    (folder / source.name).write_bytes(raw)
    data = source.with_name(source.name + ".data")
    if data.exists():
        shutil.copyfile(data, folder / data.name)
    return {"i": index, "model": str(folder / source.name), "inputs": str(inputs_of(source)),
            "what": f"{source.name}: {description}", "ort": ort}


# --- the worker -----------------------------------------------------------------------------


def _api(call, problems, label):
    from gather_scatter.errors import GatherScatterError

    try:
        call()
        return "accepted"
    except GatherScatterError as exc:
        return type(exc).__name__
    except BaseException as exc:  # noqa: BLE001 - the finding
        problems.append(f"{label}: untyped {type(exc).__name__}: "
                        + " | ".join(traceback.format_exception_only(type(exc), exc)).strip()[:500])
        return f"untyped {type(exc).__name__}"


def _cli(argv, problems):
    from gather_scatter.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code
        except BaseException:  # noqa: BLE001 - the finding
            rc = "raised"
            traceback.print_exc(file=err)
    text = err.getvalue()
    if rc not in (0, 2) or "Traceback" in text:
        problems.append(f"cli {argv[0]}: exit {rc}, stderr: {text[-800:]}")
    return rc


def _ort_compare(case, ours) -> str:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.log_severity_level = 4
    try:
        session = ort.InferenceSession(case["model"], options, providers=["CPUExecutionProvider"])
        feeds = dict(np.load(case["inputs"]))
        names = [o.name for o in session.get_outputs()]
        theirs = dict(zip(names, session.run(None, feeds)))
    except Exception:  # noqa: BLE001 - onnxruntime refuses it
        return "ort refused"
    if list(theirs) != list(ours):
        return "differ"
    for name, value in ours.items():
        a, b = np.asarray(value), np.asarray(theirs[name])
        if a.shape != b.shape or a.dtype != b.dtype:
            return "differ"
        if a.dtype.kind in "fc" and not np.allclose(a, b, rtol=1e-4, atol=1e-5, equal_nan=True):
            return "differ"
        if a.dtype.kind not in "fc" and not np.array_equal(a, b):
            return "differ"
    return "agree"


def _peak_rss() -> int:
    """This process's peak resident memory, in bytes: VmHWM, its own address space's high-water
    mark. (getrusage's ru_maxrss also keeps the parent's RSS at the fork that started this
    worker: after a test run had grown pytest to GBs, every case read as a finding.)"""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # not Linux: no fork inherited it


def run_case(case: dict) -> dict:
    from gather_scatter import infer_model_shapes, run_model

    problems: list[str] = []
    start = time.perf_counter()
    feeds = dict(np.load(case["inputs"]))
    ours = {}

    def run():
        ours.update(run_model(case["model"], feeds))

    result = {
        "i": case["i"],
        "run_model": _api(run, problems, "run_model"),
        "infer_model_shapes": _api(lambda: infer_model_shapes(case["model"]), problems, "infer_model_shapes"),
        "cli_run": _cli(["run", case["model"], "--inputs", case["inputs"]], problems),
        "cli_shapes": _cli(["shapes", case["model"]], problems),
    }
    result["seconds"] = time.perf_counter() - start
    rss = _peak_rss()
    if rss > RSS_LIMIT:
        problems.append(f"peak RSS {rss >> 20} MiB > {RSS_LIMIT >> 20} MiB")
    result["rss_mib"] = rss >> 20
    result["problems"] = problems
    result["outputs"] = ours  # for the comparison with onnxruntime, not written out
    return result


def worker(cases_path: str, results_path: str, start: int) -> None:
    import resource
    import warnings

    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_LIMIT, ADDRESS_LIMIT))
    warnings.simplefilter("ignore")
    cases = [json.loads(line) for line in Path(cases_path).read_text().splitlines()]
    _warm_up()
    with open(results_path, "a") as out:
        for case in cases[start:]:
            out.write(json.dumps({"start": case["i"]}) + "\n")
            out.flush()
            result = run_case(case)
            ours = result.pop("outputs")
            out.write(json.dumps(result) + "\n")
            out.flush()
            if case["ort"] and result["run_model"] == "accepted":  # a crash here is onnxruntime's
                out.write(json.dumps({"ort_start": case["i"]}) + "\n")
                out.flush()
                out.write(json.dumps({"ort_of": case["i"], "ort": _ort_compare(case, ours)}) + "\n")
                out.flush()


def _warm_up() -> None:
    """Each source model run once, untimed: the first run in a process loads onnx.reference's
    operators (about a second), which would otherwise count as the first accepted case's."""
    from gather_scatter import run_model

    for source in SOURCES:
        run_model(source, dict(np.load(inputs_of(source))))


def worker_env() -> dict:
    env = dict(os.environ)
    env.update(GATHER_SCATTER_MEMORY_LIMIT=str(MEMORY_LIMIT), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               MKL_NUM_THREADS="1", PYTHONFAULTHANDLER="1")
    return env


if __name__ == "__main__":
    worker(sys.argv[1], sys.argv[2], int(sys.argv[3]))
