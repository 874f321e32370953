"""Tiny models built inside the tests: a WordPiece tokenizer, an embedding-lookup ONNX graph
and a bundle holding both. No weights are downloaded; numpy gives the exact expected output."""

from __future__ import annotations

from pathlib import Path

import numpy as np

WORDS = ["either", "party", "may", "terminate", "fees", "are", "due", "monthly", "notice", "data",
         "the", "agreement", "ends", "after", "days", "written", "supplier", "shall", "deliver", "goods"]
VOCAB = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, **{w: i + 4 for i, w in enumerate(WORDS)}}
DIM = 8


def write_tokenizer(path: Path, *, pad_to: int | None = 16, truncate_at: int | None = 6) -> Path:
    """A BERT-like WordPiece tokenizer.json; by default it pads to 16 and truncates at 6, as
    shipped tokenizers do, so tests prove the runtime overrides both."""
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece

    tok = Tokenizer(WordPiece(VOCAB, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    if pad_to:
        tok.enable_padding(pad_id=0, pad_token="[PAD]", length=pad_to)
    if truncate_at:
        tok.enable_truncation(max_length=truncate_at)
    tok.save(str(path))
    return path


def table(seed: int = 0, dim: int = DIM) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(len(VOCAB), dim)).astype(np.float32)


def write_model(path: Path, *, embeddings: np.ndarray | None = None, token_type_ids: bool = False,
                int_type: int | None = None, output_dim: int | str | None = None) -> Path:
    """``last_hidden_state = E[input_ids] (+ T[token_type_ids])``; ``attention_mask`` is declared.

    ``output_dim`` overrides the declared last dimension of the output (to fake a mismatch).
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    E = table() if embeddings is None else embeddings
    int_type = int_type or TensorProto.INT64
    inputs = [helper.make_tensor_value_info("input_ids", int_type, ["batch", "seq"]),
              helper.make_tensor_value_info("attention_mask", int_type, ["batch", "seq"])]
    inits = [numpy_helper.from_array(E, "E")]
    nodes = [helper.make_node("Gather", ["E", "input_ids"], ["words"])]
    last = "words"
    if token_type_ids:
        inputs.append(helper.make_tensor_value_info("token_type_ids", int_type, ["batch", "seq"]))
        inits.append(numpy_helper.from_array(np.full((2, E.shape[1]), 0.5, dtype=np.float32), "T"))
        nodes += [helper.make_node("Gather", ["T", "token_type_ids"], ["types"]),
                  helper.make_node("Add", ["words", "types"], ["summed"])]
        last = "summed"
    nodes.append(helper.make_node("Identity", [last], ["last_hidden_state"]))
    dim = E.shape[1] if output_dim is None else output_dim
    output = helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "seq", dim])
    graph = helper.make_graph(nodes, "tiny_encoder", inputs, [output], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def expected(texts: list[str], *, max_length: int = 256, embeddings: np.ndarray | None = None,
             type_offset: float = 0.0, pooling: str = "mean") -> np.ndarray:
    """What the runtime must return: mean (or CLS) of the looked-up rows, L2-normalised.

    Texts must be plain lower/upper-case words separated by spaces (no punctuation)."""
    E = table() if embeddings is None else embeddings
    rows = []
    for text in texts:
        ids = [2] + [VOCAB.get(w, 1) for w in text.lower().split()] + [3]
        if len(ids) > max_length:
            ids = ids[: max_length - 1] + [3]
        vectors = E[ids] + type_offset
        v = vectors[0] if pooling == "cls" else vectors.mean(axis=0)
        rows.append(v / np.linalg.norm(v))
    return np.stack(rows).astype(np.float32)


def make_bundle(root: Path, *, int8: bool = True, dot: bool = False, settings: dict | None = None,
                **model_kwargs: object) -> Path:
    """A bundle with an ``encoder`` component: fp32 (+ copies as "int8" and "int8-dot") and a tokenizer."""
    from meteora_edge.models.bundle import Component, add_component, file_entry

    (root / "encoder").mkdir(parents=True, exist_ok=True)
    write_model(root / "encoder" / "model.onnx", **model_kwargs)  # type: ignore[arg-type]
    write_tokenizer(root / "encoder" / "tokenizer.json")
    roles = {"fp32": "encoder/model.onnx", "tokenizer": "encoder/tokenizer.json"}
    for wanted, role in ((int8, "int8"), (dot, "int8-dot")):
        if wanted:
            (root / "encoder" / f"model.{role}.onnx").write_bytes((root / "encoder" / "model.onnx").read_bytes())
            roles[role] = f"encoder/model.{role}.onnx"
    add_component(root, "encoder", Component(
        kind="encoder",
        files={role: file_entry(root, rel) for role, rel in roles.items()},
        settings={"pooling": "mean", "normalize": True, "max_length": 32, "dimension": DIM, "pad_id": 0,
                  "inputs": ["input_ids", "attention_mask"], **(settings or {})},
        source="tiny-test-encoder",
        licence="Apache-2.0",
        report={"sentences": 3, "fp32": {"min_cosine": 1.0, "mean_cosine": 1.0}},
    ))
    return root
