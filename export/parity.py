"""Parity of exported ONNX encoders against the torch model they came from.

The reference is what sentence-transformers computes: the transformer's last hidden state,
mean-pooled over the attention mask (or the CLS vector) and L2-normalised, with the same
truncation. torch and transformers are imported inside :func:`reference_embeddings` only.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from meteora_edge.errors import MissingExtraError

__all__ = ["PARITY_SENTENCES", "reference_embeddings", "cosine_summary"]

_LONG = (
    "The supplier shall deliver the goods in accordance with the schedule agreed in writing, and any delay "
    "caused by events beyond its reasonable control shall extend the time for performance accordingly. "
)

# Fixed and varied on purpose: short, long (beyond 256 tokens, so truncation is exercised),
# punctuation-only, numbers, non-Latin scripts, accents and emoji.
PARITY_SENTENCES: tuple[str, ...] = (
    "Either party may terminate this agreement with ninety days' written notice.",
    "What happens to customer data after termination?",
    "Fees are due monthly and late payments accrue interest at 1.5% per month.",
    "The quick brown fox jumps over the lazy dog.",
    "OK",
    "?",
    "a",
    "2024-03-15 invoice #4471: EUR 1,250.00",
    "Die Kündigung muss schriftlich erfolgen.",
    "La résiliation prend effet à la fin du mois suivant.",
    "El proveedor es responsable de los daños causados.",
    "契約は三十日前の書面通知により解除できる。",
    "本协议受英国法律管辖。",
    "Договор может быть расторгнут любой стороной.",
    "العقد ينتهي بعد سنة واحدة",
    "Emoji in passing 🎉🚀 should not break the tokenizer ✅",
    "naïve café façade coöperate",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "The mitochondria is the powerhouse of the cell.",
    "Scott Derrickson is an American director, screenwriter and producer.",
    "def add(a, b):\n    return a + b  # sum two numbers",
    "SELECT name FROM users WHERE id = 42;",
    "   leading and trailing whitespace   ",
    "ALL CAPS SENTENCE ABOUT A WARRANTY CLAIM",
    _LONG * 12,
    " ".join(f"token{i}" for i in range(400)),
    "Liability is capped at the fees paid in the twelve months before the claim. " * 8,
)


def reference_embeddings(
    model_dir: str | Path, texts: Sequence[str], *, max_length: int, pooling: str = "mean", normalize: bool = True
) -> tuple[np.ndarray, str]:
    """Embed ``texts`` with the torch model (sentence-transformers style), one text at a time.

    Returns:
        ``(embeddings float32, torch version)``.
    """
    try:
        import torch
        from transformers import AutoModel, AutoTokenizer
    except ImportError as exc:
        raise MissingExtraError(exc.name or "torch", "export") from None
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    model = AutoModel.from_pretrained(str(model_dir), local_files_only=True).eval()
    rows = []
    with torch.inference_mode():
        for text in texts:
            batch = tokenizer([text], truncation=True, max_length=max_length, return_tensors="pt")
            hidden = model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            if pooling == "cls":
                vector = hidden[:, 0]
            else:
                vector = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            if normalize:
                vector = torch.nn.functional.normalize(vector, p=2, dim=1)
            rows.append(vector[0].float().numpy())
    return np.stack(rows).astype(np.float32), str(torch.__version__)


def cosine_summary(candidate: np.ndarray, reference: np.ndarray) -> dict[str, Any]:
    """Row-wise cosine of two embedding matrices: min, mean and the worst row."""
    a = candidate / np.maximum(np.linalg.norm(candidate, axis=1, keepdims=True), 1e-12)
    b = reference / np.maximum(np.linalg.norm(reference, axis=1, keepdims=True), 1e-12)
    cos = (a * b).sum(axis=1)
    return {
        "min_cosine": round(float(cos.min()), 6),
        "mean_cosine": round(float(cos.mean()), 6),
        "worst_index": int(cos.argmin()),
    }
