"""The ONNX cross-encoder: scores (query, passage) pairs for the verification ladder, no torch.

Pairs are tokenised together (``[CLS] query [SEP] passage [SEP]``, truncated at the max
length), run in length-sorted dynamically padded batches, and the logits become a relevance
score: the sigmoid of a single logit, or the softmax probability of the last label.

Example:
    >>> ce = OnnxCrossEncoder.from_bundle("models/bundles/default")  # doctest: +SKIP
    >>> ce.score("who may terminate?", ["Either party may terminate.", "Fees are due."])  # doctest: +SKIP
    array([0.93, 0.02], dtype=float32)
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .bundle import Bundle
from ..errors import BundleError, ConfigError, ModelError
from .onnx_encoder import _positive_int
from .onnx_session import create_session, feed_for, load_tokenizer, tokenize_batch

__all__ = ["OnnxCrossEncoder", "load_cross_encoder", "CROSS_PRECISIONS"]

CROSS_PRECISIONS = ("fp32", "int8")  # the export writes the mixed int8 recipe only


def relevance(logits: np.ndarray) -> np.ndarray:
    """One score per row: sigmoid of a single logit, else softmax probability of the last label."""
    logits = np.asarray(logits, dtype=np.float64)
    if logits.ndim == 1 or logits.shape[1] == 1:
        return (1.0 / (1.0 + np.exp(-logits.reshape(-1)))).astype(np.float32)
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return (shifted[:, -1] / shifted.sum(axis=1)).astype(np.float32)


class OnnxCrossEncoder:
    """A cross-encoder running an ONNX text-classification model from ``export cross-encoder``.

    Args:
        model_path: the ``.onnx`` file (output ``logits`` of shape ``(batch, labels)``).
        tokenizer_path: its ``tokenizer.json`` (with a pair template).
        max_length: tokens per pair including special tokens.
        threads, batch_size, max_batch_tokens, pad_id: as :class:`~meteora_edge.OnnxEncoder`.
        identity: what traces record.

    Raises:
        ConfigError, BundleError, ModelError: as :class:`~meteora_edge.OnnxEncoder`.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str],
        tokenizer_path: str | os.PathLike[str],
        *,
        max_length: int = 512,
        threads: int = 1,
        batch_size: int = 8,
        max_batch_tokens: int = 1024,
        pad_id: int = 0,
        identity: str | None = None,
    ) -> None:
        self.max_length = _positive_int("max_length", max_length)
        self.threads = _positive_int("threads", threads)
        self.batch_size = _positive_int("batch_size", batch_size)
        self.max_batch_tokens = _positive_int("max_batch_tokens", max_batch_tokens)
        self.pad_id = int(pad_id)
        self.model_path = Path(model_path)
        if not self.model_path.is_file():
            raise ModelError(f"ONNX model not found: {self.model_path}; export one with 'meteora-edge export cross-encoder'")
        self._tokenizer = load_tokenizer(tokenizer_path, max_length=self.max_length)
        self._session = create_session(self.model_path, threads=self.threads)
        outputs = self._session.get_outputs()
        spec = next((o for o in outputs if o.name == "logits"), outputs[0])
        if len(spec.shape or []) != 2:
            raise ModelError(f"{self.model_path}: output {spec.name!r} has shape {spec.shape}, expected (batch, labels); "
                             "export a text-classification model")
        self._output = spec.name
        self.identity = identity or f"onnx-cross:{self.model_path.name}"

    @classmethod
    def from_bundle(
        cls, path: str | os.PathLike[str] | Bundle, *, threads: int = 1, precision: str = "fp32",
        batch_size: int = 8, component: str = "cross_encoder",
    ) -> OnnxCrossEncoder:
        """Load a bundle's cross-encoder after checking its files (see :meth:`OnnxEncoder.from_bundle`)."""
        if precision not in CROSS_PRECISIONS:
            raise ConfigError(f"precision must be one of {', '.join(CROSS_PRECISIONS)}, got {precision!r}")
        bundle = path if isinstance(path, Bundle) else Bundle.load(path)
        comp = bundle.component(component)
        if comp.kind != "cross_encoder":
            raise BundleError(f"component {component!r} of {bundle.root} is a {comp.kind!r}, not a cross_encoder")
        for role in (precision, "tokenizer"):
            if role not in comp.files:
                raise BundleError(f"cross-encoder of {bundle.root} has no {role!r} file "
                                  f"(it has {', '.join(sorted(comp.files))}); re-export it")
        settings = comp.settings
        max_length = settings.get("max_length", 512)
        pad_id = settings.get("pad_id", 0)
        if not isinstance(max_length, int) or max_length < 1 or not isinstance(pad_id, int) or pad_id < 0:
            raise BundleError(f"cross-encoder settings of {bundle.root} are invalid (max_length={max_length!r}, "
                              f"pad_id={pad_id!r}); re-export it")
        return cls(
            bundle.file(component, precision), bundle.file(component, "tokenizer"), max_length=max_length,
            threads=threads, batch_size=batch_size, pad_id=pad_id,
            identity=f"onnx-cross:{comp.source or bundle.root.name}:{comp.files[precision].sha256[:12]}:{precision}",
        )

    def score(self, query: str, passages: list[str]) -> np.ndarray:
        """Relevance of each passage to ``query`` (float32, input order; higher is more relevant)."""
        if not isinstance(query, str):
            raise ConfigError(f"query is {type(query).__name__}, expected str")
        passages = list(passages)
        for i, text in enumerate(passages):
            if not isinstance(text, str):
                raise ConfigError(f"passages[{i}] is {type(text).__name__}, expected str")
        if not passages:
            return np.zeros(0, dtype=np.float32)
        encodings = tokenize_batch(self._tokenizer, [(query, p) for p in passages])
        order = np.argsort([len(e.ids) for e in encodings], kind="stable")[::-1]
        out = np.empty(len(passages), dtype=np.float32)
        start = 0
        while start < len(passages):
            longest = len(encodings[order[start]].ids)
            size = max(1, min(self.batch_size, self.max_batch_tokens // max(longest, 1)))
            rows = order[start : start + size]
            out[rows] = self._run([encodings[i] for i in rows])
            start += size
        return out

    def _run(self, encodings: list) -> np.ndarray:
        width = max(len(e.ids) for e in encodings)
        ids = np.full((len(encodings), width), self.pad_id, dtype=np.int64)
        types = np.zeros_like(ids)
        mask = np.zeros_like(ids)
        for row, enc in enumerate(encodings):
            n = len(enc.ids)
            ids[row, :n], types[row, :n], mask[row, :n] = enc.ids, enc.type_ids, 1
        feed = feed_for(self._session, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})
        try:
            logits = self._session.run([self._output], feed)[0]
        except Exception as exc:  # onnxruntime raises its own pybind exception types
            raise ModelError(f"onnxruntime failed on {self.model_path.name}: {str(exc)[:300]}") from None
        return relevance(logits)

    def __repr__(self) -> str:
        return f"OnnxCrossEncoder({self.model_path.name!r}, max_length={self.max_length}, threads={self.threads})"


def load_cross_encoder(bundle: str | os.PathLike[str] | Bundle | None, *, threads: int = 1) -> OnnxCrossEncoder | None:
    """The bundle's ONNX cross-encoder (the ladder's second rung), or None when there is none.

    Raises:
        BundleError, ModelError, MissingExtraError: see :meth:`OnnxCrossEncoder.from_bundle`.
    """
    if bundle is None:
        return None
    loaded = bundle if isinstance(bundle, Bundle) else Bundle.load(bundle)
    if "cross_encoder" not in loaded.components:
        return None
    return OnnxCrossEncoder.from_bundle(loaded, threads=threads)
