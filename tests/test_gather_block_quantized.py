"""com.microsoft GatherBlockQuantized-1 (issue 27): the kernel against a loop oracle written from
the schema text (tests/oracle_quantized.py) and against onnxruntime's CPU kernel, every schema
rule as a typed error, and the single-node paths (run_node, infer_shape, infer_model_shapes,
run_model, Session, the CLI).

Cases cover every T1 (uint8 with bits 2/4/8, int4, uint4, the four FP8 and FP4) x T2 (float,
float16, bfloat16) x index type, every axis pair the schema allows, block sizes with partial
last blocks (1000 rows in blocks of 32, a hidden size of 80 in blocks of 32), zero points given
and absent, broadcast FP scales, and out-of-range ids (V, V+1000, -V-1, 2**31, int64 min/max),
which select rows of zeros.
"""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import oracle_quantized
import pytest
from onnx import TensorProto
from onnx import helper as oh
from onnx import numpy_helper as nh

import gather_scatter as gs
from gather_scatter import _calls as _runners
from gather_scatter.kernels import _numba as _compiled
from gather_scatter.kernels import block_quantized as kernel
from gather_scatter.quantized import gather_block_quantized

FP = {
    "float8e4m3fn": ml_dtypes.float8_e4m3fn,
    "float8e4m3fnuz": ml_dtypes.float8_e4m3fnuz,
    "float8e5m2": ml_dtypes.float8_e5m2,
    "float8e5m2fnuz": ml_dtypes.float8_e5m2fnuz,
    "float4e2m1": ml_dtypes.float4_e2m1fn,
}
# (name, dtype, bits): the T1 variants
T1 = [("uint8", np.uint8, 2), ("uint8", np.uint8, 4), ("uint8", np.uint8, 8)]
T1 += [("int4", ml_dtypes.int4, 4), ("uint4", ml_dtypes.uint4, 4)]
T1 += [(name, dtype, 4) for name, dtype in FP.items()]
T2 = {"float": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
ONNX_T2 = {"float": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16}
OP = dict(opset=1, domain="com.microsoft")


def layouts(t1: str) -> list[tuple[tuple[int, ...], int, int]]:
    """(logical data shape, gather_axis, quantize_axis) the schema allows for ``t1``."""
    if t1 == "uint8":
        return [((40, 80), 0, 1), ((37, 3, 48), 0, -1), ((1000, 32), 0, 1)]
    return [
        ((40, 80), 0, 1),
        ((80, 24), 1, 0),
        ((100, 6), 0, 0),  # gather and quantize on one axis (int4/uint4/FP8/FP4 only)
        ((6, 100), 1, 1),
        ((3, 40, 20), 1, 2),
        ((1000, 4), 0, 0),  # 1000 rows in blocks of 32: a partial last block
    ]


def out_of_range(v: int, index_dtype) -> list[int]:
    ids = [0, v - 1, -1, -v, v, v + 1000, -v - 1, 2**31 - 1, -(2**31)]
    if index_dtype == np.int64:
        ids += [2**31, np.iinfo(np.int64).min, np.iinfo(np.int64).max]
    return ids


def make_case(rng, t1, bits, t2, index_dtype, shape, g, q, block, zero_points, broadcast=False):
    """Random inputs of a valid call: (args, kwargs)."""
    name, dtype = t1
    r = len(shape)
    qa = q % r
    fp = name in FP
    per = 8 // bits if name == "uint8" else 1
    if name == "uint8":
        codes = rng.integers(0, 1 << bits, shape, dtype=np.uint8)
        data = _pack(codes, bits)
    elif name == "int4":
        data = rng.integers(-8, 8, shape).astype(dtype)
    elif name == "uint4":
        data = rng.integers(0, 16, shape).astype(dtype)
    else:
        data = rng.integers(0, 256 if name != "float4e2m1" else 16, shape, dtype=np.uint8).view(dtype)
    eff = block or max(shape[qa], 1)
    sshape = list(shape)
    sshape[qa] = -(-shape[qa] // eff)
    if broadcast:
        for a in range(r):
            if a != qa and rng.random() < 0.6:
                sshape[a] = 1
    scales = (rng.random(sshape, dtype=np.float32) * 2 - 1).astype(T2[t2])
    zp = None
    if zero_points:
        zcodes = rng.integers(0, 1 << bits, sshape, dtype=np.uint8) if name == "uint8" else None
        if name == "uint8":
            zp = _pack(zcodes, bits)
        elif name == "int4":
            zp = rng.integers(-8, 8, sshape).astype(dtype)
        else:
            zp = rng.integers(0, 16, sshape).astype(dtype)
    s = shape[g % r]
    ids = np.array(out_of_range(s, index_dtype) + list(rng.integers(-s, s, 5)), dtype=index_dtype)
    ids = ids[rng.permutation(ids.size)]  # every out-of-range kind in every case
    if rng.random() < 0.3:
        ids = ids[: ids.size // 2 * 2].reshape(2, -1)
    attrs = dict(gather_axis=g, quantize_axis=q, block_size=block, bits=bits)
    return (data, ids, scales, zp), attrs


def _pack(codes: np.ndarray, bits: int) -> np.ndarray:
    """Pack codes along the last axis, ``8 / bits`` per byte, low-order bits first."""
    per = 8 // bits
    width = -(-codes.shape[-1] // per)
    padded = np.zeros(codes.shape[:-1] + (width * per,), np.uint8)
    padded[..., : codes.shape[-1]] = codes
    grouped = padded.reshape(codes.shape[:-1] + (width, per)).astype(np.uint16)
    return (grouped << (np.arange(per) * bits)).sum(-1).astype(np.uint8)


def all_cases():
    rng = np.random.default_rng(27)
    cases = []
    for (name, dtype, bits), t2 in itertools.product(T1, T2):
        fp = name in FP
        for n, (shape, g, q) in enumerate(layouts(name)):
            if name == "uint8":
                per = 8 // bits
                shape = shape[:-1] + (shape[-1] // per,)  # stored: the logical last dim packed
                logical_q = shape[-1] * per
            else:
                logical_q = shape[q % len(shape)]
            blocks = [16, 32, 64] + ([0] if fp else [])
            block = blocks[n % len(blocks)]
            if block > 16 and logical_q <= 16:
                block = 16
            index_dtype = (np.int32, np.int64)[n % 2]
            zp = (not fp) and n % 2 == 0
            broadcast = fp and n % 3 == 1
            cases.append(((name, dtype, bits), t2, index_dtype, shape, g, q, block, zp, broadcast))
    return cases, rng


CASES, _ = all_cases()


def _id(case):
    (name, _, bits), t2, index_dtype, shape, g, q, block, zp, bc = case
    return f"{name}b{bits}-{t2}-{np.dtype(index_dtype).name}-{shape}-g{g}q{q}-B{block}{'-zp' if zp else ''}{'-bc' if bc else ''}"


def _build(case, seed=0):
    (name, dtype, bits), t2, index_dtype, shape, g, q, block, zp, bc = case
    rng = np.random.default_rng(seed + hash(_id(case)) % 1000)
    return make_case(rng, (name, dtype), bits, t2, index_dtype, shape, g, q, block, zp, bc)


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.dtype(f"u{a.dtype.itemsize}"))


def assert_bitwise(ours: np.ndarray, want: np.ndarray) -> None:
    assert ours.dtype == want.dtype and ours.shape == want.shape
    same = _bits(ours) == _bits(want)
    nan = np.isnan(ours.astype(np.float32)) & np.isnan(want.astype(np.float32))
    bad = ~(same | nan)
    assert not bad.any(), f"{bad.sum()} differ, first at {np.argwhere(bad)[0]}: {ours[bad][:4]} vs {want[bad][:4]}"


@pytest.fixture(params=["numpy", "compiled"])
def path(request, monkeypatch):
    """Run the kernel on its NumPy path, or on the compiled loop where its layout allows (the
    accepted signatures start empty: a signature accepted on one path would run on the loop)."""
    monkeypatch.setattr(_runners, "_ACCEPTED", {})
    if request.param == "numpy":
        monkeypatch.setattr(kernel, "compiled", lambda: None)
    elif _compiled.loops() is None:
        pytest.skip("numba is not installed")
    return request.param


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_equals_the_oracle_bit_for_bit(case, path):
    args, attrs = _build(case)
    copies = [None if a is None else a.copy() for a in args]
    ours = gather_block_quantized(*args, **attrs)
    want = oracle_quantized.gather_block_quantized(*args, **attrs)
    assert_bitwise(ours, want)
    for a, c in zip(args, copies, strict=True):  # never mutates its inputs
        assert (a is None and c is None) or (a.tobytes() == c.tobytes())
    # out-of-range ids gave zero rows
    flat_ids = args[1].reshape(-1).astype(np.int64)
    s = args[0].shape[attrs["gather_axis"] % args[0].ndim]
    rows = np.moveaxis(ours.reshape(ours.shape[: attrs["gather_axis"] % args[0].ndim] + (flat_ids.size, -1)), -2, 0)
    outside = (flat_ids < -s) | (flat_ids >= s)
    assert outside.any() and (rows[outside] == 0).all() and _bits(rows[outside]).max() == 0  # +0.0
    # run_node gives the same
    node = gs.run_node("GatherBlockQuantized", [a for a in args if a is not None] if args[3] is not None else list(args[:3]), attrs, **OP)
    assert_bitwise(node, ours)


@pytest.mark.parametrize("case", [c for c in CASES if c[1] == "bfloat16"], ids=_id)
def test_bfloat16_is_the_float32_result_rounded_once(case):
    args, attrs = _build(case)
    as_f32 = (args[0], args[1], args[2].astype(np.float32), args[3])
    f32 = gather_block_quantized(*as_f32, **attrs)
    assert_bitwise(gather_block_quantized(*args, **attrs), f32.astype(ml_dtypes.bfloat16))


def _ort_model(args, attrs, t2: str) -> bytes:
    data, ids, scales, zp = args
    inputs = ["data", "ids", "scales"] + (["zp"] if zp is not None else [])
    node = oh.make_node("GatherBlockQuantized", inputs, ["y"], domain="com.microsoft", **attrs)
    inits = [nh.from_array(data, "data"), nh.from_array(scales, "scales")]
    if zp is not None:
        inits.append(nh.from_array(zp, "zp"))
    index_type = TensorProto.INT32 if ids.dtype == np.int32 else TensorProto.INT64
    graph = oh.make_graph(
        [node], "g", [oh.make_tensor_value_info("ids", index_type, None)],
        [oh.make_tensor_value_info("y", ONNX_T2[t2], None)], inits,
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21), oh.make_opsetid("com.microsoft", 1)])
    return model.SerializeToString()


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", [c for c in CASES if c[1] != "bfloat16"], ids=_id)
def test_equals_onnxruntime(case, threads):
    """float32 and float16 output, every T1 and layout: bit for bit (float16 too: both round
    the float32 product once, to nearest even)."""
    ort = pytest.importorskip("onnxruntime")
    args, attrs = _build(case)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(_ort_model(args, attrs, case[1]), options, providers=["CPUExecutionProvider"])
    theirs = session.run(None, {"ids": args[1]})[0]
    assert_bitwise(gather_block_quantized(*args, **attrs), theirs)


# --- every schema rule as a typed error ---------------------------------------------------

U8 = np.zeros((8, 16), np.uint8)  # 8 rows of 32 nibbles
U8_SCALES = np.ones((8, 2), np.float32)  # blocks of 16
I4 = np.zeros((8, 32), ml_dtypes.int4)
F8 = np.zeros((8, 32), ml_dtypes.float8_e4m3fn)
IDS = np.array([0, 7], np.int64)
NAME = "com.microsoft.GatherBlockQuantized-1"

# (rule, args (data, indices, scales[, zero_points]), attrs, error class, message pattern, fields)
INVALID = [
    ("block_size not a power of 2", (U8, IDS, U8_SCALES), dict(block_size=48), gs.InvalidAttributeError,
     r"block_size = 48 must be a power of 2 >= 16", dict(input="block_size", value=48)),
    ("block_size below 16", (U8, IDS, np.ones((8, 4), np.float32)), dict(block_size=8), gs.InvalidAttributeError,
     r"block_size = 8 must be a power of 2 >= 16", dict(input="block_size", value=8)),
    ("block_size 0 for integer data", (I4, IDS, np.ones((8, 1), np.float32)), dict(block_size=0),
     gs.InvalidAttributeError, r"block_size = 0 .*FP8/FP4 data only.*tensor\(int4\)", dict(input="block_size", value=0)),
    ("bits 3 for uint8", (U8, IDS, U8_SCALES), dict(block_size=16, bits=3), gs.InvalidAttributeError,
     r"bits = 3 is not accepted for uint8 data \(accepted: 2, 4, 8\)", dict(input="bits", value=3)),
    ("bits 8 for int4", (I4, IDS, np.ones((8, 2), np.float32)), dict(block_size=16, bits=8), gs.InvalidAttributeError,
     r"bits = 8 is not accepted for tensor\(int4\) data \(accepted: 4\)", dict(input="bits", value=8)),
    ("gather_axis out of range", (I4, IDS, np.ones((8, 2), np.float32)), dict(block_size=16, gather_axis=2),
     gs.InvalidAttributeError, r"gather_axis = 2 is out of range for data of rank 2 \(valid range \[-2, 1\]\)",
     dict(input="gather_axis", value=2, valid_range=(-2, 1))),
    ("quantize_axis out of range", (I4, IDS, np.ones((8, 2), np.float32)), dict(block_size=16, quantize_axis=-3),
     gs.InvalidAttributeError, r"quantize_axis = -3 is out of range", dict(input="quantize_axis", value=-3)),
    ("uint8 gather_axis not 0", (U8, IDS, np.ones((1, 32), np.float32)), dict(block_size=16, gather_axis=1, quantize_axis=0),
     gs.InvalidAttributeError, r"for uint8 data gather_axis must be 0 and quantize_axis the last axis",
     dict(input="gather_axis", value=1)),
    ("uint8 quantize_axis not last", (np.zeros((8, 4, 16), np.uint8), IDS, np.ones((8, 4, 16), np.float32)),
     dict(block_size=16, quantize_axis=1), gs.InvalidAttributeError, r"quantize_axis the last axis \(2 or -1\)",
     dict(input="quantize_axis", value=1)),
    ("uint8 axes equal (rank 1)", (np.zeros(16, np.uint8), IDS, np.ones(2, np.float32)),
     dict(block_size=16, quantize_axis=0), gs.InvalidAttributeError, r"they must differ",
     dict(input="quantize_axis", value=0)),
    ("zero points with FP8", (F8, IDS, np.ones((8, 2), np.float32), np.zeros((8, 2), ml_dtypes.float8_e4m3fn)),
     dict(block_size=16), gs.ArityError, r"zero_points must not be given for tensor\(float8e4m3fn\) data",
     dict(input="zero_points", value=4, valid_range=(3, 3))),
    ("scales of another rank", (U8, IDS, np.ones(2, np.float32)), dict(block_size=16), gs.ShapeError,
     r"scales must have data's rank 2, got rank 1", dict(input="scales", value=1)),
    ("scales' block count (packed width unpacked)", (U8, IDS, np.ones((8, 1), np.float32)), dict(block_size=16),
     gs.ShapeError, r"scales.shape\[1\] = 1 but the quantize axis 1 of 32 elements \(16 stored x 2 per byte\) "
     r"in blocks of 16 needs ceil\(32 / 16\) = 2", dict(input="scales", value=1, position=(1,), axis=1)),
    ("scales' partial last block counted", (I4[:, :20], IDS, np.ones((8, 1), np.float32)), dict(block_size=16),
     gs.ShapeError, r"needs ceil\(20 / 16\) = 2", dict(input="scales", value=1, valid_range=(2, 2))),
    ("scales off the quantize axis", (U8, IDS, np.ones((4, 2), np.float32)), dict(block_size=16), gs.ShapeError,
     r"scales.shape\[0\] = 4 must equal data.shape\[0\] = 8 \(", dict(input="scales", value=4, position=(0,))),
    ("broadcast scales for integer data", (I4, IDS, np.ones((1, 2), np.float32)), dict(block_size=16), gs.ShapeError,
     r"scales.shape\[0\] = 1 must equal data.shape\[0\] = 8 \(", dict(input="scales", value=1)),
    ("zero points of another rank", (U8, IDS, U8_SCALES, np.zeros(8, np.uint8)), dict(block_size=16), gs.ShapeError,
     r"zero_points must have scales' rank 2, got rank 1", dict(input="zero_points", value=1)),
    ("packed zero points' width", (U8, IDS, U8_SCALES, np.zeros((8, 2), np.uint8)), dict(block_size=16), gs.ShapeError,
     r"zero_points.shape\[1\] = 2 must be 1 \(ceil\(2 / 2\): 2 zero points per byte",
     dict(input="zero_points", value=2, position=(1,))),
    ("zero points off the quantize axis", (I4, IDS, np.ones((8, 2), np.float32), np.zeros((4, 2), ml_dtypes.int4)),
     dict(block_size=16), gs.ShapeError, r"zero_points.shape\[0\] = 4 must be 8", dict(input="zero_points", value=4)),
    ("data of another type", (np.zeros((8, 32), np.int8), IDS, np.ones((8, 2), np.float32)), dict(block_size=16),
     gs.DTypeError, r"data has type tensor\(int8\)", dict(input="data", value="tensor(int8)")),
    ("indices of another type", (U8, IDS.astype(np.int16), U8_SCALES), dict(block_size=16), gs.DTypeError,
     r"indices has type tensor\(int16\)", dict(input="indices", value="tensor(int16)")),
    ("scales of another type (T2)", (U8, IDS, U8_SCALES.astype(np.float64)), dict(block_size=16), gs.DTypeError,
     r"scales has type tensor\(double\).*allowed: tensor\(bfloat16\), tensor\(float\), tensor\(float16\)",
     dict(input="scales", value="tensor(double)")),
    ("zero points not of data's type", (I4, IDS, np.ones((8, 2), np.float32), np.zeros((8, 2), ml_dtypes.uint4)),
     dict(block_size=16), gs.DTypeError, r"zero_points has type tensor\(uint4\) but data has tensor\(int4\)",
     dict(input="zero_points", value="uint4")),
    ("data a scalar", (np.uint8(3), IDS, np.float32(1)), dict(block_size=16), gs.ShapeError,
     r"data must have rank >= 1", dict(input="data")),
    ("attribute not an int", (U8, IDS, U8_SCALES), dict(block_size=16.0), gs.InvalidAttributeError,
     r"attribute block_size must be an int, got 16.0", dict(input="block_size")),
]


@pytest.mark.parametrize("rule, args, attrs, cls, pattern, fields", INVALID, ids=[row[0] for row in INVALID])
def test_invalid_inputs_raise_typed_errors(rule, args, attrs, cls, pattern, fields):
    for call in (
        lambda: gather_block_quantized(*args, **attrs),
        lambda: gs.run_node("GatherBlockQuantized", list(args), attrs, **OP),
    ):
        with pytest.raises(cls, match=pattern) as info:
            call()
        error = info.value
        assert str(error).startswith(NAME + ":")
        assert (error.op, error.since_version) == ("GatherBlockQuantized", 1)
        for name, value in fields.items():
            assert getattr(error, name) == value, (name, getattr(error, name))
    # infer_shape finds every rule from shapes, dtypes and attributes alone, with the same error
    shapes = [np.shape(a) for a in args]
    dtypes = [np.asarray(a).dtype for a in args]
    with pytest.raises(cls, match=pattern):
        gs.infer_shape("GatherBlockQuantized", shapes, dtypes, attrs, **OP)


def test_arity_and_other_libraries():
    with pytest.raises(gs.ArityError, match=r"takes 3 to 4 inputs \(data, indices, scales, zero_points, the last 1"):
        gs.run_node("GatherBlockQuantized", [U8, IDS], {"block_size": 16}, **OP)
    torch = pytest.importorskip("torch")
    with pytest.raises(gs.DTypeError, match="runs on NumPy arrays only") as info:
        gather_block_quantized(torch.zeros((8, 16), dtype=torch.uint8), IDS, U8_SCALES, block_size=16)
    assert info.value.input == "data"


def test_another_librarys_input_beside_numpy_data_is_told_to_be_numpy_not_to_move_data_too():
    """Issue 36: torch indices with NumPy data were told '(or data as a torch.Tensor)', which is refused too."""
    torch = pytest.importorskip("torch", reason="torch is not installed: the advice for torch inputs is not reachable")
    zero_points = np.full((8, 1), 0x88, np.uint8)
    for given in ("indices", "scales", "zero_points"):
        args = {"data": U8, "indices": IDS, "scales": U8_SCALES, "zero_points": zero_points}
        args[given] = torch.from_numpy(np.asarray(args[given]))
        with pytest.raises(gs.DTypeError) as info:
            gather_block_quantized(**args, block_size=16)
        assert str(info.value) == (
            f"{NAME}: {given} is a torch.Tensor, but this operator runs on NumPy arrays only (ml_dtypes' "
            "int4/uint4/float8/float4 for the quantized types): pass every input as a NumPy array"
        )
        assert (info.value.input, info.value.value) == (given, "torch.Tensor") and "or data as" not in str(info.value)
        # the advice leads somewhere: every input as a NumPy array runs
        args[given] = args[given].numpy()
        assert gather_block_quantized(**args, block_size=16).shape == (2, 32)  # 16 bytes: 32 nibbles a row


def test_int4_gather_and_quantize_axis_may_be_equal():
    """The schema forbids gather_axis == quantize_axis for uint8 only (and onnxruntime runs it for
    int4): row i takes the scales of block i // block_size."""
    data = np.arange(-8, 8).repeat(3).reshape(48, 1).astype(ml_dtypes.int4)[:40]
    scales = np.array([[1.0], [10.0], [100.0]], np.float32)
    got = gather_block_quantized(data, np.array([0, 16, 39]), scales, gather_axis=0, quantize_axis=0, block_size=16)
    assert got.tolist() == [[-8.0], [-30.0], [500.0]]  # rows 0, 16, 39 hold -8, -3, 5


# --- threads, out=, dequantizing only the gathered rows ------------------------------------


def _large():
    rng = np.random.default_rng(5)
    data = rng.integers(0, 256, (4096, 384), dtype=np.uint8)
    scales = rng.random((4096, 24), dtype=np.float32).astype(np.float16)
    zp = rng.integers(0, 256, (4096, 12), dtype=np.uint8)
    ids = rng.integers(-5000, 5000, 2048)
    return (data, ids, scales, zp), dict(block_size=32, bits=4)


@pytest.mark.parametrize("out_dtype", ["float16", "float32"])
def test_results_do_not_depend_on_the_thread_count(path, out_dtype):
    args, attrs = _large()
    if out_dtype == "float32":
        args = args[:2] + (args[2].astype(np.float32),) + args[3:]
    before = gs.get_num_threads()
    try:
        results = []
        for n in (1, 2, 4):
            gs.set_num_threads(n)
            results.append(gather_block_quantized(*args, **attrs))
    finally:
        gs.set_num_threads(before)
    assert results[0].shape == (2048, 768)
    for other in results[1:]:
        assert_bitwise(other, results[0])
    sample = slice(0, 2048, 97)
    want = oracle_quantized.gather_block_quantized(args[0], args[1][sample], *args[2:], **attrs)
    assert_bitwise(results[0][sample], want)


def test_out_is_written_and_returned():
    args, attrs = _build(CASES[4])
    want = gather_block_quantized(*args, **attrs)
    out = np.full(want.shape, 7, want.dtype)
    assert gather_block_quantized(*args, **attrs, out=out) is out
    assert_bitwise(out, want)
    strided = np.full(want.shape[:-1] + (want.shape[-1] * 2,), 7, want.dtype)[..., ::2]
    gather_block_quantized(*args, **attrs, out=strided)
    assert_bitwise(strided, want)
    with pytest.raises(gs.DTypeError, match="out has dtype float64"):
        gather_block_quantized(*args, **attrs, out=np.empty(want.shape))


def test_only_the_gathered_rows_are_dequantized(path):
    """Gathering 2 rows of a 32 MB uint8 table (64 MB unpacked, 4 MB of float16 scales)
    allocates well under a megabyte: nothing converts, unpacks or copies the whole table."""
    import tracemalloc

    data = np.full((1 << 16, 512), 0x88, np.uint8)
    scales = np.ones((1 << 16, 32), np.float16)
    zero_points = np.full((1 << 16, 16), 0x77, np.uint8)
    gather_block_quantized(data[:2], np.array([0]), scales[:2], zero_points[:2], block_size=32)  # warm
    tracemalloc.start()
    try:
        got = gather_block_quantized(data, np.array([3, 70000]), scales, zero_points, block_size=32)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got.shape == (2, 1024) and (got[0] == 1).all() and (got[1] == 0).all()
    assert peak < 256 << 10, peak


# --- the single-node model paths -------------------------------------------------------------


def _model(t2="float16"):
    rng = np.random.default_rng(1)
    data = rng.integers(-8, 8, (50, 64)).astype(ml_dtypes.int4)
    scales = (rng.random((50, 2), dtype=np.float32)).astype(T2[t2])
    node = oh.make_node("GatherBlockQuantized", ["data", "ids", "scales"], ["y"], name="embed",
                        domain="com.microsoft", block_size=32, bits=4)
    graph = oh.make_graph(
        [node], "g", [oh.make_tensor_value_info("ids", TensorProto.INT64, ["B", "T"])],
        [oh.make_tensor_value_info("y", ONNX_T2[t2], None)], [nh.from_array(data, "data"), nh.from_array(scales, "scales")],
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21), oh.make_opsetid("com.microsoft", 1)])
    return model, (data, scales)


