"""Build an encoder's bundle files from a BERT checkpoint at install time: no torch, no compiler.

For a catalog entry whose ``onnx`` recipe has a ``build`` section, :func:`build_encoder_files`
reads the checked ``model.safetensors`` + ``config.json`` (:mod:`.checkpoint`), writes the fp32
graph (:mod:`.bert_graph`), the tokenizer (truncating at the entry's max length, never
padding) and the int8 variants the recipe lists (:mod:`.int8_variants`, per-channel weights),
then runs every variant on the fixed parity texts against the fp32 graph: a variant below
:data:`~.precision.MIN_COSINE` is not kept, as ``meteora-edge export`` does. A dense encoder
(``head: none``) keeps the fp32 embeddings of the probe texts so an int8 variant is checked
again on the CPU it runs on; a sparse encoder (``head: mlm``) is compared on its ``sparse``
output, the SPLADE vector over the vocabulary.

Example:
    >>> from meteora_edge.models.catalog import find_entry
    >>> built = build_encoder_files(find_entry("splade-tiny"), paths, stage)  # doctest: +SKIP
    >>> sorted(built.roles)  # doctest: +SKIP
    ['fp32', 'int8', 'int8-dot', 'tokenizer']
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ModelError
from .analyzer import DEFAULT_ANALYZER
from .bert_graph import OPSET, write_bert_onnx
from .catalog import CatalogEntry
from .checkpoint import read_bert_checkpoint
from .int8_variants import INT8_FILES, quantize_int8
from .onnx_session import (create_session, feed_for, load_tokenizer, onnxruntime_version, pad_encodings, tokenize_batch,
                           write_tokenizer)
from .precision import MIN_COSINE, below_bound
from .variant_parity import PARITY_SENTENCES, PROBE_TEXTS, cosine_summary

__all__ = ["MODEL_FILES", "BuiltModel", "build_encoder_files", "sparse_vectors"]

logger = logging.getLogger(__name__)

MODEL_FILES = {"fp32": "model.onnx", **INT8_FILES}


@dataclass(frozen=True)
class BuiltModel:
    """What :func:`build_encoder_files` left in the stage folder.

    Args:
        roles: bundle role → file name in the stage folder.
        settings: the component's settings (what the runtime reads).
        report: the parity of each variant against the fp32 graph, and the build time.
    """

    roles: Mapping[str, str]
    settings: Mapping[str, Any]
    report: Mapping[str, Any]


def sparse_vectors(
    model: str | os.PathLike[str], tokenizer: str | os.PathLike[str], texts: Sequence[str], *,
    max_length: int, pad_id: int = 0, threads: int = 1,
) -> np.ndarray:
    """The graph's ``sparse`` output for each text, run one text at a time: ``(len(texts), vocabulary)``.

    Raises:
        ModelError: the model does not load, has no ``sparse`` output or fails to run.
        BundleError: the tokenizer is missing or unreadable.
    """
    session = create_session(model, threads=threads)
    if "sparse" not in [o.name for o in session.get_outputs()]:
        raise ModelError(f"{model} has no 'sparse' output; rebuild it with 'meteora-edge models install'")
    reader = load_tokenizer(tokenizer, max_length=max_length)
    rows = []
    for encoding in tokenize_batch(reader, list(texts)):
        ids, mask = pad_encodings([encoding], pad_id=pad_id)
        try:
            rows.append(session.run(["sparse"], feed_for(session, {"input_ids": ids, "attention_mask": mask}))[0][0])
        except Exception as exc:  # onnxruntime raises its own pybind exception types
            raise ModelError(f"onnxruntime failed on {model}: {str(exc)[:300]}") from None
    return np.stack(rows).astype(np.float32)


def _dense_vectors(model: Path, tokenizer: Path, settings: Mapping[str, Any], isolated: bool) -> tuple[np.ndarray, list[str]]:
    from .onnx_encoder import OnnxEncoder

    keys = ("max_length", "pooling", "normalize", "pad_id", "dimension")
    encoder = OnnxEncoder(model, tokenizer, isolate_texts=isolated, token_memo_bytes=0,
                          **{k: settings[k] for k in keys})
    return encoder.encode(list(PARITY_SENTENCES)), list(encoder.input_names)


def _parity(stage: Path, roles: dict[str, str], settings: dict[str, Any], head: str,
            quantization: dict[str, Any]) -> dict[str, Any]:
    """Each int8 variant against the fp32 graph; drops (deletes) the ones below their bound."""
    tokenizer = stage / roles["tokenizer"]

    def run(name: str, isolated: bool) -> tuple[np.ndarray, list[str]]:
        if head == "mlm":
            inputs = [i.name for i in create_session(stage / name).get_inputs()]
            return sparse_vectors(stage / name, tokenizer, PARITY_SENTENCES, max_length=settings["max_length"],
                                  pad_id=settings["pad_id"]), inputs
        return _dense_vectors(stage / name, tokenizer, settings, isolated)

    reference, session_inputs = run(roles["fp32"], False)
    report: dict[str, Any] = {"reference": f"the fp32 graph built from the checkpoint (onnxruntime "
                                           f"{onnxruntime_version()})", "sentences": len(PARITY_SENTENCES)}
    for variant in [v for v in INT8_FILES if v in roles]:
        report[variant] = cosine_summary(run(roles[variant], True)[0], reference)
        if below_bound(variant, report[variant]["min_cosine"]):
            logger.warning("%s not kept: min cosine %.4f to fp32 < %.2f", variant, report[variant]["min_cosine"],
                           MIN_COSINE[variant])
            (stage / roles.pop(variant)).unlink()
            quantization.pop(variant, None)
    settings["inputs"] = session_inputs
    if head != "mlm":
        settings["probe"] = {"texts": [PARITY_SENTENCES[i] for i in PROBE_TEXTS],
                             "fp32": [[round(float(x), 6) for x in reference[i]] for i in PROBE_TEXTS]}
    return report


def build_encoder_files(entry: CatalogEntry, paths: Mapping[str, Path], stage: Path) -> BuiltModel:
    """Build ``entry``'s model files into ``stage`` from its checked checkpoint files.

    Args:
        entry: a catalog entry whose ``onnx`` recipe has a ``build`` section.
        paths: ``weights``, ``config`` and ``tokenizer`` → the checked files.
        stage: an empty folder to write into (the caller renames it into the bundle).

    Returns:
        The files, settings and parity report of the component.

    Raises:
        ModelError: the checkpoint is not a BERT of the config's sizes (see
            :func:`~.checkpoint.read_bert_checkpoint`), the entry's settings do not fit it, or a
            built model does not run.
    """
    assert entry.onnx is not None and entry.onnx.build is not None
    recipe = entry.onnx.build
    started = time.perf_counter()
    checkpoint = read_bert_checkpoint(paths["weights"], paths["config"], head=recipe.head)
    bert = checkpoint.config
    max_length = int(entry.settings.get("max_length", 256))
    if max_length > bert.max_position_embeddings:
        raise ModelError(f"{entry.name}: max_length {max_length} exceeds the model's {bert.max_position_embeddings} "
                         "positions; fix the catalog entry")
    dimension = entry.settings.get("dimension", bert.hidden_size)
    if recipe.head == "none" and dimension != bert.hidden_size:
        raise ModelError(f"{entry.name}: the catalog says {dimension} dimensions but {paths['config']} has hidden_size "
                         f"{bert.hidden_size}; the files are of another model")
    roles = {"fp32": MODEL_FILES["fp32"], "tokenizer": "tokenizer.json"}
    outputs = write_bert_onnx(checkpoint, stage / roles["fp32"])
    del checkpoint
    pad_id = write_tokenizer(paths["tokenizer"], stage / roles["tokenizer"], max_length=max_length)
    vocabulary = load_tokenizer(stage / roles["tokenizer"], max_length=max_length).get_vocab_size()
    if vocabulary > bert.vocab_size:
        raise ModelError(f"{paths['tokenizer']} has {vocabulary} tokens but the model only {bert.vocab_size}; "
                         "the tokenizer is of another model")
    quantization: dict[str, Any] = {}
    for variant in recipe.variants:
        quantization[variant] = quantize_int8(stage / roles["fp32"], stage / MODEL_FILES[variant], recipe=variant)
        roles[variant] = MODEL_FILES[variant]
    settings: dict[str, Any] = {"max_length": max_length, "pad_id": pad_id, "opset": OPSET}
    if recipe.head == "mlm":
        settings.update({"dimension": bert.hidden_size, "vocabulary": bert.vocab_size, "output": "sparse"})
    else:
        settings.update({"dimension": bert.hidden_size, "pooling": str(entry.settings.get("pooling", "mean")),
                         "normalize": bool(entry.settings.get("normalize", True)), "output": "last_hidden_state",
                         "analyzer": DEFAULT_ANALYZER.record()})
    report = _parity(stage, roles, settings, recipe.head, quantization)
    settings["quantization"] = quantization or None
    report["build"] = {"seconds": round(time.perf_counter() - started, 1), "outputs": outputs,
                       "builder": "meteora_edge.models.bert_graph (onnx.helper, no torch)"}
    logger.info("%s: built %s in %.1f s", entry.name, ", ".join(sorted(roles)), report["build"]["seconds"])
    return BuiltModel(roles=roles, settings=settings, report=report)
