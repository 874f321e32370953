"""Evaluation methods: a method spec becomes a function ``question -> selected candidate positions``.

See :mod:`meteora_edge.evaluation` for the specs. :class:`CachedEncoder` and
:class:`SharedLLMRoles` let the methods compared on one question embed it and ask the
GGUF model once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..index.memory_index import InMemoryIndex
from ..models.analyzer import analyzer_of
from ..models.bm25 import BM25Index
from ..models.encoders import EncoderLike, embed, encoder_id
from ..models.sparse_index import SparseVector, sparse_encoder_of
from ..models.sparse_index import SparseIndex
from ..pipeline.budget import TokenCounter
from ..pipeline.config import PipelineConfig
from ..pipeline.meve import MeVeConfig
from ..pipeline.request import SelectRequest
from ..pipeline.retrieval import resolve_lexical_scorer
from ..pipeline.runtime import SelectRuntime
from ..selection.ecse import MeteoraSelector
from ..selection.stages import cosine_matrix, fuse_scores, top_k_indices
from .datasets import EvalQuestion

__all__ = ["LLM_METHODS", "TOPK_SCORING", "Method", "build_method", "method_settings", "pipeline_method_config", "topk_k",
           "CachedEncoder", "SharedLLMRoles"]

LLM_METHODS = ("ecse-llm", "ecse-llm-verify", "pipeline-llm")
#: fixed top-K baselines: name -> (scoring, lexical scorer)
TOPK_SCORING = {"topk-cosine": ("dense", "bm25"), "topk-hybrid": ("hybrid", "bm25"), "bm25": ("lexical", "bm25"),
                "topk-sparse": ("lexical", "sparse"), "topk-hybrid-sparse": ("hybrid", "sparse")}

Method = Callable[[EvalQuestion], list[int]]


def method_settings(spec: str, arg: str) -> dict[str, Any]:
    """The ``key=value,...`` settings after a method's colon, values read as JSON where they parse."""
    out: dict[str, Any] = {}
    for part in filter(None, arg.split(",")):
        key, sep, value = part.partition("=")
        if not sep:
            raise ConfigError(f"method {spec!r}: setting {part!r} must look like key=value")
        try:
            out[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            out[key.strip()] = value
    return out


def build_method(
    spec: str,
    encoder: EncoderLike,
    *,
    generator: object | None = None,
    verifier: object | None = None,
    token_counter: TokenCounter | None = None,
    batch_verifier: object | None = None,
    scorer: object | None = None,
) -> Method:
    """Turn a method spec into a function ``question -> selected candidate positions``.

    Args:
        spec: the method spec (see the module doc).
        encoder: embeds questions and candidates.
        generator, verifier, batch_verifier, scorer: the GGUF model's roles (rationales,
            one-chunk verdicts, batched verdicts, relevance scores), for the ``llm`` methods.
        token_counter: counts the tokens of what a method keeps.

    Raises:
        ConfigError: unknown method, bad K or settings, or an LLM method without its model.
    """
    name, _, arg = spec.partition(":")
    if name in TOPK_SCORING:
        k, (scoring, lexical_scorer) = topk_k(spec), TOPK_SCORING[name]
        if lexical_scorer == "sparse":
            _sparse_model(spec, encoder)

        def topk(q: EvalQuestion) -> list[int]:
            return top_k_indices(_query_scores(q, encoder, scoring, lexical_scorer), k).tolist()
        return topk
    if name in ("ecse", "ecse-window"):
        settings = _ecse_settings(spec, arg) if name == "ecse" else {}
        if name == "ecse-window":
            try:
                settings["expansion_window"] = int(arg)
            except ValueError:
                raise ConfigError(f"method {spec!r} needs a window, e.g. ecse-window:1") from None
        strategy = settings.pop("rationales", "query")
        if settings.pop("lexical_scorer", "bm25") == "sparse":
            settings["sparse_encoder"] = _sparse_model(spec, encoder)
        selector = MeteoraSelector(encoder, **{"expansion_window": 0, **settings})
        if strategy == "auto":
            return lambda q: selector.select_auto(q.candidates, q.question).selected_indices
        return lambda q: selector.select(q.candidates, [q.question]).selected_indices
    if name in LLM_METHODS:
        return _llm_method(name, spec, arg, encoder, generator=generator, verifier=verifier,
                           batch_verifier=batch_verifier, scorer=scorer, token_counter=token_counter)
    if name in ("meve", "pipeline"):
        return _pipeline_method(pipeline_method_config(spec), encoder, None, None, token_counter)
    raise ConfigError(
        f"unknown method {spec!r}; use topk-cosine:K, topk-hybrid:K, bm25:K, topk-sparse:K, topk-hybrid-sparse:K, ecse[:settings], ecse-window:W, "
        "ecse-llm[:settings], ecse-llm-verify[:settings], meve[:settings], pipeline[:settings], pipeline-llm[:settings]"
    )


def topk_k(spec: str) -> int:
    """The K of a fixed top-K spec (``topk-cosine:K``, ``topk-hybrid:K``, ``bm25:K``, ``topk-sparse:K``, ``topk-hybrid-sparse:K``).

    Raises:
        ConfigError: K is missing, not an integer or below 1.
    """
    name, _, arg = spec.partition(":")
    try:
        k = int(arg)
    except ValueError:
        raise ConfigError(f"method {spec!r} needs a positive K, e.g. {name}:3") from None
    if k < 1:
        raise ConfigError(f"method {spec!r} needs a positive K")
    return k


def pipeline_method_config(spec: str) -> PipelineConfig:
    """The pipeline settings of a ``meve[:settings]`` or ``pipeline[:settings]`` spec.

    Raises:
        ConfigError: another method, a bad setting, or verification by the GGUF model.
    """
    name, _, arg = spec.partition(":")
    if name not in ("meve", "pipeline"):
        raise ConfigError(f"method {spec!r} is not meve[:settings] or pipeline[:settings]")
    config = _override(MeVeConfig().pipeline_config() if name == "meve" else PipelineConfig(), spec, arg)
    if config.verification == "llm":
        raise ConfigError(f"method {spec!r} verifies with the GGUF model: methods that use it have 'llm' in "
                          "their name; use pipeline-llm:verification=llm")
    return config


_ECSE_SETTINGS = ("scoring", "rationales", "lexical_weight", "lexical_scorer", "pooled_cut", "pooled_z", "pooled_gap", "cover_z",
                  "cover_lead", "robust_z", "top_band", "pairing_band", "elbow_z_threshold", "expansion_window")


def _ecse_settings(spec: str, arg: str) -> dict[str, Any]:
    settings = method_settings(spec, arg)
    unknown = sorted(set(settings) - set(_ECSE_SETTINGS))
    if unknown:
        raise ConfigError(f"method {spec!r}: unknown ECSE setting(s) {unknown}; known: {list(_ECSE_SETTINGS)}")
    if settings.get("rationales", "query") not in ("auto", "query"):
        raise ConfigError(f"method {spec!r}: rationales must be auto or query")
    if settings.get("lexical_scorer", "bm25") not in ("bm25", "sparse"):
        raise ConfigError(f"method {spec!r}: lexical_scorer must be bm25 or sparse")
    return settings


def _sparse_model(spec: str, encoder: EncoderLike) -> object:
    """The learned sparse model the encoder carries, or a one-line error naming the method."""
    model = sparse_encoder_of(encoder)
    if model is None:
        raise ConfigError(f"method {spec!r} needs the learned sparse model: give --bundle with a sparse_encoder component")
    return model


def _query_scores(q: EvalQuestion, encoder: EncoderLike, scoring: str, lexical_scorer: str = "bm25") -> np.ndarray:
    """The question's score for every candidate: cosine, BM25 or the sparse model over the candidates, or fused."""
    dense = cosine_matrix(embed(encoder, [q.question]), embed(encoder, q.candidates))
    if scoring == "dense":
        return dense[0]
    if lexical_scorer == "sparse":
        lexical = SparseIndex.from_texts(q.candidates, encoder=sparse_encoder_of(encoder)).text_scores(q.question)[None, :]
    else:
        lexical = BM25Index.from_texts(q.candidates, analyzer=analyzer_of(encoder)).text_scores(q.question)[None, :]
    if scoring == "lexical":
        return lexical[0]
    return fuse_scores(dense, lexical, scoring="hybrid")[0]


def _override(config: PipelineConfig, spec: str, arg: str) -> PipelineConfig:
    return PipelineConfig.from_dict({**config.to_dict(), **method_settings(spec, arg)})


def _llm_method(
    name: str,
    spec: str,
    arg: str,
    encoder: EncoderLike,
    *,
    generator: object | None,
    verifier: object | None,
    batch_verifier: object | None,
    scorer: object | None,
    token_counter: TokenCounter | None,
) -> Method:
    """``ecse-llm``, ``ecse-llm-verify`` and ``pipeline-llm`` (see the module doc)."""
    if name == "pipeline-llm":
        config = _override(PipelineConfig(), spec, arg)
    else:
        config = PipelineConfig.from_dict({
            "use_ecse": True, "verification": "llm" if name == "ecse-llm-verify" else "none", "n_min": None,
            "theta_redundancy": None, "t_max": None, "scoring": "dense", "verification_batch": 1, "llm_pool": None,
            **method_settings(spec, arg),
        })
    uses_generator = name != "pipeline-llm" or config.rationales == "llm+auto"
    judge = None
    if config.verification == "llm":
        judge = batch_verifier if config.verification_batch > 1 else verifier
    missing = [role for role, needed, have in (
        ("rationale generator", uses_generator, generator), ("verifier", config.verification == "llm", judge),
        ("relevance scorer", name == "pipeline-llm" and config.llm_pool is not None, scorer)) if needed and have is None]
    if missing:
        raise ConfigError(f"method {spec!r} needs the GGUF model ({', '.join(missing)}): give --bundle with an llm component")
    return _pipeline_method(config, encoder, generator if uses_generator else None, judge, token_counter,
                            scorer=scorer if name == "pipeline-llm" else None)


def _pipeline_method(
    config: PipelineConfig,
    encoder: EncoderLike,
    generator: object | None,
    verifier: object | None,
    token_counter: TokenCounter | None,
    *,
    scorer: object | None = None,
) -> Method:
    """The select runtime over each question's candidates (an in-memory index), with ``config``'s settings."""
    runtime = SelectRuntime(encoder=encoder, token_counter=token_counter, generator=generator, verifier=verifier,
                            scorer=scorer)
    settings = config.to_dict()
    rerank = scorer is not None and config.llm_pool is not None
    sparse = sparse_encoder_of(encoder)
    sparse = sparse if resolve_lexical_scorer(config.lexical_scorer, sparse_encoder=sparse) == "sparse" else None

    def run(q: EvalQuestion) -> list[int]:
        index = InMemoryIndex(q.candidates, encoder, sparse_encoder=sparse)
        request = SelectRequest(query=q.question, index=index, settings=settings,
                                generate_rationales=generator is not None, llm_rerank=rerank)
        return [int(i) for i in runtime.result(request).ids]

    return run


class SharedLLMRoles:
    """The GGUF model's roles for an evaluation, each answer computed once per input.

    Methods compared on one question ask the model the same things (the rationales for the
    question, the relevance of a passage); remembering the answers makes each cost once.
    The first method that asks pays for it, so its latency includes the model's time and
    later methods' latencies do not (``eval`` prints a note).

    Args:
        generator, verifier, batch_verifier, scorer: the roles (any may be None).
    """

    def __init__(self, *, generator: object | None = None, verifier: object | None = None,
                 batch_verifier: object | None = None, scorer: object | None = None) -> None:
        self.verifier, self.batch_verifier = verifier, batch_verifier
        self.generator = None if generator is None else _Memo(generator, "generate")
        self.scorer = None if scorer is None else _ScoreMemo(scorer)

    def as_kwargs(self) -> dict[str, object | None]:
        return {"generator": self.generator, "verifier": self.verifier, "batch_verifier": self.batch_verifier,
                "scorer": self.scorer}


class _Memo:
    def __init__(self, inner: object, method: str) -> None:
        self.inner, self.method, self._memo = inner, method, {}  # type: dict[str, object]

    def __call__(self, query: str) -> object:
        if query not in self._memo:
            call = getattr(self.inner, self.method, None) or self.inner
            self._memo[query] = call(query)  # type: ignore[operator]
        return self._memo[query]

    generate = __call__


class _ScoreMemo:
    def __init__(self, inner: object) -> None:
        self.inner, self._memo = inner, {}  # type: dict[tuple[str, str], float]

    def score(self, query: str, passages: list[str]) -> np.ndarray:
        missing = [p for p in dict.fromkeys(passages) if (query, p) not in self._memo]
        if missing:
            for passage, value in zip(missing, self.inner.score(query, missing)):  # type: ignore[attr-defined]
                self._memo[(query, passage)] = float(value)
        return np.asarray([self._memo[(query, p)] for p in passages], dtype=np.float64)


class _SparseMemo:
    """A sparse encoder that remembers every text's vector (its identity is the wrapped one's)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.identity, self._memo = inner, inner.identity, {}  # type: dict[str, SparseVector]

    def encode_sparse(self, texts: list[str]) -> list[SparseVector]:
        missing = list(dict.fromkeys(t for t in texts if t not in self._memo))
        if missing:
            self._memo.update(zip(missing, self.inner.encode_sparse(missing)))
        return [self._memo[t] for t in texts]


class CachedEncoder:
    """Remembers every text's vector, so methods compared on one question embed it once.

    The identity, the lexical analyser and the cosine threshold are the wrapped encoder's, so
    indexes, traces and the verification rung see the real encoder.
    """

    def __init__(self, encoder: EncoderLike) -> None:
        self.inner = encoder
        self.identity = encoder_id(encoder)
        self.analyzer = getattr(encoder, "analyzer", None)
        self.cosine_tau = getattr(encoder, "cosine_tau", None)
        self._memo: dict[str, np.ndarray] = {}
        self._token_memo: dict[str, np.ndarray] = {}
        sparse = sparse_encoder_of(encoder)
        if sparse is not None:  # the learned sparse model's vectors, each text's once too
            self.sparse_encoder = _SparseMemo(sparse)
        if hasattr(encoder, "token_vectors"):  # word pieces only when the wrapped encoder has them (the token cover)
            self.pieces = encoder.pieces  # type: ignore[union-attr]
            self.token_vectors = self._token_vectors

    def encode(self, texts: list[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self._memo))
        if missing:
            for text, row in zip(missing, embed(self.inner, missing)):
                self._memo[text] = row
        return np.stack([self._memo[t] for t in texts]) if texts else np.zeros((0, 1), dtype=np.float32)

    def _token_vectors(self, texts: list[str]) -> list[np.ndarray]:
        """The wrapped encoder's word-piece vectors, each text's run once (methods compared on a question share them)."""
        missing = list(dict.fromkeys(t for t in texts if t not in self._token_memo))
        if missing:
            self._token_memo.update(zip(missing, self.inner.token_vectors(missing)))  # type: ignore[union-attr]
        return [self._token_memo[t] for t in texts]

    def warm(self, question: EvalQuestion) -> float:
        """Embed a question and its candidates now; return the milliseconds it took."""
        t0 = time.perf_counter()
        self.encode([question.question, *question.candidates])
        if hasattr(self, "sparse_encoder"):
            self.sparse_encoder.encode_sparse([question.question, *question.candidates])
        return (time.perf_counter() - t0) * 1000

