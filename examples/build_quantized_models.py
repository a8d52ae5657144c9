"""Build the GatherBlockQuantized test models: tiny LLMs exported the way users export them.

Regenerates ``tests/data/quantized/`` (issue 27): each ``NAME.onnx`` (weights inline), its
``NAME_inputs.npz`` and, where onnxruntime's CPU runs it, ``NAME_outputs.npz`` (onnxruntime's
outputs, with the embedding node's output as ``embedding``)::

    python examples/build_quantized_models.py

Requirements, none of them dependencies of gather_scatter: torch (CPU is enough), then::

    pip install onnxruntime onnxruntime-genai onnx-ir
    pip install --no-deps transformers   # keeps the installed torch
    pip install huggingface-hub regex safetensors tokenizers typer
    pip install --no-deps olive-ai torchmetrics   # Olive 0.13, for the olive_* models
    pip install optuna pandas alembic colorlog lightning-utilities questionary opentelemetry-sdk

(Olive's requirements are only for the ``olive_*`` models: ``--only NAME ...`` builds some.)

Nothing is downloaded: each model is a random-weight Hugging Face config saved locally with
``save_pretrained`` (with a word-level tokenizer, which the builder copies), then exported by
onnxruntime-genai's model builder, ``python -m onnxruntime_genai.models.builder -i HF -o OUT
-p int4 -e cpu`` (onnxruntime-genai 0.18), or exported in float32 and quantized by onnxruntime's
``python -m onnxruntime.quantization.matmul_nbits_quantizer --op_types_to_quantize MatMul
Gather`` or by Olive's ``olive run --config`` (its ``OnnxBlockWiseRtnQuantization`` pass and its
``QuantizeEmbeddingInt8`` graph surgery). Every model has a vocabulary of 1,000, one layer, heads of 16 and one KV head.

The models (:data:`MODELS`):

- ``qwen2_h64_int4``: Qwen2, hidden 64, tied embeddings, ``-p int4 -e cpu``: the embedding is
  a GatherBlockQuantized reading the LM head's 4-bit weight (packed uint8, blocks of 32, float
  scales, no zero points) through a Reshape;
- ``qwen2_h80_int4``: the same with hidden 80, which the builder pads to 96 (three blocks) and
  slices back to 80 after the node (the padded columns hold -8 x scale, so that Slice matters);
- ``qwen2_h64_int4_fp16``: ``-p int4 -e cuda``: float16 scales, output and KV cache (built on a
  CPU; onnxruntime's CPU runs it);
- ``qwen2_h64_int4_bf16``: ``-p int4 -e cuda --extra_options use_cuda_bf16=true``: bfloat16 scales,
  output and KV cache. onnxruntime's CPU can run neither its GatherBlockQuantized nor its
  bfloat16 MatMulNBits (no outputs file);
- ``qwen2_h64_int4_asym``: ``--extra_options is_symmetric=false``: an invalid model the builder
  writes: a GatherBlockQuantized with two inputs (no scales) reading the float LM head weight,
  which every engine must refuse (no outputs file);
- ``quantizer_int4``, ``quantizer_uint4_zp``: an untied Qwen2 of hidden 48 exported in float32
  (``-p fp32``), then quantized by ``matmul_nbits_quantizer`` with Gather in blocks of 32 (48
  columns: a partial last block): symmetric (int4 data) and ``--symmetric False`` (uint4 data
  and uint4 zero points);
- ``olive_rtn_int4``: an untied Qwen2 of hidden 64 exported in float32, then Olive's
  ``OnnxBlockWiseRtnQuantization`` (blocks of 32): packed uint8 4-bit data as an initializer,
  no zero points (the default, 8);
- ``olive_int8``: the same export, RTN for the MatMuls and Olive's ``QuantizeEmbeddingInt8``
  surgery for the embedding: 8-bit uint8 data with zero points of 128.

The ids fed (:data:`IDS`) hold every out-of-range kind onnxruntime gives a zero row for.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass

import numpy as np
import onnx

OUT = pathlib.Path(__file__).resolve().parents[1] / "tests" / "data" / "quantized"
VOCAB = 1000
# In range, -1 (row V-1), then out of range: V, V+1000, -V-1, 2**31, INT64 min and max.
IDS = np.array([[0, 1, 998, 999, -1, -VOCAB, VOCAB, VOCAB + 1000, -VOCAB - 1, 2**31, -(2**63), 2**63 - 1, 7]])
OUT_OF_RANGE = (6, 7, 8, 9, 10, 11)  # positions in IDS[0]


@dataclass(frozen=True)
class Spec:
    """A model of the set: its Hugging Face architecture and config, and the commands."""

    name: str
    arch: str  # "qwen2", "llama", "phi3", "gemma"
    hidden: int = 64
    tied: bool = True
    builder: tuple[str, ...] = ("-p", "int4", "-e", "cpu")
    quantizer: tuple[str, ...] = ()  # matmul_nbits_quantizer's options, after a -p fp32 export
    olive: str = ""  # Olive's passes (JSON), after a -p fp32 export
    seed: int = 0
    runs_on_cpu: bool = True

    @property
    def heads(self) -> int:
        """Attention heads of 16 (onnxruntime's GroupQueryAttention takes multiples of 16)."""
        return self.hidden // 16


MODELS = (
    Spec("qwen2_h64_int4", "qwen2"),
    Spec("qwen2_h80_int4", "qwen2", hidden=80, seed=1),
    Spec("qwen2_h64_int4_fp16", "qwen2", builder=("-p", "int4", "-e", "cuda")),
    Spec(
        "qwen2_h64_int4_bf16",
        "qwen2",
        builder=("-p", "int4", "-e", "cuda", "--extra_options", "use_cuda_bf16=true"),
        runs_on_cpu=False,
    ),
    Spec(
        "qwen2_h64_int4_asym",
        "qwen2",
        builder=("-p", "int4", "-e", "cpu", "--extra_options", "is_symmetric=false"),
        runs_on_cpu=False,
    ),
    Spec(
        "quantizer_int4",
        "qwen2",
        hidden=48,
        tied=False,
        seed=2,
        quantizer=("--op_types_to_quantize", "MatMul", "Gather", "--block_size", "32"),
    ),
    Spec(
        "quantizer_uint4_zp",
        "qwen2",
        hidden=48,
        tied=False,
        seed=2,
        quantizer=("--op_types_to_quantize", "MatMul", "Gather", "--block_size", "32", "--symmetric", "False"),
    ),
    Spec(
        "olive_rtn_int4",
        "qwen2",
        tied=False,
        seed=7,
        olive='{"rtn": {"type": "OnnxBlockWiseRtnQuantization", "block_size": 32}}',
    ),
    Spec(
        "olive_int8",
        "qwen2",
        tied=False,
        seed=7,
        olive='{"rtn": {"type": "OnnxBlockWiseRtnQuantization", "block_size": 32, '
        '"nodes_to_exclude": ["/model/embed_tokens/Gather"]}, '
        '"int8": {"type": "GraphSurgeries", "surgeries": [{"surgeon": "QuantizeEmbeddingInt8"}]}}',
    ),
)

#: Built by the tests where onnxruntime-genai is installed (not stored): the other architectures.
BUILT_IN_TESTS = (
    Spec("llama_h64_int4", "llama", seed=3),
    Spec("phi3_h64_int4", "phi3", seed=4),
    Spec("gemma_h64_int4", "gemma", seed=5),
    Spec(
        "qwen2_h64_untied_int4",
        "qwen2",
        tied=False,
        seed=6,
        builder=("-p", "int4", "-e", "cpu", "--extra_options", "op_types_to_quantize=MatMul/Gather"),
    ),
)


def save_hf(spec: Spec, folder: pathlib.Path) -> None:
    """Save ``spec``'s random-weight Hugging Face model and a word-level tokenizer to ``folder``."""
    import torch
    import transformers as tf
    from tokenizers import Tokenizer, models, pre_tokenizers

    torch.manual_seed(spec.seed)
    common = dict(
        vocab_size=VOCAB,
        hidden_size=spec.hidden,
        intermediate_size=2 * spec.hidden,
        num_hidden_layers=1,
        num_attention_heads=spec.heads,
        num_key_value_heads=1,
        max_position_embeddings=256,
        tie_word_embeddings=spec.tied,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    if spec.arch == "qwen2":
        model = tf.Qwen2ForCausalLM(tf.Qwen2Config(**common))
    elif spec.arch == "llama":
        model = tf.LlamaForCausalLM(tf.LlamaConfig(**common))
    elif spec.arch == "phi3":  # equal lengths: the builder's short-RoPE Phi-3 (not LongRoPE)
        model = tf.Phi3ForCausalLM(tf.Phi3Config(**common, original_max_position_embeddings=256))
    elif spec.arch == "gemma":
        model = tf.GemmaForCausalLM(tf.GemmaConfig(**common, head_dim=16))
    else:
        raise ValueError(f"unknown architecture {spec.arch!r}")
    model.eval().save_pretrained(folder)
    vocab = {f"t{i}": i for i in range(VOCAB)}
    vocab["<unk>"] = 0
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tf.PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>").save_pretrained(folder)


def _call(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )


def export(spec: Spec, work: pathlib.Path) -> onnx.ModelProto:
    """Build ``spec`` in ``work`` as its tools do; return the model, weights loaded."""
    hf, out = work / f"hf_{spec.name}", work / f"out_{spec.name}"
    save_hf(spec, hf)
    builder = ("-p", "fp32", "-e", "cpu") if spec.quantizer or spec.olive else spec.builder
    builder_cmd = [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(hf), "-o", str(out)]
    _call([*builder_cmd, "-c", str(work / "cache"), *builder])
    path = out / "model.onnx"
    if spec.quantizer:
        quantized = work / f"q_{spec.name}"
        quantized.mkdir()
        path = quantized / "model.onnx"
        quantizer = [sys.executable, "-m", "onnxruntime.quantization.matmul_nbits_quantizer"]
        _call([*quantizer, "--input_model", str(out / "model.onnx"), "--output_model", str(path), *spec.quantizer])
    if spec.olive:
        config = {
            "input_model": {"type": "ONNXModel", "model_path": str(out / "model.onnx")},
            "systems": {
                "local": {
                    "type": "LocalSystem",
                    "accelerators": [{"device": "cpu", "execution_providers": ["CPUExecutionProvider"]}],
                }
            },
            "passes": json.loads(spec.olive),
            "host": "local",
            "target": "local",
            "output_dir": str(work / f"olive_{spec.name}"),
            "log_severity_level": 3,
        }
        (work / f"{spec.name}.json").write_text(json.dumps(config))
        _call([sys.executable, "-m", "olive", "run", "--config", str(work / f"{spec.name}.json")])
        path = work / f"olive_{spec.name}" / "model.onnx"
    return onnx.load(path)


def embedding_node(model: onnx.ModelProto) -> onnx.NodeProto:
    """Return the model's one com.microsoft GatherBlockQuantized node."""
    (node,) = [n for n in model.graph.node if n.op_type == "GatherBlockQuantized" and n.domain == "com.microsoft"]
    return node


def feeds(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """:data:`IDS`, a mask of ones and empty past KV caches of the model's type."""
    out: dict[str, np.ndarray] = {"input_ids": IDS.astype(np.int64), "attention_mask": np.ones(IDS.shape, np.int64)}
    for value in model.graph.input:
        if value.name.startswith("past_key_values"):
            dims = [d.dim_value for d in value.type.tensor_type.shape.dim]
            dtype = onnx.helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type)
            out[value.name] = np.zeros((IDS.shape[0], dims[1], 0, 16), dtype)  # one KV head of 16
    return out


def with_embedding_output(model: onnx.ModelProto) -> onnx.ModelProto:
    """Return a copy of ``model`` that also returns its GatherBlockQuantized node's output."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    node = embedding_node(copy)
    scales = next(t for t in copy.graph.initializer if t.name == node.input[2])  # T2: the output's type
    copy.graph.output.append(onnx.helper.make_tensor_value_info(node.output[0], scales.data_type, None))
    return copy


def onnxruntime_outputs(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Return onnxruntime's outputs (CPU, one thread), the embedding node's as ``embedding``."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    probe = with_embedding_output(model)
    session = ort.InferenceSession(probe.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    values = dict(zip(names, session.run(None, inputs), strict=True))
    values["embedding"] = values.pop(embedding_node(model).output[0])
    return values


def main(argv: list[str] | None = None) -> None:
    """Build the models of :data:`MODELS` (those ``--only`` names) and save them with their inputs and outputs."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=[spec.name for spec in MODELS], help="build only these models")
    args = parser.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for spec in MODELS:
            if args.only and spec.name not in args.only:
                continue
            model = export(spec, pathlib.Path(tmp))
            embedding_node(model)  # each writes the node
            for node in model.graph.node:
                del node.metadata_props[:]
            onnx.save(model, OUT / f"{spec.name}.onnx")
            inputs = feeds(model)
            np.savez_compressed(OUT / f"{spec.name}_inputs.npz", **inputs)
            if spec.runs_on_cpu:
                np.savez_compressed(OUT / f"{spec.name}_outputs.npz", **onnxruntime_outputs(model, inputs))
            shutil.rmtree(pathlib.Path(tmp) / f"hf_{spec.name}")
            print(spec.name, (OUT / f"{spec.name}.onnx").stat().st_size, "bytes")


if __name__ == "__main__":
    main()