@pytest.mark.parametrize("t2", ["float16", "bfloat16"])
def test_run_model_session_and_shapes(t2, tmp_path):
    model, (data, scales) = _model(t2)
    ids = np.array([[1, -1, 50, 2**40]], np.int64)
    want = gather_block_quantized(data, ids, scales, block_size=32)
    assert want.dtype == np.dtype(T2[t2]) and (want[0, 2:] == 0).all()
    assert_bitwise(gs.run_model(model, {"ids": ids})["y"], want)
    assert_bitwise(gs.Session(model).run(None, {"ids": ids})[0], want)
    inferred = gs.infer_model_shapes(model)
    y = inferred.graph.output[0].type.tensor_type
    assert y.elem_type == ONNX_T2[t2]
    assert [d.dim_param or d.dim_value for d in y.shape.dim] == ["B", "T", 64]
    from gather_scatter.cli import main

    path = tmp_path / "m.onnx"
    import onnx

    onnx.save(model, path)
    np.save(tmp_path / "ids.npy", ids)
    assert main(["shapes", str(path)]) == 0
    assert main(["run", str(path), "--input", f"ids={tmp_path / 'ids.npy'}", "--output", str(tmp_path / "o.npz")]) == 0
    saved = np.load(tmp_path / "o.npz")["y"]
    assert _bits(saved).tobytes() == _bits(want).tobytes()


