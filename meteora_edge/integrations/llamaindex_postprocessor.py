"""LlamaIndex: :class:`MeteoraNodePostprocessor`, a node postprocessor (extra ``[llamaindex]``: llama-index-core).

Give it to any query engine, as a built-in reranker (``SentenceTransformerRerank``), or call it
on retrieved nodes; it keeps the nodes ``select`` would keep, best first::

    from meteora_edge.integrations.llamaindex_postprocessor import MeteoraNodePostprocessor

    postprocessor = MeteoraNodePostprocessor(bundle="models/bundles/default", settings={"t_max": 300},
                                             top_n=3, keep_retrieval_score=True)
    engine = index.as_query_engine(node_postprocessors=[postprocessor])   # engine.query / await engine.aquery
    nodes = postprocessor.postprocess_nodes(retriever.retrieve(question), query_str=question)

Each kept node comes back as a new ``NodeWithScore`` whose ``score`` is its relevance: the
pipeline's priority score (the cross-encoder's probability, the ECSE selection score or the
retrieval score — the report's ``score_name``). Around the same node object, unless the budget
cut its text or ``keep_retrieval_score=True`` (then a copy, its
``metadata["retrieval_score"]`` the score the node came with, hidden from the LLM and embed
metadata). Nodes are never modified; a node without text is skipped with a logged warning.
``top_n`` and ``score_threshold`` cut the pipeline's choice further.

Instrumentation: each call is a dispatcher span (``_postprocess_nodes`` /
``_apostprocess_nodes``) with the built-in rerankers' ``ReRankStartEvent`` and
``ReRankEndEvent`` and a :class:`MeteoraReportEvent` carrying this call's report (``select``'s
JSON object plus ``adapter``; ``detail="full"`` adds the trace; the passage ``id`` there is the
node's position among the nodes given) — an event handler gets the report of each call, even
concurrent ones. The legacy ``callback_manager`` gets a ``RERANKING`` event pair (e.g. for
``LlamaDebugHandler``). :meth:`MeteoraNodePostprocessor.select` returns it too, and
``postprocessor.last_report`` is the last of this thread or asyncio task. The async path runs
the selection in a worker thread, off the event loop.
"""

from __future__ import annotations

import asyncio
from typing import Any, Dict, List, Optional, Tuple

from ..errors import InputError, MissingExtraError
from .adapter_model import Kept, SelectorModel

try:
    from llama_index.core.callbacks import CBEventType, EventPayload
    from llama_index.core.instrumentation import get_dispatcher
    from llama_index.core.instrumentation.events.base import BaseEvent
    from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise MissingExtraError(exc.name or "llama_index.core", "llamaindex") from exc

__all__ = ["MeteoraNodePostprocessor", "MeteoraReportEvent"]

dispatcher = get_dispatcher(__name__)


class MeteoraReportEvent(BaseEvent):
    """One call's report (``select``'s JSON object), sent inside that call's span."""

    report: Dict[str, Any]

    @classmethod
    def class_name(cls) -> str:
        return "MeteoraReportEvent"


class MeteoraNodePostprocessor(SelectorModel, BaseNodePostprocessor):
    """Keeps the retrieved nodes METEORA's selection and MeVe's phases choose (see the module doc).

    Its fields are :class:`~meteora_edge.integrations.adapter_model.SelectorModel`'s (a bundle
    folder or an encoder object, pipeline settings by name, ``top_n``, ``score_threshold``, the
    report's detail, …) and ``keep_retrieval_score``; bad settings are refused with
    ``ConfigError`` when it is made.
    """

    keep_retrieval_score: bool = False

    @classmethod
    def class_name(cls) -> str:
        return "MeteoraNodePostprocessor"

    def select(self, nodes: List[NodeWithScore], query: str) -> Tuple[List[NodeWithScore], Dict[str, Any]]:
        """The kept nodes (best first) and this call's report; no events (see :meth:`postprocess_nodes`).

        Raises:
            InputError: an empty query. ModelError: a model failed.
        """
        kept = self.keep(query, nodes, _texts(nodes))
        self.remember(kept)
        return self._scored(kept, nodes), kept.report

    async def aselect(self, nodes: List[NodeWithScore], query: str) -> Tuple[List[NodeWithScore], Dict[str, Any]]:
        """:meth:`select` with the selection in a worker thread, off the event loop."""
        kept = await asyncio.to_thread(self.keep, query, nodes, _texts(nodes))
        self.remember(kept)
        return self._scored(kept, nodes), kept.report

    def _postprocess_nodes(
        self, nodes: List[NodeWithScore], query_bundle: Optional[QueryBundle] = None
    ) -> List[NodeWithScore]:
        query = self._start(nodes, query_bundle)
        with self.callback_manager.event(CBEventType.RERANKING, payload=self._payload(nodes, query)) as event:
            out, report = self.select(nodes, query)
            event.on_end(payload={EventPayload.NODES: out})
        return _end(out, report)

    @dispatcher.span
    async def _apostprocess_nodes(
        self, nodes: List[NodeWithScore], query_bundle: Optional[QueryBundle] = None
    ) -> List[NodeWithScore]:
        query = self._start(nodes, query_bundle)
        with self.callback_manager.event(CBEventType.RERANKING, payload=self._payload(nodes, query)) as event:
            out, report = await self.aselect(nodes, query)
            event.on_end(payload={EventPayload.NODES: out})
        return _end(out, report)

    @property
    def _model_name(self) -> str:
        return "meteora-edge:" + (self.bundle or (type(self.encoder).__name__ if self.encoder is not None else "hashing"))

    def _start(self, nodes: List[NodeWithScore], query_bundle: Optional[QueryBundle]) -> str:
        """The query, after the instrumentation's start event (InputError without one)."""
        if query_bundle is None:
            raise InputError("MeteoraNodePostprocessor needs the query: pass query_str or query_bundle")
        dispatcher.event(ReRankStartEvent(query=query_bundle, nodes=nodes, top_n=self.top_n or len(nodes),
                                          model_name=self._model_name))
        return query_bundle.query_str

    def _payload(self, nodes: List[NodeWithScore], query: str) -> Dict[str, Any]:
        """The legacy callback manager's RERANKING payload, as the built-in rerankers send it."""
        return {EventPayload.NODES: nodes, EventPayload.MODEL_NAME: self._model_name, EventPayload.QUERY_STR: query,
                EventPayload.TOP_K: self.top_n or len(nodes)}

    def _scored(self, kept: Kept, nodes: List[NodeWithScore]) -> List[NodeWithScore]:
        out = []
        for position, record in zip(kept.positions, kept.records):
            given = nodes[position]
            update: Dict[str, Any] = {}
            if record["text"] != given.node.get_content():
                update["text"] = record["text"]
            if self.keep_retrieval_score:
                update["metadata"] = {**given.node.metadata, "retrieval_score": given.score}
                for key in ("excluded_llm_metadata_keys", "excluded_embed_metadata_keys"):
                    update[key] = [*getattr(given.node, key), "retrieval_score"]
            node = given.node.model_copy(update=update) if update else given.node
            out.append(NodeWithScore(node=node, score=record["score"]))
        return out


def _texts(nodes: List[NodeWithScore]) -> List[str]:
    """Each node's text; a node that is not a text node has none (and is skipped)."""
    return [n.node.text if isinstance(n.node, TextNode) else "" for n in nodes]


def _end(out: List[NodeWithScore], report: Dict[str, Any]) -> List[NodeWithScore]:
    dispatcher.event(MeteoraReportEvent(report=report))
    dispatcher.event(ReRankEndEvent(nodes=out))
    return out
