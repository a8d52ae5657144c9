"""A zoo of real architectures in plain PyTorch, exported to ONNX by both exporters, for ``bench_hosted.py``.

    python benchmarks/hosted_models.py [OUT_DIR]      # default /tmp/hosted_models

Each architecture is a small ``torch.nn.Module`` with random weights (seeded: the same weights
and inputs on every run) whose forward takes tensors. ``build`` exports each one with the
dynamo exporter (``torch.onnx.export(..., dynamo=True, optimize=True)``) and the TorchScript
exporter (``dynamo=False``), both at opset 18, into ``OUT_DIR`` as ``<arch>-<exporter>.onnx``
with its inputs beside it (``<arch>-<exporter>.npz``); a file already there is not exported
again, so a rerun takes seconds. Every model is then checked: it loads in onnxruntime
(CPUExecutionProvider) and its outputs on one thread equal PyTorch's eager ones within rtol
1e-4 / atol 1e-5 (on two, onnxruntime's ScatterND add drops duplicate updates: gat and
segment-sum would fail). An export or a check that fails prints one line to stderr (model,
exporter, why) and leaves that entry out; it never stops the others. Where they fail today
(torch 2.13): the TorchScript exporter refuses ``index_add`` with more rows added than there
are targets (segment-sum) and ``scatter_reduce(include_self=False)`` (gat).

The architectures, each sized to run in 0.1-20 ms in onnxruntime on one thread:

- ``bert``: token and position embeddings, a 2-layer ``nn.TransformerEncoder``, a pooler.
- ``gpt-kv``: one decode step of a 2-layer decoder with a static KV cache written at
  ``position`` by ``index_copy``.
- ``gcn``: 2-layer GCN (2,000 nodes, 10,000 edges): ``x[src]`` gathered, ``scatter_add`` into
  ``dst`` (messages and degrees), mean-normalised.
- ``gat``: 1-layer GAT, per-destination softmax by ``scatter_reduce('amax',
  include_self=False)``, ``scatter_add`` and ``index_add``.
- ``segment-sum``: ``index_add`` pooling of 200,000 rows of 8 into 64 segments (docs/models.md's
  case), then a Linear.
- ``dlrm``: 3 ``nn.EmbeddingBag`` tables (sum, offsets: a Loop per table in both exports),
  bottom/top MLPs, pairwise dots picked by ``tril_indices``.
- ``moe``: router, top-2 of 4 experts over 64 tokens, ``gather`` of expert outputs,
  ``scatter_add`` combine and per-expert load.
- ``sampler``: a sampling head on (4, 1000) logits: repetition penalty (``gather``, ``scatter``),
  ``topk`` and a ``scatter`` into a -inf mask, top-p as transformers writes it (sort, scatter of
  the removal mask), softmax, argmax, ``gather`` of its probability.
- ``t5ish``: a 2+2-layer ``nn.Transformer`` with embeddings.
- ``lstm-lm``: Embedding, 2-layer ``nn.LSTM``, Linear.
- ``cnn``: a ResNet-like net, 3 residual blocks with BatchNorm (eval).
- ``vit-relpos``: a ViT block on 8x8 patches with Swin's relative position bias table
  gathered by an index buffer (exported with that Gather kept: see ``UNFOLDED``).
- ``scatter-max-pool``: GNN readout, ``scatter_reduce('amax')`` of 5,000 node features into 16
  graphs.

``python benchmarks/hosted_models.py`` prints one line per entry: its name, node count
(subgraphs included), onnxruntime's median time per run on one thread and the indexing ops in
the graph (Scatter* with their reduction).
"""

from __future__ import annotations

import contextlib
import io
import itertools
import logging
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch
from torch import nn
from torch.nn import functional as F

OPSET = 18
RTOL, ATOL = 1e-4, 1e-5
INDEXING = ("Gather", "GatherElements", "GatherND", "ScatterND", "ScatterElements", "Scatter")


@dataclass
class Entry:
    """One exported model: ``name`` is ``<arch>-<exporter>``; ``feeds`` are valid inputs."""

    name: str
    arch: str
    exporter: str
    path: Path
    feeds: dict[str, np.ndarray]


# ---------------------------------------------------------------------------------------------
# The architectures


