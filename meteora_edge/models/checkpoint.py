"""Read a BERT-family checkpoint (``config.json`` + ``model.safetensors``) into checked numpy arrays, no torch.

The weights are read with the ``safetensors`` package's numpy API. Every tensor the graph
builder (:mod:`.bert_graph`) needs is looked up under the names transformers writes for
``BertModel`` and ``BertForMaskedLM`` (with or without the ``bert.`` prefix; LayerNorm
``gamma``/``beta`` or ``weight``/``bias``), or for ``MPNetModel`` (its attention tensors,
``attention.attn.q`` …, are read under BERT's names, plus the relative position bias table),
and checked for its exact shape and float32 type against the config, so a checkpoint of
another size, another dtype, a truncated file or a config of another architecture ends in one
:class:`~meteora_edge.errors.ModelError` naming the file, the tensor and what was expected.
Tensors the graph does not use (the pooler, ``position_ids``) are ignored.

Example:
    >>> ckpt = read_bert_checkpoint("model.safetensors", "config.json", head="mlm")  # doctest: +SKIP
    >>> ckpt.config.hidden_size, ckpt.tensor("embeddings.word_embeddings.weight").shape  # doctest: +SKIP
    (128, (30522, 128))
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import MissingExtraError, ModelError

__all__ = ["HEADS", "ARCHITECTURES", "BertConfig", "BertCheckpoint", "read_bert_config", "read_bert_checkpoint"]

HEADS = ("none", "mlm")  # "mlm": the masked-language-model head (SPLADE's vocabulary weights) is read too
ARCHITECTURES = {"bert": ("BertModel", "BertForMaskedLM", "BertForPreTraining"),
                 "mpnet": ("MPNetModel", "MPNetForMaskedLM")}  # model_type → the classes whose encoder is read
_FIX = "give a BERT or MPNet checkpoint as transformers saves it (model.safetensors + config.json)"
_MPNET_NAMES = (("attention.self.query.", "attention.attn.q."), ("attention.self.key.", "attention.attn.k."),
                ("attention.self.value.", "attention.attn.v."), ("attention.output.dense.", "attention.attn.o."),
                ("attention.output.LayerNorm.", "attention.LayerNorm."))


@dataclass(frozen=True)
class BertConfig:
    """The sizes of a BERT (or MPNet) encoder, as ``config.json`` states them."""

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    max_position_embeddings: int
    type_vocab_size: int
    layer_norm_eps: float
    architecture: str
    tie_word_embeddings: bool = True
    model_type: str = "bert"
    relative_buckets: int = 0  # MPNet: the relative position bias table's rows (0: BERT, absolute positions only)
    pad_token_id: int = 0

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads


def _config_int(where: str, data: Mapping[str, Any], key: str, low: int = 1) -> int:
    value = data.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ModelError(f"{where}: {key!r} must be an integer >= {low}, got {value!r}; {_FIX}")
    return value


def read_bert_config(path: str | os.PathLike[str]) -> BertConfig:
    """The sizes in a BERT or MPNet ``config.json``.

    Raises:
        ModelError: the file is unreadable, not JSON, or describes another architecture
            (RoBERTa, DistilBERT …), another activation than exact GELU, BERT's relative
            positions, or inconsistent sizes.
    """
    where = str(path)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ModelError(f"cannot read the model config {where}: {str(exc)[:160]}; {_FIX}") from None
    if not isinstance(data, dict):
        raise ModelError(f"{where} is not a model config (a JSON object); {_FIX}")
    model_type = data.get("model_type")
    architectures = data.get("architectures") or ["BertModel"]
    architecture = architectures[0] if isinstance(architectures, list) and architectures else architectures
    if not isinstance(model_type, str) or model_type not in ARCHITECTURES or architecture not in ARCHITECTURES[model_type]:
        known = ", ".join(a for names in ARCHITECTURES.values() for a in names)
        raise ModelError(f"{where} describes a {model_type!r} model ({architecture}), not BERT or MPNet; the torch-free "
                         f"builder reads {known}; export other models with 'meteora-edge export encoder'")
    if data.get("hidden_act", "gelu") != "gelu":
        raise ModelError(f"{where}: hidden_act {data.get('hidden_act')!r} is not supported (the builder writes the "
                         "exact erf GELU of hidden_act 'gelu'); export this model with 'meteora-edge export encoder'")
    if data.get("position_embedding_type", "absolute") != "absolute":
        raise ModelError(f"{where}: position_embedding_type {data.get('position_embedding_type')!r} is not supported "
                         "(absolute positions only); export this model with 'meteora-edge export encoder'")
    eps = data.get("layer_norm_eps", 1e-12)
    if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not 0 < eps < 1:
        raise ModelError(f"{where}: layer_norm_eps must be a number in (0, 1), got {eps!r}; {_FIX}")
    mpnet = model_type == "mpnet"
    config = BertConfig(
        vocab_size=_config_int(where, data, "vocab_size"), hidden_size=_config_int(where, data, "hidden_size"),
        num_hidden_layers=_config_int(where, data, "num_hidden_layers"),
        num_attention_heads=_config_int(where, data, "num_attention_heads"),
        intermediate_size=_config_int(where, data, "intermediate_size"),
        max_position_embeddings=_config_int(where, data, "max_position_embeddings"),
        type_vocab_size=0 if mpnet else _config_int(where, data, "type_vocab_size"), layer_norm_eps=float(eps),
        architecture=str(architecture), tie_word_embeddings=data.get("tie_word_embeddings", True) is not False,
        model_type=str(model_type),
        relative_buckets=_config_int(where, {"relative_attention_num_buckets": 32, **data},
                                     "relative_attention_num_buckets") if mpnet else 0,
        pad_token_id=_config_int(where, {"pad_token_id": 1, **data}, "pad_token_id", low=0) if mpnet else 0,
    )
    if config.hidden_size % config.num_attention_heads:
        raise ModelError(f"{where}: hidden_size {config.hidden_size} is not a multiple of num_attention_heads "
                         f"{config.num_attention_heads}; {_FIX}")
    return config


def expected_shapes(config: BertConfig, head: str) -> dict[str, tuple[int, ...]]:
    """Every tensor the graph needs, by its name without the ``bert.`` prefix, and its shape."""
    h, i = config.hidden_size, config.intermediate_size
    shapes: dict[str, tuple[int, ...]] = {
        "embeddings.word_embeddings.weight": (config.vocab_size, h),
        "embeddings.position_embeddings.weight": (config.max_position_embeddings, h),
        "embeddings.LayerNorm.weight": (h,), "embeddings.LayerNorm.bias": (h,),
    }
    if config.relative_buckets:
        shapes["encoder.relative_attention_bias.weight"] = (config.relative_buckets, config.num_attention_heads)
    else:
        shapes["embeddings.token_type_embeddings.weight"] = (config.type_vocab_size, h)
    for n in range(config.num_hidden_layers):
        p = f"encoder.layer.{n}."
        for name in ("query", "key", "value"):
            shapes[f"{p}attention.self.{name}.weight"] = (h, h)
            shapes[f"{p}attention.self.{name}.bias"] = (h,)
        shapes.update({
            f"{p}attention.output.dense.weight": (h, h), f"{p}attention.output.dense.bias": (h,),
            f"{p}attention.output.LayerNorm.weight": (h,), f"{p}attention.output.LayerNorm.bias": (h,),
            f"{p}intermediate.dense.weight": (i, h), f"{p}intermediate.dense.bias": (i,),
            f"{p}output.dense.weight": (h, i), f"{p}output.dense.bias": (h,),
            f"{p}output.LayerNorm.weight": (h,), f"{p}output.LayerNorm.bias": (h,),
        })
    if head == "mlm":
        shapes.update({
            "cls.predictions.transform.dense.weight": (h, h), "cls.predictions.transform.dense.bias": (h,),
            "cls.predictions.transform.LayerNorm.weight": (h,), "cls.predictions.transform.LayerNorm.bias": (h,),
            "cls.predictions.bias": (config.vocab_size,),
        })
    return shapes


def _candidates(name: str, model_type: str = "bert") -> list[str]:
    """The names transformers may have stored ``name`` under (prefix, legacy LayerNorm names, MPNet's names)."""
    if model_type == "mpnet":
        for bert, mpnet in _MPNET_NAMES:
            name = name.replace(bert, mpnet)
        return [name, f"mpnet.{name}"]
    names = [name]
    if name.endswith("LayerNorm.weight"):
        names.append(name[: -len("weight")] + "gamma")
    elif name.endswith("LayerNorm.bias"):
        names.append(name[: -len("bias")] + "beta")
    elif name == "cls.predictions.bias":
        names.append("cls.predictions.decoder.bias")
    if not name.startswith("cls."):
        names += [f"bert.{n}" for n in names]
    return names


@dataclass(frozen=True)
class BertCheckpoint:
    """A checked BERT checkpoint: its config and its float32 tensors by canonical name."""

    config: BertConfig
    tensors: Mapping[str, np.ndarray]
    head: str

    def tensor(self, name: str) -> np.ndarray:
        return self.tensors[name]


def _open(path: Path) -> Any:
    try:
        from safetensors import SafetensorError, safe_open
    except ImportError:
        raise MissingExtraError("safetensors", "onnx") from None
    try:
        return safe_open(str(path), framework="np")
    except (SafetensorError, OSError, ValueError) as exc:
        raise ModelError(f"cannot read {path}: {str(exc)[:160]}; it is truncated or not a safetensors file; "
                         "reinstall the package that holds it") from None


def read_bert_checkpoint(
    weights: str | os.PathLike[str], config: str | os.PathLike[str], *, head: str = "none"
) -> BertCheckpoint:
    """Read and check every tensor a BERT encoder (and, with ``head="mlm"``, its MLM head) needs.

    Args:
        weights: the ``model.safetensors`` file.
        config: its ``config.json``.
        head: ``"none"`` (the encoder) or ``"mlm"`` (also the masked-language-model head; its
            decoder is tied to the word embeddings unless the file holds its own).

    Returns:
        The checkpoint, with float32 arrays.

    Raises:
        ModelError: a config that is not BERT, an unreadable or truncated file, a tensor that
            is missing, of another shape, or not float32 (the message names it).
    """
    if head not in HEADS:
        raise ModelError(f"head must be one of {', '.join(HEADS)}, got {head!r}")
    path = Path(weights)
    bert = read_bert_config(config)
    if head == "mlm" and bert.model_type != "bert":
        raise ModelError(f"{config} describes a {bert.model_type!r} model; the MLM head is read from BERT only")
    shapes = expected_shapes(bert, head)
    handle = _open(path)
    stored = set(handle.keys())
    tensors: dict[str, np.ndarray] = {}
    for name, shape in shapes.items():
        names = _candidates(name, bert.model_type)
        found = next((c for c in names if c in stored), None)
        if found is None:
            raise ModelError(f"{path} has no tensor {names[0]!r} (nor {', '.join(names[1:]) or 'an alias'}); "
                             f"is it the {bert.architecture} checkpoint {config} describes?")
        piece = handle.get_slice(found)
        dtype, got = piece.get_dtype(), tuple(piece.get_shape())
        if dtype != "F32":
            raise ModelError(f"{path}: tensor {found!r} is {dtype}, expected F32 (float32); give a float32 checkpoint")
        if got != shape:
            raise ModelError(f"{path}: tensor {found!r} has shape {list(got)}, expected {list(shape)} from {config}; "
                             "the weights and the config are of different models")
        try:
            tensors[name] = np.ascontiguousarray(handle.get_tensor(found), dtype=np.float32)
        except Exception as exc:  # safetensors raises its own error types on a bad buffer
            raise ModelError(f"cannot read tensor {found!r} of {path}: {str(exc)[:160]}; it is truncated or "
                             "corrupt") from None
        if not np.isfinite(tensors[name]).all():
            raise ModelError(f"{path}: tensor {found!r} holds NaN or infinite values; the checkpoint is corrupt")
    if head == "mlm":
        decoder = "cls.predictions.decoder.weight"
        if decoder in stored:
            piece = handle.get_slice(decoder)
            want = (bert.vocab_size, bert.hidden_size)
            if piece.get_dtype() != "F32" or tuple(piece.get_shape()) != want:
                raise ModelError(f"{path}: tensor {decoder!r} is {piece.get_dtype()} {list(piece.get_shape())}, "
                                 f"expected F32 {list(want)}")
            tensors[decoder] = np.ascontiguousarray(handle.get_tensor(decoder), dtype=np.float32)
        elif bert.tie_word_embeddings:  # tied to the word embeddings, as BertForMaskedLM saves it
            tensors[decoder] = tensors["embeddings.word_embeddings.weight"]
        else:
            raise ModelError(f"{path} has no tensor {decoder!r} and {config} says tie_word_embeddings false; "
                             "the MLM head's decoder is missing")
    return BertCheckpoint(config=bert, tensors=tensors, head=head)
