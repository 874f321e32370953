"""Write a BERT encoder as an ONNX graph straight from its weights, with ``onnx.helper``: no torch.

The graph is the one ``meteora-edge export encoder`` gets from optimum for a BERT model, so
everything that reads an exported encoder reads it too: inputs ``input_ids``,
``attention_mask`` and ``token_type_ids`` (int64, ``batch_size × sequence_length``), output
``last_hidden_state`` (``batch_size × sequence_length × hidden``; the runtime mean-pools it
and the token cover reads its rows), and node names in optimum's style
(``/encoder/layer.0/intermediate/dense/MatMul``) so the int8 recipes of
:mod:`.int8_variants` pick the same MatMuls.

Per layer: self-attention (Q, K, V projections, scores scaled by 1/√head size, the padding
masked out with float32's lowest value as transformers does, softmax, output projection),
residual + LayerNorm, the feed-forward block with the exact erf GELU, residual + LayerNorm.

An MPNet checkpoint (all-mpnet-base-v2) gets MPNet's two differences: positions counted from
the padding id over the non-padding tokens, no token types (inputs ``input_ids`` and
``attention_mask``, as optimum exports MPNet), and a relative position bias added to every
layer's attention scores: the bucket of each (query, key) distance (MPNet's 32 log-spaced
buckets up to distance 128, precomputed for every position pair as an int64 table that the
graph slices to the sequence length) looks up one bias per head.

With a masked-language-model head (``BertForMaskedLM``, e.g. SPLADE) the graph also outputs
``sparse`` (``batch × vocabulary``: log(1 + ReLU(logits)) over the attention mask, max-pooled
over the tokens, as SPLADE scores, where the logits are the transform dense + GELU + LayerNorm,
then the decoder tied to the word embeddings + its bias). It computes the max before the
activation (see ``_mlm_head``) and has no ``logits`` output: the ``batch × sequence ×
vocabulary`` tensor is written once and read once by the max.

Example:
    >>> from meteora_edge.models.checkpoint import read_bert_checkpoint
    >>> ckpt = read_bert_checkpoint("model.safetensors", "config.json")  # doctest: +SKIP
    >>> write_bert_onnx(ckpt, "model.onnx")  # doctest: +SKIP
    ['last_hidden_state']
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import MissingExtraError
from .checkpoint import BertCheckpoint, BertConfig

__all__ = ["OPSET", "OUTPUTS", "build_bert_graph", "write_bert_onnx", "relative_buckets"]

OPSET = 17  # LayerNormalization is an ONNX op from 17; the export's default opset too
OUTPUTS = {"none": ("last_hidden_state",), "mlm": ("last_hidden_state", "sparse")}
_BATCH, _SEQUENCE = "batch_size", "sequence_length"


def _onnx() -> Any:
    try:
        import onnx
    except ImportError:
        raise MissingExtraError("onnx", "onnx") from None
    return onnx


class _Graph:
    """Nodes and initializers being collected, named the way optimum names them."""

    def __init__(self, onnx: Any) -> None:
        self.onnx, self.helper = onnx, onnx.helper
        self.nodes: list[Any] = []
        self.initializers: list[tuple[str, np.ndarray]] = []  # made TensorProtos only inside the model (one copy)

    def weight(self, name: str, array: np.ndarray) -> str:
        self.initializers.append((name, array))
        return name

    def node(self, op: str, inputs: list[str], name: str, **attributes: Any) -> str:
        output = f"{name}_output_0"
        self.nodes.append(self.helper.make_node(op, inputs, [output], name=name, **attributes))
        return output

    def linear(self, x: str, weight: np.ndarray, bias: np.ndarray, prefix: str, key: str) -> str:
        """``x @ weight.T + bias`` (torch's Linear), the weight stored transposed as MatMul wants it."""
        w = self.weight(f"onnx::MatMul_{key}", weight.T)
        b = self.weight(f"{key}.bias", bias)
        return self.node("Add", [b, self.node("MatMul", [x, w], f"{prefix}/MatMul")], f"{prefix}/Add")

    def layer_norm(self, x: str, gamma: np.ndarray, beta: np.ndarray, prefix: str, key: str, eps: float) -> str:
        return self.node("LayerNormalization", [x, self.weight(f"{key}.weight", gamma), self.weight(f"{key}.bias", beta)],
                         f"{prefix}/LayerNormalization", axis=-1, epsilon=eps)

    def gelu(self, x: str, prefix: str) -> str:
        """The exact GELU, 0.5·x·(1 + erf(x/√2)), in the form onnxruntime fuses into one Gelu."""
        scaled = self.node("Div", [x, "const_sqrt2"], f"{prefix}/Div")
        erf = self.node("Erf", [scaled], f"{prefix}/Erf")
        plus = self.node("Add", [erf, "const_one"], f"{prefix}/Add")
        return self.node("Mul", [self.node("Mul", [x, plus], f"{prefix}/Mul"), "const_half"], f"{prefix}/Mul_1")


def relative_buckets(length: int, *, num_buckets: int = 32, max_distance: int = 128) -> np.ndarray:
    """MPNet's bucket of every (query, key) position pair, ``(length, length)`` int64, computed as
    transformers does (float32 logarithms, truncated)."""
    n = -(np.arange(length)[None, :] - np.arange(length)[:, None])
    half = num_buckets // 2
    out = (n < 0).astype(np.int64) * half
    n = np.abs(n)
    exact = half // 2
    scaled = np.log(np.maximum(n, 1).astype(np.float32) / np.float32(exact)) / np.float32(math.log(max_distance / exact))
    large = np.minimum(exact + (scaled * np.float32(half - exact)).astype(np.int64), half - 1)
    return out + np.where(n < exact, n, large)


def _embeddings(g: _Graph, t: Any, config: BertConfig) -> str:
    word = g.node("Gather", [g.weight("embeddings.word_embeddings.weight", t("embeddings.word_embeddings.weight")),
                             "input_ids"], "/embeddings/word_embeddings/Gather")
    if config.relative_buckets:  # MPNet: positions count the non-padding tokens from the padding id, no token types
        pad = g.weight("/embeddings/pad_id", np.array(config.pad_token_id, dtype=np.int64))
        kept = g.node("Cast", [g.node("Not", [g.node("Equal", ["input_ids", pad], "/embeddings/Equal")],
                                      "/embeddings/Not")], "/embeddings/Cast", to=g.onnx.TensorProto.INT64)
        counted = g.node("CumSum", [kept, "const_one_i64"], "/embeddings/CumSum")
        positions = g.node("Add", [g.node("Mul", [counted, kept], "/embeddings/Mul"), pad], "/embeddings/Add_2")
        total = word
    else:
        types = g.node("Gather", [g.weight("embeddings.token_type_embeddings.weight",
                                           t("embeddings.token_type_embeddings.weight")), "token_type_ids"],
                       "/embeddings/token_type_embeddings/Gather")
        shape = g.node("Shape", ["input_ids"], "/embeddings/Shape")
        length = g.node("Gather", [shape, "const_one_i64"], "/embeddings/Gather", axis=0)
        positions = g.node("Range", ["const_zero_i64", length, "const_one_i64"], "/embeddings/Range")
        positions = g.node("Unsqueeze", [positions, "const_axis0"], "/embeddings/Unsqueeze")
        total = g.node("Add", [word, types], "/embeddings/Add")
    position = g.node("Gather", [g.weight("embeddings.position_embeddings.weight",
                                          t("embeddings.position_embeddings.weight")), positions],
                      "/embeddings/position_embeddings/Gather")
    total = g.node("Add", [total, position], "/embeddings/Add_1")
    return g.layer_norm(total, t("embeddings.LayerNorm.weight"), t("embeddings.LayerNorm.bias"),
                        "/embeddings/LayerNorm", "embeddings.LayerNorm", config.layer_norm_eps)


def _position_bias(g: _Graph, t: Any, config: BertConfig) -> str:
    """MPNet's relative position bias ``(1, heads, sequence, sequence)``, shared by every layer."""
    table = g.weight("/encoder/relative_buckets", relative_buckets(config.max_position_embeddings))
    shape = g.node("Shape", ["input_ids"], "/encoder/Shape")
    length = g.node("Slice", [shape, "const_one_i64_1d", "const_two_i64_1d"], "/encoder/Slice")
    ends = g.node("Concat", [length, length], "/encoder/Concat", axis=0)
    buckets = g.node("Slice", [table, "const_zeros_i64_2", ends, "const_axes01"], "/encoder/Slice_1")
    bias = g.node("Gather", [g.weight("encoder.relative_attention_bias.weight",
                                      t("encoder.relative_attention_bias.weight")), buckets],
                  "/encoder/relative_attention_bias/Gather")
    bias = g.node("Transpose", [bias], "/encoder/Transpose", perm=[2, 0, 1])
    return g.node("Unsqueeze", [bias, "const_axis0"], "/encoder/Unsqueeze")


def _layer(g: _Graph, t: Any, x: str, mask: str, n: int, heads: int, head_size: int, eps: float,
           position_bias: str | None) -> str:
    key, prefix = f"encoder.layer.{n}", f"/encoder/layer.{n}"
    split = g.weight(f"{prefix}/split_shape", np.array([0, 0, heads, head_size], dtype=np.int64))
    merge = g.weight(f"{prefix}/merge_shape", np.array([0, 0, heads * head_size], dtype=np.int64))
    projected = {}
    for name in ("query", "key", "value"):
        out = g.linear(x, t(f"{key}.attention.self.{name}.weight"), t(f"{key}.attention.self.{name}.bias"),
                       f"{prefix}/attention/self/{name}", f"{key}.attention.self.{name}")
        out = g.node("Reshape", [out, split], f"{prefix}/attention/self/{name}/Reshape")
        perm = [0, 2, 3, 1] if name == "key" else [0, 2, 1, 3]
        projected[name] = g.node("Transpose", [out], f"{prefix}/attention/self/{name}/Transpose", perm=perm)
    scores = g.node("MatMul", [projected["query"], projected["key"]], f"{prefix}/attention/self/MatMul")
    scale = g.weight(f"{prefix}/attention/self/scale", np.array(math.sqrt(head_size), dtype=np.float32))
    scores = g.node("Div", [scores, scale], f"{prefix}/attention/self/Div")
    if position_bias is not None:
        scores = g.node("Add", [scores, position_bias], f"{prefix}/attention/self/Add_bias")
    scores = g.node("Add", [scores, mask], f"{prefix}/attention/self/Add")
    probs = g.node("Softmax", [scores], f"{prefix}/attention/self/Softmax", axis=-1)
    context = g.node("MatMul", [probs, projected["value"]], f"{prefix}/attention/self/MatMul_1")
    context = g.node("Transpose", [context], f"{prefix}/attention/self/Transpose", perm=[0, 2, 1, 3])
    context = g.node("Reshape", [context, merge], f"{prefix}/attention/self/Reshape")
    attended = g.linear(context, t(f"{key}.attention.output.dense.weight"), t(f"{key}.attention.output.dense.bias"),
                        f"{prefix}/attention/output/dense", f"{key}.attention.output.dense")
    attended = g.node("Add", [attended, x], f"{prefix}/attention/output/Add")
    attended = g.layer_norm(attended, t(f"{key}.attention.output.LayerNorm.weight"),
                            t(f"{key}.attention.output.LayerNorm.bias"), f"{prefix}/attention/output/LayerNorm",
                            f"{key}.attention.output.LayerNorm", eps)
    inner = g.linear(attended, t(f"{key}.intermediate.dense.weight"), t(f"{key}.intermediate.dense.bias"),
                     f"{prefix}/intermediate/dense", f"{key}.intermediate.dense")
    inner = g.gelu(inner, f"{prefix}/intermediate/intermediate_act_fn")
    out = g.linear(inner, t(f"{key}.output.dense.weight"), t(f"{key}.output.dense.bias"),
                   f"{prefix}/output/dense", f"{key}.output.dense")
    out = g.node("Add", [out, attended], f"{prefix}/output/Add")
    return g.layer_norm(out, t(f"{key}.output.LayerNorm.weight"), t(f"{key}.output.LayerNorm.bias"),
                        f"{prefix}/output/LayerNorm", f"{key}.output.LayerNorm", eps)


def _mlm_head(g: _Graph, t: Any, hidden: str, mask: str, mask_f: str, eps: float) -> str:
    """SPLADE's max over the attention mask of log(1 + ReLU(logits)), taken before the activation.

    log(1 + ReLU(·)) never decreases and the decoder bias is the same for every token, so the
    max over tokens of log(1 + ReLU(x·W + b)) is log(1 + ReLU(max(x·W) + b)): the graph takes the
    max of the bias-free projection and runs the bias, ReLU and log on the ``batch × vocabulary``
    vector only, not on the ``batch × sequence × vocabulary`` logits. A padding token's row is
    replaced by a copy of the first unmasked token's (a copy cannot change a max, and the MatMul
    weights stay as they are for the int8 recipes); a row with no unmasked token scores zero.
    """
    x = g.linear(hidden, t("cls.predictions.transform.dense.weight"), t("cls.predictions.transform.dense.bias"),
                 "/cls/predictions/transform/dense", "cls.predictions.transform.dense")
    x = g.gelu(x, "/cls/predictions/transform/transform_act_fn")
    x = g.layer_norm(x, t("cls.predictions.transform.LayerNorm.weight"), t("cls.predictions.transform.LayerNorm.bias"),
                     "/cls/predictions/transform/LayerNorm", "cls.predictions.transform.LayerNorm", eps)
    first = g.node("ArgMax", [mask_f], "/sparse/ArgMax", axis=1, keepdims=1)  # (batch, 1): the first unmasked token
    hidden_size = t("cls.predictions.transform.dense.bias").shape[0]
    index = g.node("Expand", [g.node("Unsqueeze", [first, "const_axis2"], "/sparse/Unsqueeze_first"),
                              g.weight("const_1_1_hidden", np.array([1, 1, hidden_size], np.int64))],
                   "/sparse/Expand")  # (batch, 1, hidden): that token's index for every hidden unit
    copy = g.node("GatherElements", [x, index], "/sparse/GatherElements", axis=1)  # (batch, 1, hidden)
    keep = g.node("Unsqueeze", [g.node("Cast", [mask], "/sparse/Cast_bool", to=g.onnx.TensorProto.BOOL),
                                "const_axis2"], "/sparse/Unsqueeze_mask")
    x = g.node("Where", [keep, x, copy], "/sparse/Where")
    decoder = g.weight("onnx::MatMul_cls.predictions.decoder", t("cls.predictions.decoder.weight").T)
    projected = g.node("MatMul", [x, decoder], "/cls/predictions/decoder/MatMul")
    peak = g.node("ReduceMax", [projected], "/sparse/ReduceMax", axes=[1], keepdims=0)  # (batch, vocabulary)
    logit = g.node("Add", [peak, g.weight("cls.predictions.decoder.bias", t("cls.predictions.bias"))],
                   "/cls/predictions/decoder/Add")
    activated = g.node("Log", [g.node("Add", [g.node("Relu", [logit], "/sparse/Relu"), "const_one"], "/sparse/Add")],
                       "/sparse/Log")
    any_token = g.node("ReduceMax", [mask_f], "/sparse/ReduceMax_mask", axes=[1], keepdims=1)  # (batch, 1)
    g.nodes.append(g.helper.make_node("Mul", [activated, any_token], ["sparse"], name="/sparse/Mul"))
    return "sparse"


def build_bert_graph(checkpoint: BertCheckpoint, *, opset: int = OPSET, check: bool = True) -> Any:
    """The ONNX model (an ``onnx.ModelProto``, checked unless ``check`` is false) of ``checkpoint``.

    Raises:
        MissingExtraError: onnx is not installed.
    """
    onnx = _onnx()
    helper, tp = onnx.helper, onnx.TensorProto
    config, t = checkpoint.config, checkpoint.tensor
    eps = config.layer_norm_eps
    g = _Graph(onnx)
    for name, value in (("const_sqrt2", np.array(math.sqrt(2.0), np.float32)), ("const_one", np.array(1.0, np.float32)),
                        ("const_half", np.array(0.5, np.float32)), ("const_zero_i64", np.array(0, np.int64)),
                        ("const_one_i64", np.array(1, np.int64)), ("const_axis0", np.array([0], np.int64)),
                        ("const_axis2", np.array([2], np.int64)), ("const_axes12", np.array([1, 2], np.int64)),
                        ("const_lowest", np.array(np.finfo(np.float32).min, np.float32)),
                        ("const_one_i64_1d", np.array([1], np.int64)), ("const_two_i64_1d", np.array([2], np.int64)),
                        ("const_zeros_i64_2", np.array([0, 0], np.int64)), ("const_axes01", np.array([0, 1], np.int64))):
        g.weight(name, value)
    hidden = _embeddings(g, t, config)
    position_bias = _position_bias(g, t, config) if config.relative_buckets else None
    mask_f = g.node("Cast", ["attention_mask"], "/Cast", to=tp.FLOAT)
    inverted = g.node("Sub", ["const_one", mask_f], "/Sub")
    bias = g.node("Mul", [inverted, "const_lowest"], "/Mul")
    bias = g.node("Unsqueeze", [bias, "const_axes12"], "/Unsqueeze")  # (batch, 1, 1, sequence)
    for n in range(config.num_hidden_layers):
        hidden = _layer(g, t, hidden, bias, n, config.num_attention_heads, config.head_size, eps, position_bias)
    g.nodes.append(helper.make_node("Identity", [hidden], ["last_hidden_state"], name="/encoder/Identity"))
    outputs = [helper.make_tensor_value_info("last_hidden_state", tp.FLOAT, [_BATCH, _SEQUENCE, config.hidden_size])]
    if checkpoint.head == "mlm":
        _mlm_head(g, t, "last_hidden_state", "attention_mask", mask_f, eps)
        outputs.append(helper.make_tensor_value_info("sparse", tp.FLOAT, [_BATCH, config.vocab_size]))
    names = ("input_ids", "attention_mask") if config.relative_buckets else ("input_ids", "attention_mask", "token_type_ids")
    inputs = [helper.make_tensor_value_info(name, tp.INT64, [_BATCH, _SEQUENCE]) for name in names]
    used = {name for node in g.nodes for name in node.input}
    model = helper.make_model(helper.make_graph(g.nodes, "bert", inputs, outputs),
                              opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="meteora-edge", producer_version="bert_graph")
    from onnx import numpy_helper

    for name, array in g.initializers:  # straight into the model: building a graph or a model copies each tensor
        if name in used:
            model.graph.initializer.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
    model.ir_version = 8  # what onnxruntime 1.17, the oldest the onnx extra allows, reads
    if check:
        onnx.checker.check_model(model)
    return model


def write_bert_onnx(checkpoint: BertCheckpoint, target: str | os.PathLike[str], *, opset: int = OPSET) -> list[str]:
    """Write ``checkpoint`` as an ONNX file (one file; a BERT encoder is far below protobuf's 2 GB).

    Returns:
        The graph's output names.
    """
    onnx = _onnx()
    model = build_bert_graph(checkpoint, opset=opset, check=False)
    outputs = [o.name for o in model.graph.output]
    onnx.save(model, str(Path(target)))
    del model  # checked from the file: the checker would otherwise hold a second serialised copy beside it
    onnx.checker.check_model(str(Path(target)))
    return outputs