class Bert(nn.Module):
    def __init__(self, vocab=1000, d=64, heads=4, layers=2, max_len=64):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_len, d)
        self.norm = nn.LayerNorm(d)
        layer = nn.TransformerEncoderLayer(d, heads, dim_feedforward=2 * d, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.pooler = nn.Linear(d, d)

    def forward(self, input_ids):
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        h = self.norm(self.tok(input_ids) + self.pos(positions))
        h = self.encoder(h)
        return h, torch.tanh(self.pooler(h[:, 0]))


class _DecoderBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads, self.head_dim = heads, d // heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, h, position, past_k, past_v, visible):
        b, t, d = h.shape
        q, k, v = self.qkv(self.ln1(h)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, self.head_dim).transpose(1, 2) for z in (q, k, v))
        past_k = past_k.index_copy(2, position, k)  # the new key and value into the cache at `position`
        past_v = past_v.index_copy(2, position, v)
        scores = (q @ past_k.transpose(-1, -2)) * self.head_dim**-0.5
        scores = scores.masked_fill(~visible, float("-inf"))
        y = (scores.softmax(-1) @ past_v).transpose(1, 2).reshape(b, t, d)
        h = h + self.proj(y)
        return h + self.mlp(self.ln2(h)), past_k, past_v


class GptKv(nn.Module):
    def __init__(self, vocab=4000, d=128, heads=4, layers=2, max_len=128):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_len, d)
        self.blocks = nn.ModuleList(_DecoderBlock(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, input_ids, position, past_k0, past_v0, past_k1, past_v1):
        h = self.tok(input_ids) + self.pos(position)[:, None]
        visible = torch.arange(past_k0.shape[2], device=position.device) <= position  # (past_len,)
        new = []
        for block, (past_k, past_v) in zip(self.blocks, ((past_k0, past_v0), (past_k1, past_v1)), strict=True):
            h, past_k, past_v = block(h, position, past_k, past_v, visible)
            new += [past_k, past_v]
        return (self.head(self.ln_f(h)), *new)


class Gcn(nn.Module):
    def __init__(self, feats=16, hidden=32, classes=8):
        super().__init__()
        self.lin1 = nn.Linear(feats, hidden)
        self.lin2 = nn.Linear(hidden, classes)

    @staticmethod
    def propagate(h, src, dst):
        # scatter_add rather than index_add_: the TorchScript exporter refuses index_add_ with more
        # rows added than there are targets (and would write a Scatter without reduction)
        summed = torch.zeros_like(h).scatter_add_(0, dst[:, None].expand(-1, h.shape[1]), h[src])
        ones = torch.ones_like(dst, dtype=h.dtype)
        degree = torch.zeros(h.shape[0], dtype=h.dtype, device=h.device).scatter_add(0, dst, ones)
        return summed / degree.clamp(min=1)[:, None]

    def forward(self, x, edge_index):
        src, dst = edge_index[0], edge_index[1]
        h = torch.relu(self.propagate(self.lin1(x), src, dst))
        return self.propagate(self.lin2(h), src, dst)


class Gat(nn.Module):
    def __init__(self, feats=16, out=32):
        super().__init__()
        self.lin = nn.Linear(feats, out, bias=False)
        self.att_src = nn.Parameter(torch.randn(out) * 0.2)
        self.att_dst = nn.Parameter(torch.randn(out) * 0.2)
        self.bias = nn.Parameter(torch.randn(out) * 0.1)

    def forward(self, x, edge_index):
        src, dst = edge_index[0], edge_index[1]
        h = self.lin(x)
        score = F.leaky_relu((h * self.att_src).sum(-1)[src] + (h * self.att_dst).sum(-1)[dst], 0.2)
        zeros = torch.zeros(h.shape[0], dtype=h.dtype, device=h.device)
        top = zeros.scatter_reduce(0, dst, score, "amax", include_self=False)
        e = torch.exp(score - top[dst])
        alpha = e / zeros.scatter_add(0, dst, e)[dst]
        out = torch.zeros_like(h).index_add(0, dst, h[src] * alpha[:, None])
        return F.elu(out + self.bias)


class SegmentSum(nn.Module):
    def __init__(self, segments=64, feats=8, out=16):
        super().__init__()
        self.segments = segments
        self.lin = nn.Linear(feats, out)

    def forward(self, rows, segment):
        return self.lin(rows.new_zeros(self.segments, rows.shape[1]).index_add(0, segment, rows))


def _mlp(*sizes, last=None):
    layers: list[nn.Module] = []
    for a, b in itertools.pairwise(sizes):
        layers += [nn.Linear(a, b), nn.ReLU()]
    if last is not None:
        layers[-1] = last
    return nn.Sequential(*layers)


class Dlrm(nn.Module):
    def __init__(self, dense=13, tables=(1000, 500, 200), dim=16):
        super().__init__()
        self.bottom = _mlp(dense, 64, dim)
        self.tables = nn.ModuleList(nn.EmbeddingBag(n, dim, mode="sum") for n in tables)
        features = len(tables) + 1
        rows, cols = torch.tril_indices(features, features, offset=-1)
        self.register_buffer("rows", rows, persistent=False)
        self.register_buffer("cols", cols, persistent=False)
        self.top = _mlp(dim + len(rows), 64, 1, last=nn.Sigmoid())

    def forward(self, dense, ids0, offsets0, ids1, offsets1, ids2, offsets2):
        x = self.bottom(dense)
        ids, offsets = (ids0, ids1, ids2), (offsets0, offsets1, offsets2)
        bags = [table(i, o) for table, i, o in zip(self.tables, ids, offsets, strict=True)]
        t = torch.stack([x, *bags], dim=1)  # (batch, features, dim)
        dots = (t @ t.transpose(1, 2))[:, self.rows, self.cols]  # the pairwise dots below the diagonal
        return self.top(torch.cat([x, dots], dim=1))


class Moe(nn.Module):
    def __init__(self, d=64, hidden=256, experts=4, k=2):
        super().__init__()
        self.k = k
        self.router = nn.Linear(d, experts)
        self.experts = nn.ModuleList(_mlp(d, hidden, d, last=nn.Identity()) for _ in range(experts))

    def forward(self, x):
        tokens, d = x.shape
        weight, chosen = torch.topk(self.router(x), self.k, dim=-1)  # (tokens, k)
        weight = weight.softmax(-1)
        outputs = torch.stack([e(x) for e in self.experts], dim=1)  # (tokens, experts, d)
        picked = outputs.gather(1, chosen[:, :, None].expand(tokens, self.k, d))  # (tokens, k, d)
        token = torch.arange(tokens, device=x.device).repeat_interleave(self.k)[:, None].expand(-1, d)
        y = x.new_zeros(tokens, d).scatter_add(0, token, (picked * weight[:, :, None]).reshape(-1, d))
        load = x.new_zeros(tokens, len(self.experts)).scatter_add(1, chosen, weight).sum(0)  # per expert
        return y, load


class Sampler(nn.Module):
    def __init__(self, k=50, top_p=0.9, temperature=0.8, penalty=1.3):
        super().__init__()
        self.k, self.top_p, self.temperature, self.penalty = k, top_p, temperature, penalty

    def forward(self, logits, previous):
        seen = logits.gather(1, previous)  # the repetition penalty on the tokens generated so far
        seen = torch.where(seen < 0, seen * self.penalty, seen / self.penalty)
        logits = logits.scatter(1, previous, seen)  # duplicates in `previous` write equal values
        values, ids = torch.topk(logits / self.temperature, self.k, dim=-1)  # top-k
        masked = torch.full_like(logits, float("-inf")).scatter(1, ids, values)
        # top-p as transformers' TopPLogitsWarper writes it: sort the whole row, scatter the removal
        # mask back (ties among the -inf entries sort either way: all of them are removed)
        ordered, order = torch.sort(masked, descending=False)
        remove = ordered.softmax(-1).cumsum(-1) <= (1 - self.top_p)
        remove[:, -1:] = False  # the best always stays
        masked = masked.masked_fill(remove.scatter(1, order, remove), float("-inf"))
        probs = masked.softmax(-1)
        token = probs.argmax(-1, keepdim=True)
        return token, probs.gather(1, token), probs


class T5ish(nn.Module):
    def __init__(self, vocab=1000, d=64, heads=4, max_len=64):
        super().__init__()
        self.src_tok, self.tgt_tok = nn.Embedding(vocab, d), nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_len, d)
        self.transformer = nn.Transformer(d, heads, 2, 2, dim_feedforward=2 * d, dropout=0.0, batch_first=True)
        self.out = nn.Linear(d, vocab)

    def forward(self, src_ids, tgt_ids):
        src_pos = torch.arange(src_ids.shape[1], device=src_ids.device)
        tgt_pos = torch.arange(tgt_ids.shape[1], device=tgt_ids.device)
        causal = torch.triu(torch.full((tgt_ids.shape[1],) * 2, float("-inf"), device=tgt_ids.device), diagonal=1)
        h = self.transformer(self.src_tok(src_ids) + self.pos(src_pos), self.tgt_tok(tgt_ids) + self.pos(tgt_pos),
                             tgt_mask=causal, tgt_is_causal=True)  # not compared with a causal mask
        return self.out(h)


