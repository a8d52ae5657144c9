"""com.microsoft GatherBlockQuantized in real LLM exports, through the hosted Session (issue 27,
part 2a).

The models in ``tests/data/quantized`` were built by onnxruntime-genai's model builder,
onnxruntime's ``matmul_nbits_quantizer`` and Olive from tiny random-weight Hugging Face configs
(``examples/build_quantized_models.py`` rebuilds them and documents each); they hold
onnxruntime-only operators (GroupQueryAttention, MatMulNBits, SimplifiedLayerNormalization,
SkipSimplifiedLayerNormalization), so only ``Session(engine="onnxruntime")`` runs them. Their
tests need onnxruntime only; the builds of the other architectures (Llama, Phi-3, Gemma, an
untied Qwen2) need onnxruntime-genai, transformers and torch, and are skipped without them.

Figures (onnxruntime 1.32, 2 threads for our Session, 1 for the stored outputs): the
embedding node's output equal to onnxruntime's bit for bit in every model, float16 included
(0 ulp); the logits and KV caches equal to onnxruntime's alone bit for bit through
``route="all"`` and ``route="needed"``. The logits are compared within rtol 1e-5, atol 1e-6 all
the same: with ``route="all"`` onnxruntime runs the nodes after the embedding as a session of
their own, whose graph optimizer sees the embedding as an input, so a fusion across it (none
in these models today) would change the float32 rounding of what follows.

The stored outputs are onnxruntime's on the machine that built them. The embedding, which our
kernel computes, is compared with them bit for bit; the logits and KV caches come out of
onnxruntime's MatMulNBits, GroupQueryAttention and norms, whose kernels onnxruntime picks by CPU
(AVX2, AVX-512, VNNI), so they are compared with onnxruntime run here, on this CPU.
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import ml_dtypes
import numpy as np
import onnx
import pytest

import gather_scatter as gs
from gather_scatter import ArityError, ModelInputError, NodeError, Session, run_model

ort = pytest.importorskip("onnxruntime", reason="the hosted Session runs these models in onnxruntime")

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "quantized"
_spec = importlib.util.spec_from_file_location("build_quantized_models", ROOT / "examples/build_quantized_models.py")
build = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
sys.modules.setdefault("build_quantized_models", build)
_spec.loader.exec_module(build)  # type: ignore[union-attr]

# The stored models onnxruntime's CPU runs, and what each covers.
RUNS = [
    "qwen2_h64_int4",  # genai, tied: packed uint8 through a Reshape, float scales, blocks of 32
    "qwen2_h80_int4",  # hidden 80 padded to 96 (3 blocks), then a Slice
    "qwen2_h64_int4_fp16",  # -e cuda: float16 scales and output
    "quantizer_int4",  # matmul_nbits_quantizer: int4 data, 48 columns (a partial last block)
    "quantizer_uint4_zp",  # --symmetric False: uint4 data and uint4 zero points
    "olive_rtn_int4",  # Olive's RTN pass: packed uint8 4-bit initializer, the default zero point 8
    "olive_int8",  # Olive's QuantizeEmbeddingInt8: 8-bit uint8 data, zero points 128
]
ROUTES = ["all", "needed"]
RTOL, ATOL = 1e-5, 1e-6
GQA, NBITS, NORM = "GroupQueryAttention", "MatMulNBits", "SimplifiedLayerNormalization"


def load(name: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The stored model, its inputs and onnxruntime's stored outputs (empty where it has none)."""
    model = onnx.load(DATA / f"{name}.onnx")
    with np.load(DATA / f"{name}_inputs.npz") as archive:
        inputs = dict(archive)
    outputs_path = DATA / f"{name}_outputs.npz"
    want = {}
    if outputs_path.exists():
        with np.load(outputs_path) as archive:
            want = dict(archive)
    return model, inputs, want


