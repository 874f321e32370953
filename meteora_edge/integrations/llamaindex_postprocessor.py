"""LlamaIndex: :class:`MeteoraNodePostprocessor`, a node postprocessor (extra ``[llamaindex]``: llama-index-core).

Give it to any query engine or call it on retrieved nodes; it keeps the nodes ``select`` would
keep, best first::

    from meteora_edge.integrations.llamaindex_postprocessor import MeteoraNodePostprocessor

    postprocessor = MeteoraNodePostprocessor(bundle="models/bundles/default", settings={"t_max": 300})
    engine = index.as_query_engine(node_postprocessors=[postprocessor])
    nodes = postprocessor.postprocess_nodes(retriever.retrieve(question), query_str=question)

Each kept node comes back as a new ``NodeWithScore`` around the same node, its ``score`` the
pipeline's priority score (the cross-encoder's probability, the ECSE selection score or the
retrieval score — the report's ``score_name``); a node whose text the budget cut
(``oversize="truncate"``) is a copy with the cut text. Nodes are never modified. The whole
report (``select``'s JSON object; ``detail="full"`` adds the trace) is
``postprocessor.last_report`` (per thread); the passage ``id`` there is the node's position
among the nodes given.
"""

from __future__ import annotations

from typing import List, Optional

from ..errors import InputError, MissingExtraError
from .adapter_model import SelectorModel

try:
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.schema import NodeWithScore, QueryBundle
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise MissingExtraError(exc.name or "llama_index.core", "llamaindex") from exc

__all__ = ["MeteoraNodePostprocessor"]


class MeteoraNodePostprocessor(SelectorModel, BaseNodePostprocessor):
    """Keeps the retrieved nodes METEORA's selection and MeVe's phases choose (see the module doc).

    Its fields are :class:`~meteora_edge.integrations.adapter_model.SelectorModel`'s: a bundle
    folder or an encoder object, pipeline settings by name, the report's detail, …; bad
    settings are refused with ``ConfigError`` when it is made.
    """

    @classmethod
    def class_name(cls) -> str:
        return "MeteoraNodePostprocessor"

    def _postprocess_nodes(
        self, nodes: List[NodeWithScore], query_bundle: Optional[QueryBundle] = None
    ) -> List[NodeWithScore]:
        if query_bundle is None:
            raise InputError("MeteoraNodePostprocessor needs the query: pass query_str or query_bundle")
        kept = self._selector.select(query_bundle.query_str, nodes)
        out = []
        for position, record in zip(kept.positions, kept.records):
            node = nodes[position].node
            if record["text"] != nodes[position].text:
                node = node.model_copy(update={"text": record["text"]})
            out.append(NodeWithScore(node=node, score=record["score"]))
        return out
