"""Export a Hugging Face cross-encoder (sequence classification) into a bundle as ONNX.

The same steps as :mod:`meteora_edge.export.encoder` with task ``text-classification``:
optimum's exporter → optional per-channel dynamic int8 → ``tokenizer.json`` truncating at
the max length without padding → a parity report of the relevance scores against torch →
the ``cross_encoder`` component, staged and renamed into place before the manifest is
rewritten. torch and transformers are imported inside functions only.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from meteora_edge.models.bundle import Component, add_component, file_entry
from meteora_edge.errors import MissingExtraError, ModelError

from .encoder import (
    DEFAULT_OPSET,
    ModelSource,
    _export_onnx,
    _licence,
    quantize_int8,
    run_export,
    write_tokenizer,
)
from .parity import PARITY_SENTENCES

__all__ = ["export_cross_encoder", "PARITY_QUERIES"]

logger = logging.getLogger(__name__)

COMPONENT = "cross_encoder"
PARITY_QUERIES = ("Who may terminate the agreement?", "When are fees due?", "Was ist die Kündigungsfrist?")
FP32_MAX_ABS_DIFF = 1e-3


def _reference_scores(model_dir: Path, pairs: list[tuple[str, str]], max_length: int) -> tuple[Any, str]:
    try:
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer
    except ImportError as exc:
        raise MissingExtraError(exc.name or "torch", "export") from None
    from meteora_edge.models.onnx_cross_encoder import relevance

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    model = AutoModelForSequenceClassification.from_pretrained(str(model_dir), local_files_only=True).eval()
    rows = []
    with torch.inference_mode():
        for query, passage in pairs:
            batch = tokenizer([query], [passage], truncation=True, max_length=max_length, return_tensors="pt")
            rows.append(model(**batch).logits.float().numpy()[0])
    import numpy as np

    return relevance(np.stack(rows)), str(torch.__version__)


def export_cross_encoder(
    source: str,
    bundle_dir: str | os.PathLike[str],
    *,
    quantize: str | None = None,
    max_length: int | None = None,
    opset: int = DEFAULT_OPSET,
    licence: str | None = None,
) -> Component:
    """Export a sequence-classification cross-encoder into the bundle's ``cross_encoder`` component.

    Args: as :func:`meteora_edge.export.encoder.export_encoder`.

    Returns:
        The component; ``component.report`` holds the max absolute score difference to torch.

    Raises:
        ConfigError, InputError, ModelError, MissingExtraError: as ``export_encoder``.
    """
    return run_export(
        source, bundle_dir, quantize=quantize, max_length=max_length, opset=opset, prefix=".cross-encoder-export.",
        stage=lambda src, out, tmp, settings: _stage(src, out, tmp, settings["max_length"], quantize, opset, licence),
    )


def _stage(model_source: ModelSource, out: Path, tmp: Path, max_length: int, quantize: str | None, opset: int,
           licence: str | None) -> Component:
    from meteora_edge.models.onnx_cross_encoder import OnnxCrossEncoder

    stage = tmp / COMPONENT
    stage.mkdir()
    os.replace(_export_onnx(model_source.path, tmp / "raw", opset, task="text-classification"), stage / "model.onnx")
    tokenizer_src = next((p for p in (tmp / "raw" / "tokenizer.json", model_source.path / "tokenizer.json") if p.is_file()), None)
    if tokenizer_src is None:
        raise ModelError(f"{model_source.path} has no tokenizer.json (a fast tokenizer is needed)")
    pad_id = write_tokenizer(tokenizer_src, stage / "tokenizer.json", max_length=max_length)
    quantization = quantize_int8(stage / "model.onnx", stage / "model.int8.onnx") if quantize else None
    pairs = [(q, p) for q in PARITY_QUERIES for p in PARITY_SENTENCES[:12]]
    reference, torch_version = _reference_scores(model_source.path, pairs, max_length)
    report: dict[str, Any] = {"reference": f"transformers + torch {torch_version}", "pairs": len(pairs)}
    roles = {"fp32": "model.onnx", "tokenizer": "tokenizer.json"}
    if quantize:
        roles["int8"] = "model.int8.onnx"
    for precision in ("fp32", "int8"):
        if precision in roles:
            model = OnnxCrossEncoder(stage / roles[precision], stage / "tokenizer.json", max_length=max_length, pad_id=pad_id)
            scores = [model.score(q, [p])[0] for q, p in pairs]
            report[precision] = {"max_abs_diff": round(float(max(abs(a - b) for a, b in zip(scores, reference))), 6)}
    if report["fp32"]["max_abs_diff"] > FP32_MAX_ABS_DIFF:
        raise ModelError(f"the fp32 ONNX cross-encoder does not match torch (max score difference "
                         f"{report['fp32']['max_abs_diff']}); the export is broken, try another --opset")
    component = Component(
        kind="cross_encoder",
        files={role: file_entry(tmp, f"{COMPONENT}/{name}") for role, name in roles.items()},
        settings={"max_length": max_length, "pad_id": pad_id, "score": "sigmoid of one logit, else softmax of the last",
                  "opset": opset, "quantization": quantization},
        source=model_source.label,
        licence=licence or _licence(model_source.path),
        report=report,
    )
    target = out / COMPONENT
    if target.exists():
        os.replace(target, tmp / "previous")
    os.replace(stage, target)
    add_component(out, COMPONENT, component)
    logger.info("bundle %s: cross-encoder from %s", out, model_source.label)
    return component