def test_infer_shape_unpacks_the_last_axis():
    got = gs.infer_shape("GatherBlockQuantized", [["V", 768], ["B", "T"], ["V", 48]],
                         [np.uint8, np.int32, np.float16], {"block_size": 32}, **OP)
    assert got == (("B", "T", 1536), np.dtype(np.float16))
    assert gs.infer_shape("GatherBlockQuantized", [["V", "H"], ["N"], ["V", None]], [np.uint8, np.int64, np.float32],
                          {"block_size": 32, "bits": 8}, **OP) == (("N", "H"), np.dtype(np.float32))
    # data's type unknown: a packed last axis cannot be ruled out
    assert gs.infer_shape("GatherBlockQuantized", [[10, 8], [3], [10, 1]], None, {"block_size": 16}, **OP)[0] == (3, None)
    assert gs.infer_shape("GatherBlockQuantized", [[10, 8, 4], [3], [10, 8, 1]], [ml_dtypes.int4, None, None],
                          {"block_size": 16, "quantize_axis": 2, "gather_axis": 1}, **OP)[0] == (10, 3, 4)


def test_the_loops_rounding_is_numpys_and_ml_dtypes_bit_for_bit():
    """float16/bfloat16 outputs are rounded inside the compiled loop: its conversions give the
    bits NumPy's (float16) and ml_dtypes' (bfloat16) casts give, on 1M random float32 bit
    patterns and the edges (zeros, subnormals, ties, overflow to inf, inf, NaN payloads)."""
    loops = kernel.compiled()
    if loops is None:
        pytest.skip("numba is not installed")
    rng = np.random.default_rng(16)
    edges = np.array([0, 0x7F800000, 0x7FC00000, 0x7F800001, 0x7FFFFFFF, 0x477FEFFF, 0x477FF000, 0x477FF001,
                      0x47800000, 0x33000000, 0x33000001, 0x32FFFFFF, 0x337FFFFF, 0x33800000, 0x387FC000,
                      0x387FE000, 0x38000000, 0x38800000, 0x3F800000, 0x3F801000, 0x3F803000, 0x3F808000,
                      0x3F818000, 0x7F7FFFFF], np.uint32)
    patterns = np.concatenate([rng.integers(0, 2**32, 1 << 20, dtype=np.uint64).astype(np.uint32), edges,
                               edges | np.uint32(0x80000000)])
    values = patterns.view(np.float32)
    got = np.empty(values.size, np.uint16)
    with np.errstate(all="ignore"):
        loops.round_into(values.copy(), got, 0, values.size, loops.FLOAT16)
        assert (got == values.astype(np.float16).view(np.uint16)).all()
        loops.round_into(values.copy(), got, 0, values.size, loops.BFLOAT16)
        assert (got == values.astype(ml_dtypes.bfloat16).view(np.uint16)).all()