def run_hosted(model: onnx.ModelProto, inputs: dict, route: str) -> tuple[dict[str, np.ndarray], Session]:
    """Our hosted Session's outputs of ``model`` with its embedding node's output as ``embedding``."""
    probe = build.with_embedding_output(model)
    session = Session(probe, engine="onnxruntime", route=route)
    names = [o.name for o in probe.graph.output]
    got = dict(zip(names, session.run(None, inputs), strict=True))
    got["embedding"] = got.pop(build.embedding_node(model).output[0])
    return got, session


def ulps(a: np.ndarray, b: np.ndarray) -> int:
    """The largest distance in units in the last place between two float arrays of one type."""
    assert a.dtype == b.dtype and a.shape == b.shape
    bits = {2: np.int16, 4: np.int32}[a.dtype.itemsize]
    ia, ib = a.view(bits).astype(np.int64), b.view(bits).astype(np.int64)
    # Map the sign-magnitude bit patterns onto a line (-0 next to +0).
    top = 1 << (8 * a.dtype.itemsize - 1)
    ia, ib = np.where(ia < 0, -top - ia, ia), np.where(ib < 0, -top - ib, ib)
    return int(np.abs(ia - ib).max(initial=0))


def _reshape_target(model: onnx.ModelProto, name: str) -> np.ndarray:
    for node in model.graph.node:
        if node.op_type == "Constant" and node.output[0] == name:
            return onnx.numpy_helper.to_array(node.attribute[0].t)
    return onnx.numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == name))


def embedding_table(model: onnx.ModelProto) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, dict]:
    """As :func:`table`, with the Reshape's target read where it is a Constant node."""
    node = build.embedding_node(model)
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    data_name = node.input[0]
    if data_name in inits:
        data = inits[data_name]
    else:
        (reshape,) = [n for n in model.graph.node if n.output and n.output[0] == data_name]
        data = inits[reshape.input[0]].reshape(_reshape_target(model, reshape.input[1]))
    zero_points = inits[node.input[3]] if len(node.input) > 3 and node.input[3] else None
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    return data, inits[node.input[2]], zero_points, attrs


# --- the stored models ------------------------------------------------------------------------


def test_the_stored_models_are_small_and_each_writes_the_node():
    total = 0
    for spec in build.MODELS:
        path = DATA / f"{spec.name}.onnx"
        assert path.stat().st_size < 1 << 20, path
        total += sum(p.stat().st_size for p in DATA.glob(f"{spec.name}*"))
        model = onnx.load(path, load_external_data=False)
        node = build.embedding_node(model)
        assert node.domain == "com.microsoft" and node.input[1] == "input_ids"
        assert (spec.name in RUNS) == spec.runs_on_cpu == (DATA / f"{spec.name}_outputs.npz").exists()
    assert total < 3 << 20
    # The padded export slices the padding off after the node.
    model = onnx.load(DATA / "qwen2_h80_int4.onnx")
    data, scales, _, attrs = embedding_table(model)
    assert data.shape == (1000, 48) and scales.shape == (1000, 3) and attrs["block_size"] == 32  # 96 columns
    (slicer,) = [n for n in model.graph.node if build.embedding_node(model).output[0] in n.input]
    assert slicer.op_type == "Slice"
    data, scales, zero_points, _ = embedding_table(onnx.load(DATA / "quantizer_uint4_zp.onnx"))
    assert (data.dtype, scales.shape, zero_points.dtype) == (ml_dtypes.uint4, (1000, 2), ml_dtypes.uint4)
    data, _, zero_points, attrs = embedding_table(onnx.load(DATA / "olive_int8.onnx"))
    assert (data.dtype, data.shape, attrs["bits"], zero_points.dtype) == (np.uint8, (1000, 64), 8, np.uint8)


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", RUNS)
def test_the_embedding_equals_onnxruntimes(name, route):
    model, inputs, want = load(name)
    live = build.onnxruntime_outputs(model, inputs)
    got, session = run_hosted(model, inputs, route)
    node = build.embedding_node(model)
    label = node.name
    if route == "all":
        assert session.plan.routed[label] == "route='all': every indexing node runs on our kernels"
    else:  # onnxruntime runs float and float16 right: nothing is routed, the model runs unchanged
        assert session.plan.routed == {} and session.plan.passthrough
    for expected in (want["embedding"], live["embedding"]):
        assert got["embedding"].dtype == expected.dtype
        if expected.dtype == np.float16:
            assert ulps(got["embedding"], expected) <= 1  # measured: 0
        else:
            np.testing.assert_array_equal(got["embedding"], expected)
    # Our kernel called directly on the node's table gives the same rows.
    data, scales, zero_points, attrs = embedding_table(model)
    direct = gs.gather_block_quantized(data, inputs["input_ids"], scales, zero_points, **attrs)
    np.testing.assert_array_equal(direct, got["embedding"])


