"""Haystack: :class:`MeteoraRanker`, a ranker component (extra ``[haystack]``: haystack-ai).

Put it after a retriever in a Haystack 2 pipeline, where a ranker goes; it passes on only the
documents ``select`` would keep, best first::

    from haystack import Pipeline
    from meteora_edge.integrations.haystack_ranker import MeteoraRanker

    pipeline = Pipeline()
    pipeline.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=20))
    pipeline.add_component("ranker", MeteoraRanker(bundle="models/bundles/default", settings={"t_max": 300}))
    pipeline.connect("retriever.documents", "ranker.documents")
    result = pipeline.run({"retriever": {"query": question}, "ranker": {"query": question}})
    documents = result["ranker"]["documents"]

Each output document is a copy of an input one (same ``id``, ``content`` — cut to fit ``t_max``
only when the budget cuts it — and ``meta``) with ``score`` set to its score and
``meta["meteora_edge"]`` holding its passage record (``rank``, ``id`` — its position among the
input documents —, ``score``, ``score_name``, ``tokens``). The input documents are never changed;
one without text content is skipped with a logged warning. The ``report`` output is ``select``'s
JSON object for the call. Models load in :meth:`MeteoraRanker.warm_up` (a pipeline calls it;
:meth:`~MeteoraRanker.run` calls it when nobody did), through the same
:class:`~meteora_edge.integrations.adapter_model.SelectorModel` as the LangChain and LlamaIndex adapters.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..errors import MissingExtraError
from .adapter_model import SelectorModel

try:
    from haystack import Document, component, default_from_dict, default_to_dict
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise MissingExtraError(exc.name or "haystack", "haystack") from exc

__all__ = ["MeteoraRanker"]

_RECORD_KEYS = ("rank", "id", "score", "score_name", "tokens", "scores", "via", "chosen_by", "verdict")


@component
class MeteoraRanker:
    """Keeps the documents METEORA's selection and MeVe's phases choose (see the module doc).

    Args:
        bundle: a model bundle folder (its ONNX encoder, and its cross-encoder if any); None: the hashing encoder.
        settings: pipeline settings by their ``PipelineConfig`` names (as ``select --chunks``).
        top_k: pass on at most this many documents, best first (None: all the pipeline keeps).
        score_threshold: pass on only documents scored at least this (None: no threshold).
        rationales, tokenizer, detail, threads, precision, llm_rerank, reject: as
            :class:`~meteora_edge.integrations.embedded.DocumentSelector`.
        runtime: a :class:`~meteora_edge.pipeline.runtime.SelectRuntime` to run on (e.g. one with a GGUF
            model) instead of one loaded from ``bundle``; a ranker with one is not serialisable.

    Raises:
        ConfigError, BundleError, MissingExtraError: bad settings or a bundle that cannot load
            (when the models load: :meth:`warm_up`).
    """

    def __init__(self, *, bundle: str | None = None, settings: dict[str, Any] | None = None, top_k: int | None = None,
                 score_threshold: float | None = None, rationales: Any = None, tokenizer: str | None = None,
                 detail: str = "summary", threads: int = 1, precision: str = "auto", llm_rerank: bool = False,
                 reject: Any = None, runtime: Any = None) -> None:
        self.init = {"bundle": bundle, "settings": dict(settings or {}), "top_k": top_k,
                     "score_threshold": score_threshold, "rationales": rationales, "tokenizer": tokenizer,
                     "detail": detail, "threads": threads, "precision": precision, "llm_rerank": llm_rerank,
                     "reject": reject}
        self.runtime = runtime
        self._model: SelectorModel | None = None

    def warm_up(self) -> None:
        """Load the models (once)."""
        self._selector()

    def _selector(self) -> SelectorModel:
        if self._model is None:
            options = {k: v for k, v in self.init.items() if k != "top_k"}
            self._model = SelectorModel(**options, top_n=self.init["top_k"], runtime=self.runtime)
        return self._model

    def to_dict(self) -> dict[str, Any]:
        """The component's settings, for a serialised pipeline.

        Raises:
            ValueError: the ranker was given a ``runtime`` object, which has no serialised form.
        """
        if self.runtime is not None:
            raise ValueError("a MeteoraRanker built on a runtime object cannot be serialised; give bundle= instead")
        return default_to_dict(self, **self.init)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MeteoraRanker:
        """The ranker a :meth:`to_dict` describes."""
        return default_from_dict(cls, data)

    @component.output_types(documents=list[Document], report=dict[str, Any])
    def run(self, query: str, documents: list[Document], top_k: int | None = None) -> dict[str, Any]:
        """The documents the pipeline keeps for ``query``, best first, and the call's report.

        Args:
            query: the question.
            documents: the retrieved documents (never changed).
            top_k: this call's cut instead of the ranker's ``top_k``.

        Raises:
            InputError: an empty query. ModelError: a model failed.
        """
        kept = self._selector().keep(query, documents, [d.content or "" for d in documents])
        pairs = list(zip(kept.positions, kept.records))[: top_k if top_k is not None else len(kept.positions)]
        out = []
        for position, record in pairs:
            original = documents[position]
            meta = {**original.meta, "meteora_edge": {k: record[k] for k in _RECORD_KEYS if k in record}}
            changes: dict[str, Any] = {"meta": meta, "score": record["score"]}
            if record["text"] != original.content:
                changes["content"] = record["text"]
            out.append(dataclasses.replace(original, **changes))
        return {"documents": out, "report": kept.report}
