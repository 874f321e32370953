"""The ONNX sentence encoder: onnxruntime + tokenizers + numpy, no torch.

Texts are tokenised (truncated at the model's max length), sorted by length, run in
small dynamically padded batches, mean-pooled over the attention mask, L2-normalised and
put back in input order.

Example:
    >>> enc = OnnxEncoder.from_bundle("models/bundles/default", precision="int8")  # doctest: +SKIP
    >>> enc.encode(["Either party may terminate."]).shape  # doctest: +SKIP
    (1, 384)
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .bundle import Bundle, sha256_file
from .encoders import EncoderLike, HashingEncoder, normalize_rows
from ..errors import BundleError, ConfigError, ModelError
from .onnx_session import create_session, encode_padded, feed_for, load_tokenizer, tokenize_batch

__all__ = ["OnnxEncoder", "load_encoder", "PRECISIONS", "POOLINGS"]

logger = logging.getLogger(__name__)

PRECISIONS = ("int8", "fp32")
POOLINGS = ("mean", "cls")


def _positive_int(name: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")
    return value


def pool(hidden: np.ndarray, mask: np.ndarray, pooling: str) -> np.ndarray:
    """Pool token vectors ``(batch, seq, dim)`` into ``(batch, dim)`` ("mean" over the mask or "cls")."""
    if pooling == "cls":
        return hidden[:, 0, :]
    weights = mask[:, :, None].astype(np.float32)
    counts = np.maximum(weights.sum(axis=1), 1e-9)
    return (hidden * weights).sum(axis=1) / counts


class OnnxEncoder:
    """A sentence encoder running an ONNX model exported by ``meteora-edge export encoder``.

    Args:
        model_path: the ``.onnx`` file (output ``last_hidden_state`` or the first output).
        tokenizer_path: its ``tokenizer.json``.
        max_length: tokens per text, including special tokens (longer texts are truncated).
        pooling: ``"mean"`` (attention-masked mean) or ``"cls"``.
        normalize: L2-normalise each embedding.
        threads: onnxruntime intra-op threads.
        batch_size: texts per model call (length-sorted, padded to the longest).
        max_batch_tokens: cap on ``texts × padded length`` per call, so long texts run in
            smaller batches (peak memory grows with it; attention with its square).
        pad_id: the padding token id.
        dimension: expected embedding size, checked against the graph when given.
        identity: what indexes and traces record; derived from the model's sha256 when absent.

    Raises:
        ConfigError: an option is out of range.
        BundleError: the tokenizer is missing or unreadable.
        ModelError: the model cannot be loaded or does not produce ``(batch, seq, dimension)``.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str],
        tokenizer_path: str | os.PathLike[str],
        *,
        max_length: int = 256,
        pooling: str = "mean",
        normalize: bool = True,
        threads: int = 1,
        batch_size: int = 8,
        max_batch_tokens: int = 512,
        pad_id: int = 0,
        dimension: int | None = None,
        identity: str | None = None,
    ) -> None:
        self.max_length = _positive_int("max_length", max_length)
        self.batch_size = _positive_int("batch_size", batch_size)
        self.max_batch_tokens = _positive_int("max_batch_tokens", max_batch_tokens)
        self.threads = _positive_int("threads", threads)
        if pooling not in POOLINGS:
            raise ConfigError(f"pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}")
        self.pooling = pooling
        self.normalize = bool(normalize)
        self.pad_id = int(pad_id)
        self.model_path = Path(model_path)
        if not self.model_path.is_file():
            raise ModelError(f"ONNX model not found: {self.model_path}; export one with 'meteora-edge export encoder'")
        self._tokenizer = load_tokenizer(tokenizer_path, max_length=self.max_length)
        self._session = create_session(self.model_path, threads=self.threads)
        outputs = self._session.get_outputs()
        spec = next((o for o in outputs if o.name == "last_hidden_state"), outputs[0])
        self._output: str = spec.name
        self.dimension = self._check_output(spec, dimension)
        self._identity = identity

    def _check_output(self, spec: Any, expected: int | None) -> int:
        shape = list(spec.shape or [])
        if len(shape) != 3:
            raise ModelError(
                f"{self.model_path}: output {spec.name!r} has shape {shape}, expected (batch, sequence, dimension); "
                "export a feature-extraction model"
            )
        declared = shape[-1] if isinstance(shape[-1], int) else None
        if expected is not None and declared is not None and declared != expected:
            raise BundleError(
                f"{self.model_path} produces {declared}-dimensional vectors but the manifest says {expected}; "
                "re-export the bundle"
            )
        dimension = declared if declared is not None else expected
        if dimension is None:
            dimension = int(self._run(["dimension probe"]).shape[1])
        return int(dimension)

    @classmethod
    def from_bundle(
        cls,
        path: str | os.PathLike[str] | Bundle,
        *,
        threads: int = 1,
        precision: str = "int8",
        batch_size: int = 8,
        component: str = "encoder",
    ) -> OnnxEncoder:
        """Load the encoder of a bundle after checking its files' sizes and hashes.

        Args:
            path: the bundle folder (or a loaded :class:`Bundle`).
            threads: onnxruntime intra-op threads.
            precision: ``"int8"`` (quantised, faster) or ``"fp32"`` (exact).
            batch_size: texts per model call.
            component: the component name in the manifest.

        Raises:
            BundleError: no such bundle/component/precision, tampered or truncated files,
                settings that make no sense.
        """
        if precision not in PRECISIONS:
            raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        bundle = path if isinstance(path, Bundle) else Bundle.load(path)
        comp = bundle.component(component)
        if comp.kind != "encoder":
            raise BundleError(f"component {component!r} of {bundle.root} is a {comp.kind!r}, not an encoder")
        if precision not in comp.files:
            have = ", ".join(p for p in PRECISIONS if p in comp.files) or "none"
            raise BundleError(
                f"bundle {bundle.root} has no {precision} encoder (it has: {have}); "
                f"use --precision {'fp32' if precision == 'int8' else 'int8'} or re-export with --quantize int8"
            )
        if "tokenizer" not in comp.files:
            raise BundleError(f"encoder of bundle {bundle.root} lists no tokenizer file; re-export the bundle")
        settings = _settings(comp.settings, bundle.root)
        model = bundle.file(component, precision)
        tokenizer = bundle.file(component, "tokenizer")
        source = comp.source or bundle.root.name
        identity = f"onnx:{source}:{comp.files[precision].sha256[:12]}:{precision}"
        return cls(
            model,
            tokenizer,
            threads=threads,
            batch_size=batch_size,
            identity=identity,
            **settings,
        )

    @property
    def identity(self) -> str:
        """``onnx:<source>:<sha256 prefix>:<precision>``, recorded by local indexes and traces."""
        if self._identity is None:
            self._identity = f"onnx:{self.model_path.name}:{sha256_file(self.model_path)[:12]}"
        return self._identity

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(i.name for i in self._session.get_inputs())

    def encode(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts`` into a float32 ``(len(texts), dimension)`` array, in input order.

        Raises:
            ConfigError: an item is not a string.
            ModelError: onnxruntime fails while running.
        """
        texts = list(texts)
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise ConfigError(f"texts[{i}] is {type(text).__name__}, expected str")
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        lengths = [len(e.ids) for e in tokenize_batch(self._tokenizer, texts)]
        order = np.argsort(lengths, kind="stable")[::-1]
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        start = 0
        while start < len(texts):
            longest = lengths[order[start]]
            size = max(1, min(self.batch_size, self.max_batch_tokens // max(longest, 1)))
            rows = order[start : start + size]
            out[rows] = self._run([texts[i] for i in rows])
            start += size
        return out

    def _run(self, batch: list[str]) -> np.ndarray:
        ids, mask = encode_padded(self._tokenizer, batch, pad_id=self.pad_id)
        feed = feed_for(self._session, {"input_ids": ids, "attention_mask": mask})
        try:
            hidden = self._session.run([self._output], feed)[0]
        except Exception as exc:  # onnxruntime raises its own pybind exception types
            raise ModelError(f"onnxruntime failed on {self.model_path.name}: {str(exc)[:300]}") from None
        vectors = pool(np.asarray(hidden, dtype=np.float32), mask, self.pooling)
        return normalize_rows(vectors).astype(np.float32) if self.normalize else vectors.astype(np.float32)

    def __repr__(self) -> str:
        return (
            f"OnnxEncoder({self.model_path.name!r}, dimension={self.dimension}, max_length={self.max_length}, "
            f"pooling={self.pooling!r}, threads={self.threads}, batch_size={self.batch_size})"
        )


def _settings(raw: Mapping[str, Any], root: Path) -> dict[str, Any]:
    """The constructor keywords from a manifest's encoder settings, checked."""
    settings: dict[str, Any] = {}
    try:
        settings["max_length"] = _positive_int("max_length", raw.get("max_length", 256))
        if raw.get("dimension") is not None:
            settings["dimension"] = _positive_int("dimension", raw["dimension"])
    except ConfigError as exc:
        raise BundleError(f"encoder settings of {root}: {exc}; re-export the bundle") from None
    pooling = raw.get("pooling", "mean")
    if pooling not in POOLINGS:
        raise BundleError(f"encoder settings of {root}: unknown pooling {pooling!r}; this version reads {POOLINGS}")
    settings["pooling"] = pooling
    settings["normalize"] = bool(raw.get("normalize", True))
    pad_id = raw.get("pad_id", 0)
    if not isinstance(pad_id, int) or isinstance(pad_id, bool) or pad_id < 0:
        raise BundleError(f"encoder settings of {root}: pad_id must be a non-negative integer, got {pad_id!r}")
    settings["pad_id"] = pad_id
    return settings


def load_encoder(bundle: str | os.PathLike[str] | None, *, threads: int = 1, precision: str = "int8") -> EncoderLike:
    """The encoder the CLI uses: the bundle's ONNX encoder, or :class:`HashingEncoder` without one.

    Raises:
        BundleError, ModelError, MissingExtraError: see :meth:`OnnxEncoder.from_bundle`.
    """
    if bundle is None:
        return HashingEncoder()
    loaded = Bundle.load(bundle)
    if "encoder" not in loaded.components:
        return HashingEncoder()  # e.g. a bundle holding only the llm so far; traces name the encoder used
    return OnnxEncoder.from_bundle(loaded, threads=threads, precision=precision)