@pytest.mark.parametrize("name", RUNS)
def test_every_row_of_the_table_equals_onnxruntimes_node(name):
    # The model's node alone, on its real table: every id in [-V, V) and the out-of-range ones,
    # onnxruntime at 1 and 2 threads against our kernel.
    model, _, _ = load(name)
    data, scales, zero_points, attrs = embedding_table(model)
    inits = [onnx.numpy_helper.from_array(data, "data"), onnx.numpy_helper.from_array(scales, "scales")]
    names = ["data", "ids", "scales"]
    if zero_points is not None:
        inits.append(onnx.numpy_helper.from_array(zero_points, "zero_points"))
        names.append("zero_points")
    node = onnx.helper.make_node("GatherBlockQuantized", names, ["rows"], domain="com.microsoft", **attrs)
    vi = onnx.helper.make_tensor_value_info
    elem = onnx.helper.np_dtype_to_tensor_dtype(scales.dtype)
    ids_in, rows_out = vi("ids", onnx.TensorProto.INT64, ["n"]), vi("rows", elem, None)
    graph = onnx.helper.make_graph([node], "g", [ids_in], [rows_out], inits)
    one = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 21),
                                                       onnx.helper.make_opsetid("com.microsoft", 1)])
    vocab = data.shape[0]
    ids = np.concatenate([np.arange(-vocab, vocab), build.IDS[0][list(build.OUT_OF_RANGE)]]).astype(np.int64)
    ours = gs.gather_block_quantized(data, ids, scales, zero_points, **attrs)
    for threads in (1, 2):
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        session = ort.InferenceSession(one.SerializeToString(), options, providers=["CPUExecutionProvider"])
        (theirs,) = session.run(None, {"ids": ids})
        assert theirs.dtype == ours.dtype and theirs.shape == ours.shape
        if ours.dtype == np.float16:
            assert ulps(ours, theirs) <= 1  # measured: 0 (every row of the float16 table)
        else:
            np.testing.assert_array_equal(ours, theirs)
    assert not ours[2 * vocab :].any()


@pytest.mark.parametrize("name", RUNS)
def test_out_of_range_ids_give_zero_rows_and_minus_one_is_the_last_row(name):
    model, inputs, want = load(name)
    got, _ = run_hosted(model, inputs, "all")
    ids = inputs["input_ids"][0]
    assert [int(ids[i]) for i in build.OUT_OF_RANGE] == [1000, 2000, -1001, 2**31, -(2**63), 2**63 - 1]
    for rows in (got["embedding"][0], want["embedding"][0]):
        for i in build.OUT_OF_RANGE:
            assert not rows[i].any() and not np.signbit(rows[i]).any(), (name, int(ids[i]))  # +0.0
        np.testing.assert_array_equal(rows[4], rows[3])  # -1 is row 999
        np.testing.assert_array_equal(rows[5], rows[0])  # -1000 is row 0
        assert rows[1].any() and rows[3].any()  # (row 0, the padding token's, is zero in these models)
    data, scales, zero_points, attrs = embedding_table(model)
    for bad in (1000, 2000, -1001, 2**31, -(2**63), 2**63 - 1):
        for dtype in (np.int64, np.int32):
            if np.iinfo(dtype).min <= bad <= np.iinfo(dtype).max:
                row = gs.gather_block_quantized(data, np.array([bad], dtype), scales, zero_points, **attrs)
                assert not row.any(), (bad, dtype)


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", RUNS)
def test_whole_model_outputs_match_onnxruntime_alone(name, route):
    model, inputs, _ = load(name)
    session = Session(DATA / f"{name}.onnx", engine="onnxruntime", route=route)
    got = dict(zip([o.name for o in session.get_outputs()], session.run(None, inputs), strict=True))
    live = build.onnxruntime_outputs(model, inputs)
    # (Olive's RTN pass renames the LM head's output, and so the graph's, logits_Q4.)
    assert set(got) == {"logits_Q4" if name.startswith("olive") else "logits", "present.0.key", "present.0.value"}
    for key, value in got.items():  # onnxruntime's float kernels on this CPU: not the stored outputs (module doc)
        expected = live[key]
        assert value.dtype == expected.dtype and value.shape == expected.shape
        np.testing.assert_allclose(value.astype(np.float64), expected.astype(np.float64), rtol=RTOL, atol=ATOL)
    # The contrib operators around the node stay in onnxruntime.
    ours = {name for step in session.plan.steps if step.engine == "gather_scatter" for name in step.nodes}
    contrib = {n.name for n in model.graph.node if n.op_type in (GQA, NBITS, NORM, "SkipSimplifiedLayerNormalization")}
    assert contrib and not contrib & ours


