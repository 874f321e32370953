"""meteora-edge: offline, torch-free evidence selection for retrieval-augmented generation.

Example:
    >>> from meteora_edge import HashingEncoder, MeteoraSelector
    >>> selector = MeteoraSelector(HashingEncoder())
    >>> result = selector.select(["Fees are due monthly.", "Either party may terminate."],
    ...                          ["termination rights"])
    >>> 1 in result.selected_indices
    True
"""

from __future__ import annotations

from .chunking import chunk_text
from .documents import Chunk, document_text, document_texts
from .ecse import MeteoraSelector, SelectionResult
from .encoders import Encoder, HashingEncoder, embed
from .errors import (
    BundleError,
    ConfigError,
    InputError,
    LocalIndexError,
    MeteoraError,
    MissingExtraError,
    ModelError,
)
from .rationales import Rationale, format_rationales, parse_rationales
from .reranker import MeteoraReranker, RankedDocument, RerankTrace
from .selection import statistical_elbow
from .verification import Verdict, VerificationRequest, Verifier, parse_verdict

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "BundleError",
    "Chunk",
    "ConfigError",
    "Encoder",
    "HashingEncoder",
    "InputError",
    "LocalIndexError",
    "MeteoraError",
    "MeteoraReranker",
    "MeteoraSelector",
    "MissingExtraError",
    "ModelError",
    "RankedDocument",
    "Rationale",
    "RerankTrace",
    "SelectionResult",
    "Verdict",
    "VerificationRequest",
    "Verifier",
    "chunk_text",
    "document_text",
    "document_texts",
    "embed",
    "format_rationales",
    "parse_rationales",
    "parse_verdict",
    "statistical_elbow",
]
