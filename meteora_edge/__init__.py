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

import importlib
from typing import TYPE_CHECKING, Any

from .errors import (
    BundleError,
    ConfigError,
    InputError,
    LocalIndexError,
    MeteoraError,
    MissingExtraError,
    ModelError,
)

# Public names load on first use (PEP 562), so `import meteora_edge` stays cheap: a CLI
# call or an app start pays only for the modules it touches.
_LAZY = {
    "Chunk": "documents",
    "ContextChunk": "meve",
    "Encoder": "encoders",
    "EvidencePipeline": "pipeline",
    "HashingEncoder": "encoders",
    "InMemoryIndex": "memory_index",
    "LlamaRationaleGenerator": "llm_generator",
    "LlamaVerifier": "llm_verifier",
    "LocalIndex": "local_index",
    "LocalLLM": "llm_model",
    "MeVeConfig": "meve",
    "MeVeEngine": "meve",
    "MeteoraReranker": "reranker",
    "MeteoraSelector": "ecse",
    "OnnxCrossEncoder": "onnx_cross_encoder",
    "OnnxEncoder": "onnx_encoder",
    "PipelineConfig": "pipeline",
    "PipelineResult": "pipeline",
    "RankedDocument": "reranker",
    "Rationale": "rationales",
    "RerankTrace": "reranker",
    "SelectionResult": "ecse",
    "Verdict": "verification",
    "VerificationRequest": "verification",
    "Verifier": "verification",
    "chunk_text": "chunking",
    "document_text": "documents",
    "document_texts": "documents",
    "embed": "encoders",
    "format_rationales": "rationales",
    "load_encoder": "onnx_encoder",
    "load_sample_shots": "llm_generator",
    "load_token_counter": "budget",
    "parse_rationales": "rationales",
    "parse_verdict": "verification",
    "setup_simulation_data": "meve",
    "statistical_elbow": "selection",
}

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from .documents import Chunk
    from .meve import ContextChunk
    from .encoders import Encoder
    from .pipeline import EvidencePipeline
    from .encoders import HashingEncoder
    from .memory_index import InMemoryIndex
    from .llm_generator import LlamaRationaleGenerator
    from .llm_verifier import LlamaVerifier
    from .local_index import LocalIndex
    from .llm_model import LocalLLM
    from .meve import MeVeConfig
    from .meve import MeVeEngine
    from .reranker import MeteoraReranker
    from .ecse import MeteoraSelector
    from .onnx_cross_encoder import OnnxCrossEncoder
    from .onnx_encoder import OnnxEncoder
    from .pipeline import PipelineConfig
    from .pipeline import PipelineResult
    from .reranker import RankedDocument
    from .rationales import Rationale
    from .reranker import RerankTrace
    from .ecse import SelectionResult
    from .verification import Verdict
    from .verification import VerificationRequest
    from .verification import Verifier
    from .chunking import chunk_text
    from .documents import document_text
    from .documents import document_texts
    from .encoders import embed
    from .rationales import format_rationales
    from .onnx_encoder import load_encoder
    from .llm_generator import load_sample_shots
    from .budget import load_token_counter
    from .rationales import parse_rationales
    from .verification import parse_verdict
    from .meve import setup_simulation_data
    from .selection import statistical_elbow


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'meteora_edge' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


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
