"""MeVe's facade: ``MeVeConfig``, ``MeVeEngine`` and a built-in simulation corpus.

The MeVe reference usage runs as written::

    from meteora_edge import MeVeConfig, MeVeEngine, setup_simulation_data

    vector_store, bm25_index = setup_simulation_data()
    config = MeVeConfig(k_init=5, tau_relevance=0.5, n_min=3, theta_redundancy=0.85, t_max=100)
    engine = MeVeEngine(config, vector_store, bm25_index)
    context = engine.run("Where is the Eiffel Tower?")     # the packed context string

It is :class:`~meteora_edge.pipeline.engine.EvidencePipeline` with ECSE off: kNN (``k_init``) →
verification ≥ ``tau`` → BM25 fallback below ``n_min`` → dedup above ``theta`` → ``t_max``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .budget import TokenCounter
from ..models.encoders import EncoderLike, HashingEncoder
from ..errors import InputError
from .ladder import CrossEncoder
from ..index.memory_index import InMemoryIndex
from .engine import EvidencePipeline, PipelineConfig, PipelineResult
from ..selection.verification import VerifierLike

__all__ = ["MeVeConfig", "MeVeEngine", "ContextChunk", "setup_simulation_data"]


@dataclass(frozen=True)
class MeVeConfig:
    """MeVe's five settings (the paper's defaults)."""

    k_init: int = 5
    tau_relevance: float = 0.5
    n_min: int = 3
    theta_redundancy: float = 0.85
    t_max: int = 100

    def pipeline_config(self, **overrides: Any) -> PipelineConfig:
        return PipelineConfig(**{
            "k_init": self.k_init,
            "use_ecse": False,
            "scoring": "dense",
            "rationales": "query",
            "tau_relevance": self.tau_relevance,
            "n_min": self.n_min,
            "theta_redundancy": self.theta_redundancy,
            "spare_new_words": False,  # MeVe's redundancy removal is the cosine test alone
            "t_max": self.t_max,
            **overrides,
        })


@dataclass
class ContextChunk:
    """A chunk of MeVe's knowledge base; ``embedding`` may be precomputed."""

    content: str
    doc_id: str
    embedding: Sequence[float] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


def _as_store(store: object, name: str) -> dict[Any, Any]:
    if isinstance(store, Mapping):
        return dict(store)
    if isinstance(store, Sequence) and not isinstance(store, (str, bytes)):
        return dict(enumerate(store))
    raise InputError(f"{name} must be a mapping of id -> chunk or a list of chunks, got {type(store).__name__}")


class MeVeEngine:
    """Run MeVe's five phases over a caller's chunk store.

    Args:
        config: a :class:`MeVeConfig`.
        vector_store: id → chunk (``ContextChunk``, string, dict, …) searched by kNN.
        bm25_index: id → chunk searched by the BM25 fallback (often the same store).
        encoder: embeds query and chunks (default: hashing; precomputed embeddings are used
            when every chunk has one).
        verifier / cross_encoder: higher rungs of the verification ladder (default: cosine).
        token_counter: the answer model's tokenizer (default: whitespace words).
    """

    def __init__(
        self,
        config: MeVeConfig,
        vector_store: object,
        bm25_index: object,
        *,
        encoder: EncoderLike | None = None,
        verifier: VerifierLike | None = None,
        cross_encoder: CrossEncoder | None = None,
        token_counter: TokenCounter | None = None,
    ) -> None:
        self.config = config
        self.vector_store = vector_store
        self.bm25_index = bm25_index
        knn_store = _as_store(vector_store, "vector_store")
        lexical_store = _as_store(bm25_index, "bm25_index")
        union = {**knn_store, **lexical_store}
        if not union:
            raise InputError("vector_store and bm25_index are both empty; give at least one chunk")
        labels = list(union)
        position = {label: i for i, label in enumerate(labels)}
        documents = [union[label] for label in labels]
        embeddings = [getattr(d, "embedding", None) for d in documents]
        precomputed = all(e is not None for e in embeddings)
        if precomputed and encoder is None:
            raise InputError(
                "the chunks carry precomputed embeddings; pass the encoder that made them (encoder=…) "
                "so the query is embedded the same way"
            )
        self.encoder = encoder if encoder is not None else HashingEncoder()
        self.index = InMemoryIndex(
            documents,
            self.encoder,
            vectors=np.asarray(embeddings, dtype=np.float32) if precomputed else None,
            labels=labels,
            knn_scope=[position[k] for k in knn_store],
            bm25_scope=[position[k] for k in lexical_store],
        )
        self.pipeline = EvidencePipeline(
            config.pipeline_config(),
            encoder=self.encoder,
            index=self.index,
            verifier=verifier,
            cross_encoder=cross_encoder,
            token_counter=token_counter,
        )

    def trace(self, query: str) -> PipelineResult:
        """Run the pipeline and return passages, ids, scores and the full trace."""
        result = self.pipeline.run(query)
        return PipelineResult(
            passages=result.passages,
            documents=[r["document"] for r in result.documents],
            ids=[r["id"] for r in result.documents],
            scores=result.scores,
            tokens=result.tokens,
            trace=result.trace,
        )

    def run(self, query: str) -> str:
        """The final context for the answer model: the kept passages joined by blank lines."""
        return self.trace(query).context


_SIMULATION = [
    ("paris_1", "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France."),
    ("paris_2", "The Eiffel Tower was built by Gustave Eiffel's company for the 1889 World's Fair in Paris."),
    ("paris_3", "Paris is the capital and largest city of France, on the river Seine."),
    ("paris_4", "The tower in Paris is 330 metres tall and was the tallest man-made structure until 1930."),
    ("rome_1", "The Colosseum is an ancient amphitheatre in the centre of Rome, Italy."),
    ("rome_2", "Construction of the Colosseum began under the emperor Vespasian in AD 72."),
    ("london_1", "Big Ben is the nickname for the Great Bell of the clock at the Palace of Westminster in London."),
    ("london_2", "The Elizabeth Tower in London, which houses Big Ben, was completed in 1859."),
    ("ny_1", "The Statue of Liberty stands on Liberty Island in New York Harbor and was a gift from France."),
    ("ny_2", "The Statue of Liberty was designed by Frederic Auguste Bartholdi and dedicated in 1886."),
    ("science_1", "Photosynthesis converts light energy into chemical energy stored in glucose."),
    ("science_2", "Water boils at 100 degrees Celsius at sea level."),
]


def setup_simulation_data() -> tuple[dict[str, ContextChunk], dict[str, ContextChunk]]:
    """A small built-in knowledge base: ``(vector_store, bm25_index)`` over the same chunks."""
    chunks = {doc_id: ContextChunk(content=text, doc_id=doc_id) for doc_id, text in _SIMULATION}
    return chunks, chunks
