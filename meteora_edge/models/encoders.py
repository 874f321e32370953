"""Encoders turn texts into vectors; this module holds the protocol and the model-free default.

Anything with ``.encode(list[str])`` or a plain callable ``f(list[str])`` is an encoder.
:func:`embed` is the one place that calls an encoder and checks what comes back.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol, Union, runtime_checkable

import numpy as np

from ..errors import ConfigError, InputError, ModelError
from .vectors import normalize_rows

__all__ = ["Encoder", "EncoderLike", "HashingEncoder", "embed", "normalize_rows", "encoder_id", "cosine_tau",
           "DEFAULT_COSINE_TAU"]

#: The cosine verification threshold of an encoder that records none (set for MiniLM-class sentence encoders).
DEFAULT_COSINE_TAU = 0.35

_TOKEN = re.compile(r"[A-Za-z0-9_]+")


@runtime_checkable
class Encoder(Protocol):
    """An object that embeds a batch of texts into a ``(len(texts), dim)`` array."""

    def encode(self, texts: list[str]) -> np.ndarray: ...


EncoderLike = Union[Encoder, Callable[[list[str]], "np.ndarray"]]


_CHECK_EVERY = 16  # texts the hashing encoder embeds between two checks


class HashingEncoder:
    """The model-free default: a signed feature-hashing bag of words.

    Tokens are ``[A-Za-z0-9_]+`` of the lower-cased text; each token's blake2b digest
    (8 bytes, big-endian) picks the bucket ``h mod n_features`` and its top bit the sign;
    counts are summed and the row is L2-normalised (an empty text stays all zeros).

    Its cosines are bag-of-words overlaps, far lower than a sentence encoder's for the same
    match (a question sharing two content words with a sentence scores about 0.1–0.3), so
    its cosine verification threshold :attr:`cosine_tau` is 0.1: a passage that shares a
    content word or two with the question or a rationale passes.

    Example:
        >>> enc = HashingEncoder()
        >>> enc.encode(["Termination for convenience"]).shape
        (1, 384)
    """

    def __init__(self, n_features: int = 384) -> None:
        if not isinstance(n_features, int) or isinstance(n_features, bool) or n_features < 1:
            raise ConfigError(f"n_features must be a positive integer, got {n_features!r}")
        self.n_features = n_features

    #: The cosine rung's threshold for this encoder (see the class notes).
    cosine_tau = 0.1

    @property
    def identity(self) -> str:
        return f"hashing:{self.n_features}"

    def encode(self, texts: list[str], *, check: Callable[[], None] | None = None) -> np.ndarray:
        out = np.zeros((len(texts), self.n_features), dtype=np.float32)
        for row, text in enumerate(texts):
            if check is not None and row % _CHECK_EVERY == 0:
                check()
            for token in _TOKEN.findall(text.lower()):
                h = int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest(), "big")
                out[row, h % self.n_features] += -1.0 if h >> 63 else 1.0
        return normalize_rows(out)

    def __repr__(self) -> str:
        return f"HashingEncoder(n_features={self.n_features})"


def encoder_id(encoder: object) -> str:
    """A stable description of an encoder, recorded in traces and indexes."""
    identity = getattr(encoder, "identity", None)
    if isinstance(identity, str):
        return identity
    return f"custom:{type(encoder).__module__}.{type(encoder).__qualname__}"


def cosine_tau(encoder: object) -> float:
    """The cosine verification threshold calibrated for ``encoder``: its ``cosine_tau`` when it has
    one in [-1, 1] (a bundle may record it; :class:`HashingEncoder` has its own), else
    :data:`DEFAULT_COSINE_TAU`."""
    value = getattr(encoder, "cosine_tau", None)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and -1.0 <= value <= 1.0:
        return float(value)
    return DEFAULT_COSINE_TAU


def _takes_check(kind: type) -> bool:
    method = getattr(kind, "encode", None)
    return method is not None and _accepts_check(method)


@functools.lru_cache(maxsize=64)
def _accepts_check(method: Callable[..., Any]) -> bool:
    try:
        return "check" in inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False


def embed(encoder: EncoderLike, texts: Sequence[str], *, check: Callable[[], None] | None = None) -> np.ndarray:
    """Embed ``texts`` with any encoder-like object and check the result.

    Args:
        encoder: an object with ``.encode(list[str])`` or a callable taking ``list[str]``.
        texts: the texts.
        check: called before the work and, by an encoder whose ``encode`` takes ``check`` (the ONNX and
            hashing encoders), between its batches; it stops the work by raising (see
            :class:`~meteora_edge.pipeline.deadline.Deadline`).

    Returns:
        A float32 array of shape ``(len(texts), dim)``.

    Raises:
        InputError: ``encoder`` is neither an encoder nor callable.
        ModelError: the encoder returned something that is not a finite ``(n, dim)`` matrix.
    """
    batch = list(texts)
    if check is not None:
        check()
    if check is not None and _takes_check(type(encoder)):
        raw = encoder.encode(batch, check=check)  # type: ignore[call-arg]
    elif hasattr(encoder, "encode"):
        raw = encoder.encode(batch)
    elif callable(encoder):
        raw = encoder(batch)
    else:
        raise InputError(
            f"encoder of type {type(encoder).__name__} has no .encode() and is not callable; "
            "pass HashingEncoder(), OnnxEncoder or a function list[str] -> array"
        )
    try:
        matrix = np.asarray(raw, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise ModelError(f"encoder returned {type(raw).__name__} that is not a numeric matrix: {exc}") from None
    if matrix.ndim == 1 and len(batch) == 1:
        matrix = matrix[None, :]
    if matrix.ndim != 2 or matrix.shape[0] != len(batch) or (batch and matrix.shape[1] == 0):
        raise ModelError(
            f"encoder returned shape {matrix.shape} for {len(batch)} texts; expected ({len(batch)}, dim)"
        )
    if not np.isfinite(matrix).all():
        raise ModelError("encoder returned NaN or infinite values")
    return matrix
