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
from .budget import load_token_counter
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
from .local_index import LocalIndex
from .llm_generator import LlamaRationaleGenerator, load_sample_shots
from .llm_model import LocalLLM
from .llm_verifier import LlamaVerifier
from .memory_index import InMemoryIndex
from .meve import ContextChunk, MeVeConfig, MeVeEngine, setup_simulation_data
from .onnx_cross_encoder import OnnxCrossEncoder
from .onnx_encoder import OnnxEncoder, load_encoder  # onnxruntime is imported when a model loads
from .pipeline import EvidencePipeline, PipelineConfig, PipelineResult
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
    "ContextChunk",
    "Encoder",
    "EvidencePipeline",
    "HashingEncoder",
    "InMemoryIndex",
    "InputError",
    "LlamaRationaleGenerator",
    "LlamaVerifier",
    "LocalIndex",
    "LocalIndexError",
    "LocalLLM",
    "MeVeConfig",
    "MeVeEngine",
    "MeteoraError",
    "MeteoraReranker",
    "MeteoraSelector",
    "MissingExtraError",
    "ModelError",
    "OnnxCrossEncoder",
    "OnnxEncoder",
    "PipelineConfig",
    "PipelineResult",
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
    "load_sample_shots",
    "load_encoder",
    "load_token_counter",
    "parse_rationales",
    "parse_verdict",
    "setup_simulation_data",
    "statistical_elbow",
]