def test_edge_shapes_and_layouts(path):
    """No ids, a rank-0 id, an empty table (every id out of range), big-endian ids, strided
    (non-contiguous) inputs: each equal to the oracle."""
    rng = np.random.default_rng(3)
    data = rng.integers(0, 256, (20, 24), dtype=np.uint8)
    scales = rng.random((20, 3), dtype=np.float32).astype(np.float16)
    zp = rng.integers(0, 256, (20, 2), dtype=np.uint8)
    calls = [
        (data, np.zeros((0, 3), np.int64), scales, zp),
        (data, np.array(-20), scales, zp),
        (data, np.array([5, -1, 20], dtype=">i8"), scales, zp),
        (data[:, ::2], np.array([3, 19]), np.asfortranarray(scales[:, :2]), zp[:, :1]),  # none C-contiguous
        (np.zeros((0, 24), np.uint8), np.array([0, -1, 5]), np.zeros((0, 3), np.float16), None),
    ]
    for data_, ids, scales_, zp_ in calls:
        attrs = dict(block_size=16, bits=4)
        want = oracle_quantized.gather_block_quantized(data_, ids, scales_, zp_, **attrs)
        assert_bitwise(gather_block_quantized(data_, ids, scales_, zp_, **attrs), want)
        assert_bitwise(gather_block_quantized(data_, ids, scales_, zp_, **attrs), want)  # an accepted signature