def test_run_model_with_the_hosted_engine_runs_an_export():
    model, inputs, _ = load("qwen2_h80_int4")
    want = build.onnxruntime_outputs(model, inputs)  # on this CPU, not the stored outputs (module doc)
    got = run_model(DATA / "qwen2_h80_int4.onnx", inputs, engine="onnxruntime", route="all")
    np.testing.assert_allclose(got["logits"], want["logits"], rtol=RTOL, atol=ATOL)


def test_a_node_onnx_gives_no_type_for_still_crosses_to_onnxruntime():
    # Without value_info, onnx's inference knows no GatherBlockQuantized: its output's type is
    # taken from its scales (T2), so the value crossing from our step to onnxruntime's is declared.
    model, inputs, _ = load("qwen2_h64_int4")
    want = build.onnxruntime_outputs(model, inputs)  # on this CPU, not the stored outputs (module doc)
    del model.graph.value_info[:]
    session = Session(model, engine="onnxruntime", route="all")  # the node's output is no graph output
    assert build.embedding_node(model).name in session.plan.routed
    logits = session.run(["logits"], inputs)[0]
    np.testing.assert_allclose(logits, want["logits"], rtol=RTOL, atol=ATOL)


# --- bfloat16 ---------------------------------------------------------------------------------


def bfloat16_embedding(model: onnx.ModelProto, *, emulate: bool = False) -> onnx.ModelProto:
    """``model`` with its embedding in bfloat16: bfloat16 scales and output, then a Cast to float.

    The builder writes such a node for CUDA (``use_cuda_bf16=true``), with the rest of the model
    in bfloat16 too, which onnxruntime's CPU cannot run; this keeps the rest in float32.
    ``emulate=True`` gives what onnxruntime alone runs instead: the float32 node with the
    bfloat16-rounded scales, its output rounded to bfloat16 once (Cast to bfloat16 and back).
    """
    out = onnx.ModelProto()
    out.CopyFrom(model)
    node = build.embedding_node(out)
    # A copy of the scales: a tied export shares them with the LM head's MatMulNBits.
    scales = next(t for t in out.graph.initializer if t.name == node.input[2])
    rounded = onnx.numpy_helper.to_array(scales).astype(ml_dtypes.bfloat16)
    copy = f"{scales.name}/bfloat16"
    out.graph.initializer.append(onnx.numpy_helper.from_array(rounded.astype(np.float32) if emulate else rounded, copy))
    node.input[2] = copy
    final = node.output[0]
    node.output[0] = f"{final}/bfloat16"
    index = list(out.graph.node).index(node)
    to_float = onnx.helper.make_node("Cast", [node.output[0]], [final], to=onnx.TensorProto.FLOAT, name="to_float")
    casts = [to_float]
    if emulate:
        casts = [
            onnx.helper.make_node("Cast", [node.output[0]], [f"{final}/rounded"], to=onnx.TensorProto.BFLOAT16),
            onnx.helper.make_node("Cast", [f"{final}/rounded"], [final], to=onnx.TensorProto.FLOAT),
        ]
    else:
        out.graph.value_info.append(
            onnx.helper.make_tensor_value_info(node.output[0], onnx.TensorProto.BFLOAT16, None)
        )
    for offset, cast in enumerate(casts, 1):
        out.graph.node.insert(index + offset, cast)
    return out


