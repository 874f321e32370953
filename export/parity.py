"""Parity of exported ONNX encoders against the torch model they came from.

The reference is what sentence-transformers computes: the transformer's last hidden state,
mean-pooled over the attention mask (or the CLS vector) and L2-normalised, with the same
truncation. torch and transformers are imported inside :func:`reference_embeddings` only.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from meteora_edge.errors import MissingExtraError
from meteora_edge.models.variant_parity import PARITY_SENTENCES, cosine_summary

__all__ = ["PARITY_SENTENCES", "reference_embeddings", "cosine_summary"]


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