class LstmLm(nn.Module):
    def __init__(self, vocab=1000, d=64, layers=2):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.lstm = nn.LSTM(d, d, layers, batch_first=True)
        self.out = nn.Linear(d, vocab)

    def forward(self, input_ids):
        h, (h_n, c_n) = self.lstm(self.tok(input_ids))
        return self.out(h), h_n, c_n


class _Residual(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = (nn.Identity() if stride == 1 and cin == cout
                         else nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.shortcut(x))


class Cnn(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.blocks = nn.Sequential(_Residual(16, 16, 1), _Residual(16, 32, 2), _Residual(32, 64, 2))
        self.fc = nn.Linear(64, classes)
        for m in self.modules():  # eval-mode BatchNorm with statistics that are not the identity
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.normal_(0, 0.1)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.data.uniform_(0.5, 1.5)
                m.bias.data.normal_(0, 0.1)

    def forward(self, image):
        return self.fc(self.blocks(self.stem(image)).mean((2, 3)))


class VitRelPos(nn.Module):
    def __init__(self, d=64, heads=4, window=8, patch=4, classes=10):
        super().__init__()
        self.heads, self.window = heads, window
        self.patch = nn.Conv2d(3, d, patch, patch)
        self.table = nn.Parameter(torch.randn((2 * window - 1) ** 2, heads) * 0.2)
        coords = torch.stack(torch.meshgrid(torch.arange(window), torch.arange(window), indexing="ij")).flatten(1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (window - 1)  # (N, N, 2)
        self.register_buffer("rel_index", rel[..., 0] * (2 * window - 1) + rel[..., 1])  # (N, N), as Swin's
        self.ln1, self.ln2, self.ln_f = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
        self.head = nn.Linear(d, classes)

    def forward(self, pixels):
        x = self.patch(pixels).flatten(2).transpose(1, 2)  # (batch, window**2, d)
        b, n, d = x.shape
        bias = self.table[self.rel_index.view(-1)].view(n, n, self.heads).permute(2, 0, 1)
        q, k, v = self.qkv(self.ln1(x)).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        attn = ((q @ k.transpose(-1, -2)) * (d // self.heads) ** -0.5 + bias).softmax(-1)
        x = x + self.proj((attn @ v).transpose(1, 2).reshape(b, n, d))
        x = x + self.mlp(self.ln2(x))
        return self.head(self.ln_f(x).mean(1))


class ScatterMaxPool(nn.Module):
    def __init__(self, feats=32, hidden=64, graphs=16, classes=4):
        super().__init__()
        self.graphs = graphs
        self.lin1 = nn.Linear(feats, hidden)
        self.lin2 = nn.Linear(hidden, classes)

    def forward(self, x, graph):
        h = torch.relu(self.lin1(x))
        index = graph[:, None].expand_as(h)
        # h >= 0, so the zeros kept by include_self=True change no graph's maximum (every graph has
        # a node); the TorchScript exporter refuses include_self=False (gat has it)
        pooled = h.new_zeros(self.graphs, h.shape[1]).scatter_reduce(0, index, h, "amax", include_self=True)
        return self.lin2(pooled.reshape(self.graphs, -1))  # TorchScript's export loses the rank


# ---------------------------------------------------------------------------------------------
# Inputs: each architecture's (module, named inputs in forward's order, output names)


def _graph(rng, nodes, edges):
    return rng.integers(0, nodes, (2, edges))


def _bags(rng, rows, batch, most=5):
    lengths = rng.integers(1, most + 1, batch)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    return rng.integers(0, rows, int(lengths.sum())), offsets


def _bert(rng):
    return Bert(), {"input_ids": rng.integers(0, 1000, (2, 32))}, ["hidden", "pooled"]


def _gpt_kv(rng):
    heads, past_len, head_dim = 4, 128, 32
    caches = {n: rng.standard_normal((1, heads, past_len, head_dim), np.float32)
              for n in ("past_k0", "past_v0", "past_k1", "past_v1")}
    inputs = {"input_ids": rng.integers(0, 4000, (1, 1)), "position": np.array([77]), **caches}
    return GptKv(), inputs, ["logits", "present_k0", "present_v0", "present_k1", "present_v1"]


def _gcn(rng):
    inputs = {"x": rng.standard_normal((2000, 16), np.float32), "edge_index": _graph(rng, 2000, 10_000)}
    return Gcn(), inputs, ["out"]


def _gat(rng):
    inputs = {"x": rng.standard_normal((2000, 16), np.float32), "edge_index": _graph(rng, 2000, 10_000)}
    return Gat(), inputs, ["out"]


def _segment_sum(rng):
    inputs = {"rows": rng.standard_normal((200_000, 8), np.float32), "segment": rng.integers(0, 64, 200_000)}
    return SegmentSum(), inputs, ["out"]


def _dlrm(rng):
    inputs: dict[str, np.ndarray] = {"dense": rng.standard_normal((32, 13), np.float32)}
    for k, rows in enumerate((1000, 500, 200)):
        inputs[f"ids{k}"], inputs[f"offsets{k}"] = _bags(rng, rows, 32)
    return Dlrm(), inputs, ["click"]


def _moe(rng):
    return Moe(), {"x": rng.standard_normal((64, 64), np.float32)}, ["y", "load"]


def _sampler(rng):
    inputs = {"logits": rng.standard_normal((4, 1000), np.float32) * 3, "previous": rng.integers(0, 1000, (4, 64))}
    return Sampler(), inputs, ["token", "token_prob", "probs"]


def _t5ish(rng):
    return T5ish(), {"src_ids": rng.integers(0, 1000, (2, 16)), "tgt_ids": rng.integers(0, 1000, (2, 8))}, ["logits"]


def _lstm_lm(rng):
    return LstmLm(), {"input_ids": rng.integers(0, 1000, (2, 16))}, ["logits", "h_n", "c_n"]


def _cnn(rng):
    return Cnn(), {"image": rng.standard_normal((1, 3, 64, 64), np.float32)}, ["logits"]


def _vit_relpos(rng):
    return VitRelPos(), {"pixels": rng.standard_normal((2, 3, 32, 32), np.float32)}, ["logits"]


def _scatter_max_pool(rng):
    inputs = {"x": rng.standard_normal((5000, 32), np.float32), "graph": np.sort(rng.integers(0, 16, 5000))}
    return ScatterMaxPool(), inputs, ["out"]


ARCHS: dict[str, Callable] = {
    "bert": _bert, "gpt-kv": _gpt_kv, "gcn": _gcn, "gat": _gat, "segment-sum": _segment_sum, "dlrm": _dlrm,
    "moe": _moe, "sampler": _sampler, "t5ish": _t5ish, "lstm-lm": _lstm_lm, "cnn": _cnn, "vit-relpos": _vit_relpos,
    "scatter-max-pool": _scatter_max_pool,
}


# Exported with the indexing nodes of constants kept: both exporters fold the table's Gather (a
# parameter indexed by a buffer) into one constant otherwise, and the graph would hold no Gather
# (onnxruntime still folds it when it loads the model).
UNFOLDED = {"vit-relpos"}


def make(arch: str) -> tuple[nn.Module, dict[str, np.ndarray], list[str]]:
    """Return ``arch``'s module (seeded weights, eval mode), its inputs (seeded) and its output names."""
    seed = sum(arch.encode()) * 7919 % 2**31  # fixed per architecture, independent of the others
    torch.manual_seed(seed)
    module, inputs, outputs = ARCHS[arch](np.random.default_rng(seed))
    return module.eval(), inputs, outputs


# ---------------------------------------------------------------------------------------------
# Export and check


@contextlib.contextmanager
def _quiet():
    """Silence the exporters: Python prints, warnings, logging and what C++ writes to fds 1 and 2."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(os.devnull, "w") as null, warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        os.dup2(null.fileno(), 1)
        os.dup2(null.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            logging.disable(logging.NOTSET)


def _keep_indexing(node) -> bool | None:
    """onnxscript's constant folder hook: never fold an indexing node, the default rules for the rest."""
    return False if node.op_type in INDEXING else None


def export(module: nn.Module, inputs: dict[str, np.ndarray], outputs: list[str], exporter: str, path: Path,
           *, fold: bool = True) -> None:
    """Export ``module`` on ``inputs`` with ``exporter`` ('dynamo' or 'torchscript') at opset 18 to ``path``.

    ``fold=False`` keeps the indexing nodes whose inputs are all constants: the dynamo export is
    optimized as ``optimize=True`` does but with those nodes left alone, and the TorchScript one
    is written without constant folding.
    """
    args = tuple(torch.from_numpy(v) for v in inputs.values())
    partial = path.with_suffix(".partial.onnx")
    if exporter not in ("dynamo", "torchscript"):
        raise ValueError(f"unknown exporter {exporter!r}: 'dynamo' or 'torchscript'")
    fastpath = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)  # else TorchScript traces _transformer_encoder_layer_fwd
    try:
        with _quiet(), torch.no_grad():
            if exporter == "dynamo":
                program = torch.onnx.export(module, args, dynamo=True, opset_version=OPSET, optimize=fold,
                                            input_names=list(inputs), output_names=outputs, verbose=False)
                if not fold:  # what optimize=True runs (torch's ONNXProgram.optimize), indexing nodes kept
                    import onnxscript
                    from onnxscript.rewriter import onnx_fusions

                    onnxscript.optimizer.optimize_ir(program.model, should_fold=_keep_indexing)
                    onnx_fusions.fuse(program.model)
                program.save(str(partial), external_data=False)
            else:
                torch.onnx.export(module, args, str(partial), dynamo=False, opset_version=OPSET,
                                  do_constant_folding=fold, input_names=list(inputs), output_names=outputs,
                                  verbose=False)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    finally:
        torch.backends.mha.set_fastpath_enabled(fastpath)
    partial.replace(path)  # only a whole export is ever found on a rerun


def _eager(module: nn.Module, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    with torch.no_grad():
        result = module(*(torch.from_numpy(v) for v in inputs.values()))
    result = result if isinstance(result, tuple) else (result,)
    return [r.numpy() for r in result]


def _ort_session(path: Path, threads: int = 0) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    if threads:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def check(path: Path, feeds: dict[str, np.ndarray], expected: list[np.ndarray]) -> str | None:
    """Why onnxruntime's outputs for ``path`` differ from ``expected`` (None: they agree within tolerance).

    onnxruntime runs on one thread: on more, its ScatterND with reduction='add' loses some of the
    duplicate updates (gat and segment-sum's dynamo exports miss by 0.4 and 25 at 2 threads).
    """
    session = _ort_session(path, threads=1)
    got = session.run(None, feeds)
    if len(got) != len(expected):
        return f"{len(got)} outputs, eager gives {len(expected)}"
    for out, a, b in zip(session.get_outputs(), got, expected, strict=True):
        a = np.asarray(a)
        if a.shape != b.shape:
            return f"output {out.name}: shape {a.shape}, eager {b.shape}"
        if not np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=RTOL, atol=ATOL, equal_nan=True):
            with np.errstate(invalid="ignore"):
                worst = np.nanmax(np.abs(a.astype(np.float64) - b))
            return f"output {out.name}: max |difference| {worst:.3g} over rtol {RTOL} / atol {ATOL}"
    return None


def _say(name: str, exporter: str, what: str, exc: BaseException | str) -> None:
    text = exc if isinstance(exc, str) else f"{type(exc).__name__}: {str(exc).split(' [Caused by')[0]}"
    print(f"hosted_models: {name} ({exporter}): {what}: {' '.join(str(text).split())[:300]}", file=sys.stderr)


def build(out_dir: str | Path, *, exporters=("dynamo", "torchscript"), only: list[str] | None = None) -> list[Entry]:
    """Export every architecture (or those in ``only``) with each exporter into ``out_dir``; return the entries.

    A model already in ``out_dir`` is not exported again. Every model is checked against PyTorch's
    eager outputs in onnxruntime; a failed export or check is one line on stderr and no entry.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    unknown = set(only or ()) - set(ARCHS)
    if unknown:
        raise ValueError(f"unknown architectures {sorted(unknown)}: choose from {list(ARCHS)}")
    entries = []
    for arch in ARCHS:
        if only is not None and arch not in only:
            continue
        module, inputs, outputs = make(arch)
        expected = _eager(module, inputs)
        for exporter in exporters:
            name = f"{arch}-{exporter}"
            path = out_dir / f"{name}.onnx"
            stale = " (an earlier export: delete it to export again)" if path.exists() else ""
            if not stale:
                try:
                    export(module, inputs, outputs, exporter, path, fold=arch not in UNFOLDED)
                except Exception as exc:  # noqa: BLE001 - one failed export leaves the others
                    _say(arch, exporter, "export failed", exc)
                    continue
            try:
                names = [i.name for i in onnx.load(str(path), load_external_data=False).graph.input]
                missing = [n for n in names if n not in inputs]
                if missing:
                    raise ValueError(f"graph inputs {missing} are not the forward's {list(inputs)}")
                feeds = {n: inputs[n] for n in names}  # an exporter may drop an input the graph does not use
                why = check(path, feeds, expected)
            except Exception as exc:  # noqa: BLE001 - a model onnxruntime cannot load or run
                _say(arch, exporter, f"onnxruntime failed{stale}", exc)
                continue
            if why is not None:
                _say(arch, exporter, f"outputs differ from eager{stale}", why)
                continue
            npz = path.with_suffix(".npz")
            if not (stale and npz.exists()):
                np.savez(npz, **feeds)
            entries.append(Entry(name, arch, exporter, path, feeds))
    return entries


# ---------------------------------------------------------------------------------------------
# Summary


def _graphs(model: onnx.ModelProto):
    stack = [model.graph, *(f for f in model.functions)]
    while stack:
        graph = stack.pop()
        yield graph
        for node in graph.node:
            for attr in node.attribute:
                stack.extend([attr.g] if attr.HasField("g") else list(attr.graphs))


def summary(path: Path) -> tuple[int, list[str]]:
    """The node count of ``path`` (subgraphs and functions included) and its indexing ops, with reductions."""
    model = onnx.load(str(path), load_external_data=False)
    count, ops = 0, set()
    for graph in _graphs(model):
        count += len(graph.node)
        for node in graph.node:
            if node.op_type in INDEXING and node.domain in ("", "ai.onnx"):
                reduction = next((a.s.decode() for a in node.attribute if a.name == "reduction"), "none")
                ops.add(f"{node.op_type}({reduction})" if node.op_type.startswith("Scatter") else node.op_type)
    return count, sorted(ops)


def time_ort(entry: Entry, budget_s: float = 0.3) -> float:
    """onnxruntime's median seconds per run of ``entry`` on one thread."""
    session = _ort_session(entry.path, threads=1)
    for _ in range(3):
        session.run(None, entry.feeds)
    times: list[float] = []
    deadline = time.perf_counter() + budget_s
    while len(times) < 10 or (time.perf_counter() < deadline and len(times) < 2000):
        start = time.perf_counter()
        session.run(None, entry.feeds)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str]) -> int:
    out_dir = Path(argv[0]) if argv else Path("/tmp/hosted_models")
    start = time.perf_counter()
    entries = build(out_dir)
    built = time.perf_counter() - start
    for entry in entries:
        nodes, ops = summary(entry.path)
        print(f"{entry.name:28s} {nodes:5d} nodes  {time_ort(entry) * 1e3:8.3f} ms  {', '.join(ops) or '-'}")
    print(f"{len(entries)} entries in {out_dir}, built in {built:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
