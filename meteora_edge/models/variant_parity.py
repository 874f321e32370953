"""How close a variant's vectors are to the fp32 model's: the fixed texts and the cosine summary.

The texts are what ``meteora-edge export`` compares the ONNX model with torch on, and what
``models install`` compares each int8 variant it builds with the fp32 graph on (no torch).

Example:
    >>> import numpy as np
    >>> cosine_summary(np.eye(2, dtype=np.float32), np.eye(2, dtype=np.float32))["min_cosine"]
    1.0
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["PARITY_SENTENCES", "PROBE_TEXTS", "cosine_summary"]

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


# Parity texts whose fp32 embeddings the manifest keeps, so that the runtime can check an int8
# variant on the CPU it runs on (kernels differ: AVX2 without VNNI can saturate where VNNI does not).
PROBE_TEXTS = (0, 2, 13, 17)


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