def test_a_declared_output_type_other_than_scales_is_refused():
    model, _ = _model("float16")
    model.graph.output[0].type.tensor_type.elem_type = TensorProto.FLOAT
    with pytest.raises(gs.DTypeError, match=r"output 'y' is declared with type tensor\(float\), but its scales input "
                                            r"'scales' has type tensor\(float16\)"):
        gs.infer_model_shapes(model)


@pytest.mark.parametrize("t2", [np.float32, np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("axes", [(0, 1), (1, 1), (1, 0)])
def test_special_values_are_ieee_and_warn_nothing(t2, axes, path):
    """FP8 codes inf/NaN and scales 0/inf/huge: float32 IEEE results (inf * 0 is NaN, a float16
    overflow is inf), equal to the oracle, and no NumPy RuntimeWarning on either path (the
    NumPy path warned on inf * 0 and on the float16 cast)."""
    import warnings

    data = np.array([[np.inf, np.nan, 1, -np.inf]] * 3, dtype=ml_dtypes.float8_e5m2)
    g, q = axes
    big = 60000.0 if t2 is np.float16 else 3e38
    values = np.array([0.0, np.inf, big], np.float32)
    shape = (3, 1) if q == 1 else (1, 4)
    scales = np.resize(values, shape).astype(t2) if g == 0 else np.full(shape, big, np.float32).astype(t2)
    attrs = {"gather_axis": g, "quantize_axis": q, "block_size": 0}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ours = gather_block_quantized(data, np.array([0, 1, 2, 7]), scales, **attrs)
    with np.errstate(invalid="ignore", over="ignore"):  # the oracle's scalar float32 arithmetic
        want = oracle_quantized.gather_block_quantized(data, np.array([0, 1, 2, 7]), scales, **attrs)
    assert_bitwise(ours, want)


def test_a_signature_accepted_on_the_numpy_path_skips_the_checks_then_moves_to_the_loop(monkeypatch):
    """Before numba is loaded (a process's first ~100 calls), a repeated signature runs the
    NumPy path from the checks' plan, without them (a decode step: ~76 -> ~30 us): any indices
    shape, equal to the oracle; once the compiled loop is available, the signature moves to it."""
    monkeypatch.setattr(_runners, "_ACCEPTED", {})
    real = _compiled.loops_for
    available = [False]
    monkeypatch.setattr(_compiled, "loops_for", lambda n: real(n) if available[0] else None)
    rng = np.random.default_rng(7)
    data = rng.integers(0, 256, (50, 16), dtype=np.uint8)  # 50 rows of 32 4-bit values
    scales = rng.random((50, 2), dtype=np.float32)
    zero_points = rng.integers(0, 256, (50, 1), dtype=np.uint8)  # 2 blocks a row, packed 2 a byte
    calls = [[3, -1, 50], [[0, 7], [49, -51]], 5, [], [[2**31]], [-50, 49]]

    def check_all():
        for ids in calls:
            indices = np.array(ids, dtype=np.int64)
            ours = gs.gather_block_quantized(data, indices, scales, zero_points, block_size=16, bits=4)
            want = oracle_quantized.gather_block_quantized(data, indices, scales, zero_points, block_size=16, bits=4)
            assert_bitwise(ours, want)

    check_all()
    (entry,) = _runners._ACCEPTED.values()
    assert type(entry).__name__ == "Plan"
    check_all()  # from the plan, call after call
    if _compiled.loops() is None:
        pytest.skip("numba is not installed: the loop cannot take over")
    available[0] = True
    check_all()
    (entry,) = _runners._ACCEPTED.values()
    assert type(entry) is kernel.Compiled
    check_all()


@pytest.mark.parametrize("t2", [np.float32, np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("bits", [2, 4, 8])
def test_the_loops_vector_chunks_and_their_tails_equal_the_oracle(bits, t2, path):
    """uint8 tables are dequantized 16 codes a vector (float16 rounded in the vector where the
    CPU has F16C): rows whose blocks end in a partial chunk (a tail of 4 to 12 codes after whole
    chunks, a last block shorter than one chunk), with and without zero points, out-of-range
    ids giving zero rows, and scales from 2**-40 to 2**20 (float16 subnormals, ties, overflow to
    inf) with 0, inf and NaN among them: equal to the oracle bit for bit."""
    rng = np.random.default_rng(bits)
    per = 8 // bits
    exponents = rng.integers(-40, 21, 64)
    for q, block in ((36, 32), (56, 16), (80, 64), (12 if bits < 8 else 8, 16), (160, 128)):
        q -= q % per
        nblocks = -(-q // block)
        data = _pack(rng.integers(0, 1 << bits, (30, q), dtype=np.uint8), bits)
        scales = (rng.random((30, nblocks), dtype=np.float32) + 0.5) * np.exp2(rng.choice(exponents, (30, nblocks)))
        scales.flat[:4] = [0.0, np.inf, np.nan, -3.0]
        with np.errstate(over="ignore"):
            scales = scales.astype(t2)
        zp = _pack(rng.integers(0, 1 << bits, (30, nblocks), dtype=np.uint8), bits)
        ids = np.array([[0, 1, 2, 29, -1, 30, -31, 2**31, 5], [7, 8, 9, 10, 11, 12, 13, 14, -30]])
        for zero_points in (None, zp):
            attrs = dict(block_size=block, bits=bits)
            with np.errstate(invalid="ignore", over="ignore"):
                want = oracle_quantized.gather_block_quantized(data, ids, scales, zero_points, **attrs)
            ours = gather_block_quantized(data, ids, scales, zero_points, **attrs)
            assert_bitwise(ours, want)
            assert not _bits(ours[0, 5:8]).any() and _bits(ours[0, 3]).any()  # zero rows out of range only