def test_a_bfloat16_embedding_runs_on_our_kernel_with_route_needed():
    model, inputs, _ = load("qwen2_h64_int4")
    bf16 = bfloat16_embedding(model)
    with pytest.raises(Exception, match=r"NOT_IMPLEMENTED.*GatherBlockQuantized"):  # onnxruntime alone
        ort.InferenceSession(bf16.SerializeToString(), providers=["CPUExecutionProvider"])
    got, session = run_hosted(bf16, inputs, "needed")
    node = build.embedding_node(bf16)
    # Only the embedding is routed, by the table's rule (not by a failed load), with its reason.
    (reason,) = session.plan.routed.values()
    assert list(session.plan.routed) == [node.name]
    assert "bfloat16" in reason and "NOT_IMPLEMENTED" in reason and "refuses to load" not in reason
    assert node.name in str(session.plan)
    ours = {n for step in session.plan.steps if step.engine == "gather_scatter" for n in step.nodes}
    assert ours == {node.name}
    # The float32 computation rounded once.
    data, scales, zero_points, attrs = embedding_table(bf16)
    assert scales.dtype == ml_dtypes.bfloat16 and got["embedding"].dtype == ml_dtypes.bfloat16
    exact = gs.gather_block_quantized(data, inputs["input_ids"], scales.astype(np.float32), zero_points, **attrs)
    np.testing.assert_array_equal(got["embedding"].view(np.uint16), exact.astype(ml_dtypes.bfloat16).view(np.uint16))
    for i in build.OUT_OF_RANGE:
        assert not got["embedding"][0, i].astype(np.float32).any()
    # The logits: as onnxruntime alone computes the same thing in float32 rounded once.
    emulated = build.onnxruntime_outputs(bfloat16_embedding(model, emulate=True), inputs)
    rounded = emulated["embedding"].astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(got["embedding"].view(np.uint16), rounded.view(np.uint16))
    np.testing.assert_allclose(got["logits"], emulated["logits"], rtol=RTOL, atol=ATOL)
    # route="all" routes the same node (and the attention mask's Gather).
    _, every = run_hosted(bf16, inputs, "all")
    assert node.name in every.plan.routed


def test_the_builders_bfloat16_model_is_refused_naming_the_node_onnxruntime_cannot_load():
    # -e cuda use_cuda_bf16=true: bfloat16 everywhere. The embedding is routed to our kernel,
    # but onnxruntime's CPU has no bfloat16 MatMulNBits, which no engine here runs.
    for route in ROUTES:
        with pytest.raises(ModelInputError) as info:
            Session(DATA / "qwen2_h64_int4_bf16.onnx", engine="onnxruntime", route=route)
        message = str(info.value)
        assert "(MatMulNBits, domain com.microsoft)" in message and "NOT_IMPLEMENTED" in message
        assert info.value.node is not None and info.value.node.startswith("/model/layers.0/")
        assert "GatherBlockQuantized" not in message


# --- refusals ---------------------------------------------------------------------------------


@pytest.mark.parametrize("route", ROUTES)
def test_the_builders_invalid_two_input_node_is_refused_at_build(route):
    # is_symmetric=false on a tied model: a GatherBlockQuantized without scales reading the float
    # LM head weight. Refused when the Session is built, naming the node, not at the first run.
    path = DATA / "qwen2_h64_int4_asym.onnx"
    with pytest.raises(ArityError) as info:
        Session(path, engine="onnxruntime", route=route)
    assert info.value.node == "/model/embed_tokens/GatherBlockQuantized"
    takes = "takes 3 to 4 inputs (data, indices, scales, zero_points, the last 1 optional), got 2; missing: scales"
    assert takes in str(info.value)
    _, inputs, _ = load("qwen2_h64_int4_asym")
    with pytest.raises(ArityError, match="missing: scales"):
        run_model(path, inputs, engine="onnxruntime", route=route)
    with pytest.raises(ArityError, match="missing: scales"):
        Session(path, check=False)  # engine="reference": the node loads before the contrib ones


