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
import os
from typing import TYPE_CHECKING, Any

# Offline means offline: onnxruntime's official builds start telemetry (a device id and an
# event queue under ~/.cache/Microsoft, uploads to Microsoft) when onnxruntime is imported,
# unless this is set first. It costs nothing here; an explicit value of the caller wins.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

# A source checkout keeps cli/ and export/ beside this folder (a wheel holds them inside it, by
# pyproject's package-dir); imported from a checkout, exactly those two folders become
# meteora_edge.cli and meteora_edge.export (see _checkout).
from ._checkout import add_stage_folders as _add_stage_folders  # noqa: E402

_add_stage_folders(__path__, os.path.dirname(os.path.abspath(__file__)))  # type: ignore[name-defined]  # noqa: F821
del _add_stage_folders

from .errors import (
    BundleError,
    Cancelled,
    CollectionError,
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
    "ContextChunk": "pipeline.meve",
    "CorpusIndex": "index.corpus_index",
    "Deadline": "pipeline.deadline",
    "EmbeddingCache": "models.embedding_cache",
    "Encoder": "models.encoders",
    "EvidencePipeline": "pipeline.engine",
    "HashingEncoder": "models.encoders",
    "HopRationaleGenerator": "selection.llm_hops",
    "InMemoryIndex": "index.memory_index",
    "LlamaBatchVerifier": "selection.llm_batch_verifier",
    "LlamaRationaleGenerator": "selection.llm_generator",
    "LlamaRelevanceScorer": "selection.llm_scorer",
    "LlamaVerifier": "selection.llm_verifier",
    "LocalIndex": "index.local_index",
    "LocalLLM": "models.llm_model",
    "MeVeConfig": "pipeline.meve",
    "MeVeEngine": "pipeline.meve",
    "MilvusIndex": "index.milvus_index",
    "MeteoraReranker": "selection.reranker",
    "MeteoraSelector": "selection.ecse",
    "MeteoraVerifier": "selection.verification",
    "OnnxCrossEncoder": "models.onnx_cross_encoder",
    "OnnxEncoder": "models.onnx_encoder",
    "PipelineConfig": "pipeline.config",
    "PipelineResult": "pipeline.engine",
    "RankedDocument": "selection.reranker",
    "Rationale": "selection.rationales",
    "RerankTrace": "selection.reranker",
    "SelectRequest": "pipeline.request",
    "SelectRuntime": "pipeline.runtime",
    "SelectionMetrics": "evaluation",
    "SelectionResult": "selection.ecse",
    "Verdict": "selection.verification",
    "VerificationRequest": "selection.verification",
    "Verifier": "selection.verification",
    "chunk_text": "index.chunking",
    "iter_chunks": "index.chunking",
    "chunk_texts": "index.chunking",
    "document_text": "documents",
    "document_texts": "documents",
    "embed": "models.encoders",
    "find_spanning_chunks": "index.chunking",
    "format_rationales": "selection.rationales",
    "load_encoder": "models.onnx_encoder",
    "load_sample_shots": "selection.sample_shots",
    "load_token_counter": "pipeline.budget",
    "parse_rationales": "selection.rationales",
    "parse_verdict": "selection.verification",
    "precision_recall_f1": "evaluation",
    "setup_simulation_data": "pipeline.meve",
    "statistical_elbow": "selection.stages",
}

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from .documents import Chunk
    from .pipeline.meve import ContextChunk
    from .index.corpus_index import CorpusIndex
    from .models.embedding_cache import EmbeddingCache
    from .models.encoders import Encoder
    from .pipeline.engine import EvidencePipeline
    from .models.encoders import HashingEncoder
    from .selection.llm_hops import HopRationaleGenerator
    from .index.memory_index import InMemoryIndex
    from .selection.llm_batch_verifier import LlamaBatchVerifier
    from .selection.llm_generator import LlamaRationaleGenerator
    from .selection.llm_scorer import LlamaRelevanceScorer
    from .selection.llm_verifier import LlamaVerifier
    from .index.local_index import LocalIndex
    from .models.llm_model import LocalLLM
    from .pipeline.meve import MeVeConfig
    from .pipeline.meve import MeVeEngine
    from .index.milvus_index import MilvusIndex
    from .selection.reranker import MeteoraReranker
    from .selection.ecse import MeteoraSelector
    from .selection.verification import MeteoraVerifier
    from .models.onnx_cross_encoder import OnnxCrossEncoder
    from .models.onnx_encoder import OnnxEncoder
    from .pipeline.config import PipelineConfig
    from .pipeline.engine import PipelineResult
    from .selection.reranker import RankedDocument
    from .pipeline.request import SelectRequest
    from .pipeline.runtime import SelectRuntime
    from .pipeline.deadline import Deadline
    from .selection.rationales import Rationale
    from .selection.reranker import RerankTrace
    from .evaluation import SelectionMetrics
    from .selection.ecse import SelectionResult
    from .selection.verification import Verdict
    from .selection.verification import VerificationRequest
    from .selection.verification import Verifier
    from .index.chunking import chunk_text
    from .index.chunking import chunk_texts
    from .index.chunking import iter_chunks
    from .documents import document_text
    from .documents import document_texts
    from .models.encoders import embed
    from .index.chunking import find_spanning_chunks
    from .selection.rationales import format_rationales
    from .models.onnx_encoder import load_encoder
    from .selection.sample_shots import load_sample_shots
    from .pipeline.budget import load_token_counter
    from .selection.rationales import parse_rationales
    from .selection.verification import parse_verdict
    from .evaluation import precision_recall_f1
    from .pipeline.meve import setup_simulation_data
    from .selection.stages import statistical_elbow


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
    "Cancelled",
    "CollectionError",
    "ConfigError",
    "ContextChunk",
    "CorpusIndex",
    "Deadline",
    "EmbeddingCache",
    "Encoder",
    "EvidencePipeline",
    "HashingEncoder",
    "HopRationaleGenerator",
    "InMemoryIndex",
    "InputError",
    "LlamaBatchVerifier",
    "LlamaRationaleGenerator",
    "LlamaRelevanceScorer",
    "LlamaVerifier",
    "LocalIndex",
    "LocalIndexError",
    "LocalLLM",
    "MeVeConfig",
    "MeVeEngine",
    "MeteoraError",
    "MeteoraReranker",
    "MeteoraSelector",
    "MeteoraVerifier",
    "MilvusIndex",
    "MissingExtraError",
    "ModelError",
    "OnnxCrossEncoder",
    "OnnxEncoder",
    "PipelineConfig",
    "PipelineResult",
    "RankedDocument",
    "SelectRequest",
    "SelectRuntime",
    "Rationale",
    "RerankTrace",
    "SelectionMetrics",
    "SelectionResult",
    "Verdict",
    "VerificationRequest",
    "Verifier",
    "chunk_text",
    "iter_chunks",
    "chunk_texts",
    "document_text",
    "document_texts",
    "embed",
    "find_spanning_chunks",
    "format_rationales",
    "load_sample_shots",
    "load_encoder",
    "load_token_counter",
    "parse_rationales",
    "parse_verdict",
    "precision_recall_f1",
    "setup_simulation_data",
    "statistical_elbow",
]
