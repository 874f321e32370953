"""The encoder both embedding adapters wrap: a bundle's ONNX encoder (or any encoder), loaded once.

:func:`embedding_encoder` loads it the way the CLI does (the hashing encoder without a bundle);
:func:`embed_lists` turns a batch of texts into the lists of floats the frameworks expect. Both
are shared by ``langchain_embeddings`` and ``llamaindex_embedding``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import ConfigError, InputError
from ..models.encoders import EncoderLike, embed

__all__ = ["embed_lists", "embedding_encoder"]


def embedding_encoder(bundle: str | None, encoder: EncoderLike | None, *, threads: int, precision: str) -> EncoderLike:
    """The encoder of ``bundle`` (its ONNX encoder), or ``encoder`` itself; neither: the hashing encoder.

    Raises:
        ConfigError: both are given. BundleError, ModelError, MissingExtraError: the bundle cannot load.
    """
    from ..models.onnx_encoder import load_encoder

    if bundle is not None and encoder is not None:
        raise ConfigError("give a bundle or an encoder, not both")
    return encoder if encoder is not None else load_encoder(bundle, threads=threads, precision=precision)


def embed_lists(encoder: EncoderLike, texts: Sequence[str]) -> list[list[float]]:
    """One embedding (a list of floats) per text, in order; ``[]`` for no texts.

    Raises:
        InputError: a text is not a string. ModelError: the encoder failed.
    """
    texts = list(texts)
    bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), None)
    if bad is not None:
        raise InputError(f"texts must be strings, got {type(texts[bad]).__name__} at position {bad}")
    if not texts:
        return []
    return embed(encoder, texts).astype(float).tolist()