def test_the_reference_engine_names_the_hosted_engine_for_contrib_operators():
    path = DATA / "qwen2_h64_int4.onnx"
    with pytest.raises(ModelInputError, match=r"SimplifiedLayerNormalization.*engine='onnxruntime' runs this model"):
        Session(path)
    with pytest.raises(ModelInputError, match=r"engine='onnxruntime'"):
        run_model(path, load("qwen2_h64_int4")[1])
    with pytest.raises(NodeError, match=r"engine='onnxruntime'") as info:  # the checker skipped
        Session(path, check=False)
    assert info.value.node == "/model/layers.0/input_layernorm/LayerNorm"
    # A com.microsoft contrib operator (the layer norm moved there): named the same way.
    model = onnx.load(path)
    for node in model.graph.node:
        if node.op_type == NORM:
            node.domain = "com.microsoft"
    with pytest.raises(NodeError, match=r"no SimplifiedLayerNormalization of domain com.microsoft.*'onnxruntime'"):
        Session(model)


# --- the builds (onnxruntime-genai) -----------------------------------------------------------


@pytest.fixture(scope="module")
def genai():
    for module in ("onnxruntime_genai", "transformers", "torch", "onnx_ir"):
        pytest.importorskip(module, reason=f"building the models needs {module} (examples/build_quantized_models.py)")


@pytest.mark.parametrize("spec", build.BUILT_IN_TESTS, ids=lambda s: s.name)
def test_other_architectures_built_by_the_builder(genai, spec, tmp_path):
    model = build.export(spec, tmp_path)
    node = build.embedding_node(model)
    assert [a.name for a in node.attribute if a.name == "block_size"] == ["block_size"]
    inputs = build.feeds(model)
    want = build.onnxruntime_outputs(model, inputs)
    got, session = run_hosted(model, inputs, "all")
    assert node.name in session.plan.routed
    np.testing.assert_array_equal(got["embedding"], want["embedding"])
    for i in build.OUT_OF_RANGE:
        assert not got["embedding"][0, i].any()
    np.testing.assert_allclose(got["logits"], want["logits"], rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("engine", ["reference", "onnxruntime"])
def test_a_family_node_missing_a_required_input_is_refused_at_build(engine):
    # The defect class of the builder's two-input node: any operator of the family, either engine.
    vi = onnx.helper.make_tensor_value_info
    cases = [
        (onnx.helper.make_node("ScatterElements", ["x", "i"], ["y"], name="write"), 13, "missing: updates"),
        (onnx.helper.make_node("GatherBlockQuantized", ["q", "i"], ["y"], name="embed", domain="com.microsoft",
                               block_size=16), 13, "missing: scales"),
    ]
    for node, opset, missing in cases:
        graph = onnx.helper.make_graph([node], "g", [vi("x", 1, [4]), vi("q", 2, [4, 8]), vi("i", 7, [1])],
                                       [vi("y", 1, None)])
        model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset),
                                                             onnx.helper.make_opsetid("com.microsoft", 1)])
        with pytest.raises(ArityError, match=missing) as info:
            Session(model, engine=engine, route="all" if engine == "onnxruntime" else "needed")
        assert info.value.node == node.name


def test_the_command_line_runs_an_export_with_the_hosted_engine(tmp_path, capsys):
    from gather_scatter.cli import main

    name = "qwen2_h80_int4"
    argv = ["run", str(DATA / f"{name}.onnx"), "--inputs", str(DATA / f"{name}_inputs.npz"), "--engine",
            "onnxruntime", "--route", "all", "--explain", "--output", str(tmp_path / "out.npz")]
    assert main(argv) == 0
    assert "/model/embed_tokens/GatherBlockQuantized: route='all'" in capsys.readouterr().out
    with np.load(tmp_path / "out.npz") as archive:
        np.testing.assert_allclose(archive["logits"], load(name)[2]["logits"], rtol=RTOL, atol=ATOL)
    # The reference engine refuses it, naming the hosted one.
    assert main(["run", str(DATA / f"{name}.onnx"), "--inputs", str(DATA / f"{name}_inputs.npz")]) == 2
    assert "engine='onnxruntime' runs this model" in capsys.readouterr().err


# --- gather-scatter check MODEL and shapes on these exports (issue 27, the checker in model mode) ---


def _check_model(tmp_path, name: str, engine: str) -> tuple[int, dict]:
    import json

    from gather_scatter.cli import main

    report = tmp_path / "report.json"
    code = main(["check", str(DATA / f"{name}.onnx"), "--engine", engine, "--inputs", str(DATA / f"{name}_inputs.npz"),
                 "--out", str(tmp_path / "findings"), "--json", str(report)])
    return code, json.loads(report.read_text())


@pytest.mark.parametrize("name", ["qwen2_h64_int4", "quantizer_int4", "olive_int8"])
def test_check_model_mode_captures_an_export_through_onnxruntime(tmp_path, capsys, name):
    # Our evaluator cannot run SimplifiedLayerNormalization, MatMulNBits, GroupQueryAttention...:
    # the model runs in onnxruntime with route='all', each indexing node on our kernels, recording
    # its inputs; each is replayed on the engine, and the whole model compared with that run.
    code, result = _check_model(tmp_path, name, "onnxruntime")
    out = capsys.readouterr().out
    assert code == 0, out
    (row,) = [r for r in result["nodes"] if r["op"] == "GatherBlockQuantized"]
    assert (row["domain"], row["since_version"], row["kind"]) == ("com.microsoft", 1, "agree")
    assert row["node"] == build.embedding_node(load(name)[0]).name
    assert {r["kind"] for r in result["nodes"]} == {"agree"} and result["whole_model"]["kind"] == "agree"
    assert result["captured_by"].startswith("onnxruntime with route='all'")
    assert {NORM, f"com.microsoft.{NBITS}", f"com.microsoft.{GQA}"} <= set(result["foreign_ops"])
    assert result["not_run"] == [] and result["our_error"] is None and result["findings"] == []
    assert "captured by onnxruntime with route='all' (our kernels for the indexing nodes; onnxruntime computed" in out
    assert row["node"] in out and out.rstrip().endswith("no findings")


def test_check_model_mode_on_the_reference_engine_counts_the_node_unsupported(tmp_path, capsys):
    # onnx.reference has no GatherBlockQuantized, nor the model's other contrib operators.
    code, result = _check_model(tmp_path, "qwen2_h64_int4", "onnx-reference")
    out = capsys.readouterr().out
    assert code == 0, out
    (row,) = [r for r in result["nodes"] if r["op"] == "GatherBlockQuantized"]
    assert row["kind"] == "unsupported" and result["whole_model"]["kind"] == "unsupported"
    assert {r["kind"] for r in result["nodes"] if r is not row} == {"agree"}  # the shape Gathers
    assert result["summary"]["unsupported"] == 1 and result["findings"] == []
    assert result["captured_by"].startswith("onnxruntime with route='all'")


def test_shapes_infers_the_embedding_of_an_export(capsys):
    from gather_scatter.cli import main
    from gather_scatter.models.shape_inference import infer_model_shapes, node_shapes

    path = DATA / "qwen2_h64_int4.onnx"
    node = build.embedding_node(load("qwen2_h64_int4")[0])
    line = (f"node '{node.name}' (com.microsoft.GatherBlockQuantized-1): {node.output[0]} "
            "('batch_size', 'sequence_length', 64) float32")
    assert main(["shapes", str(path)]) == 0
    assert line in capsys.readouterr().out.splitlines()
    assert line in list(node_shapes(infer_model_shapes(path)))
