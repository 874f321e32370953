"""The pipeline over a RAG framework's retrieved documents: what the LangChain and LlamaIndex adapters share.

A :class:`DocumentSelector` loads its models once (a bundle's encoder and cross-encoder, or
an encoder you pass) and runs ``select``'s pipeline over the documents of each call, with
the settings ``select --chunks`` uses (:func:`~meteora_edge.pipeline.config.select_config`:
ECSE alone unless ``tau_relevance``, ``n_min``, ``theta_redundancy``, ``t_max`` or
``verification`` ask for more). It returns which documents were kept, best first, and the
same JSON object the CLI and the server print, which it also keeps per thread as
:attr:`DocumentSelector.last_report`.

Example:
    >>> selector = DocumentSelector(settings={"t_max": 50})
    >>> kept = selector.select("who may terminate?", ["Either party may terminate.", "Fees are monthly."])
    >>> kept.positions, kept.report["passages"][0]["score_name"]
    ([0], 'selection')
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError, InputError
from ..models.encoders import EncoderLike
from ..pipeline.budget import load_token_counter
from ..pipeline.report import DETAILS, selection_json
from ..pipeline.request import SelectRequest
from ..pipeline.runtime import SelectRuntime
from ..selection.rationales import as_rationales

__all__ = ["DocumentSelector", "Selection"]

_PROBE = "probe"  # the query the settings are checked with when the selector is built


@dataclass(frozen=True)
class Selection:
    """What one call kept: ``positions`` of the kept documents in the caller's list, in context
    order (best first), their passage ``records`` (as in ``report["passages"]``), and the ``report``."""

    positions: list[int]
    records: list[dict[str, Any]]
    report: dict[str, Any]


class DocumentSelector:
    """``select``'s pipeline over the documents of each call, its models loaded once.

    Args:
        bundle: a model bundle folder: its ONNX encoder (and its cross-encoder, if it has one).
        encoder: an encoder object instead (anything with ``encode(list[str])``); neither: hashing.
        settings: :class:`~meteora_edge.PipelineConfig` settings by name (``t_max``, ``tau_relevance``,
            ``scoring``, ``rationales``: ``"auto"``/``"query"`` …), checked now.
        rationales: fixed rationales for every query (a tagged text or a list); default: written
            from the query (``settings["rationales"]``) or by ``rationale_generator``.
        rationale_generator: e.g. a ``LlamaRationaleGenerator`` or any callable/chat model.
        verifier: e.g. a ``LlamaVerifier`` or a chat model; verification then defaults to ``llm``.
        tokenizer: the answer model's tokenizer for ``t_max`` (default: whitespace words).
        detail: ``"summary"`` or ``"full"`` (the report then carries the whole trace).
        threads, precision: the ONNX models' settings.
        runtime: a :class:`~meteora_edge.pipeline.runtime.SelectRuntime` to run on (e.g. one with a GGUF
            model) instead of one loaded from ``bundle``/``encoder`` and the roles above.
        llm_rerank: let the runtime's GGUF model rerank ECSE's best candidates.
        reject: rejection rules in plain words (a string or a list) for every query: the LLM verifier
            flags a chunk that matches one and the LLM rerank scores it down (needs one of them).

    Raises:
        ConfigError: an unknown setting, a value out of range, or both ``bundle`` and ``encoder``.
        BundleError, ModelError, MissingExtraError: the bundle cannot be loaded.
    """

    def __init__(
        self,
        *,
        bundle: str | None = None,
        encoder: EncoderLike | None = None,
        settings: Mapping[str, Any] | None = None,
        rationales: Any = None,
        rationale_generator: Any = None,
        verifier: Any = None,
        tokenizer: str | None = None,
        detail: str = "summary",
        threads: int = 1,
        precision: str = "auto",
        runtime: SelectRuntime | None = None,
        llm_rerank: bool = False,
        reject: Any = None,
    ) -> None:
        if bundle is not None and encoder is not None:
            raise ConfigError("give a bundle or an encoder, not both")
        if detail not in DETAILS:
            raise ConfigError(f"detail must be 'summary' or 'full', got {detail!r}")
        self.settings = dict(settings or {})
        if verifier is not None:
            self.settings.setdefault("verification", "llm")
        self.rationales = as_rationales(rationales) if rationales is not None else None
        self.detail, self.llm_rerank, self.reject = detail, llm_rerank, reject
        self.generate = rationale_generator is not None
        probe = self.request(_PROBE)  # refuse bad settings now, not per call
        if runtime is None:
            base = SelectRuntime.load(bundle, tokenizer=tokenizer, threads=threads, precision=precision)
            runtime = SelectRuntime(encoder=encoder if encoder is not None else base.encoder,
                                    cross_encoder=base.cross_encoder, token_counter=base.token_counter,
                                    generator=rationale_generator, verifier=verifier, bundle=base.bundle)
        self.runtime = runtime
        self.runtime.check(probe)
        self._local = threading.local()

    def request(self, query: str, documents: Sequence[Any] = (_PROBE,)) -> SelectRequest:
        """The runtime's request for ``query`` over ``documents``, with this selector's settings.

        Raises:
            InputError, ConfigError: as :class:`~meteora_edge.pipeline.request.SelectRequest`.
        """
        return SelectRequest(query=query, chunks=list(documents), rationales=self.rationales, detail=self.detail,
                             generate_rationales=self.generate and not self.rationales, verify=bool(
                                 self.settings.get("verification") == "llm"), llm_rerank=self.llm_rerank,
                             reject=self.reject, settings=self.settings)

    @property
    def last_report(self) -> dict[str, Any] | None:
        """The report of this thread's last call (None before the first)."""
        return getattr(self._local, "report", None)

    def select(self, query: str, documents: Sequence[Any]) -> Selection:
        """Run the pipeline over ``documents`` for ``query``.

        Args:
            query: the question.
            documents: strings, mappings with a text, or objects with ``.page_content``/``.text``
                (their ``.metadata`` is reported); never modified.

        Returns:
            The :class:`Selection` (empty for no documents).

        Raises:
            InputError: an empty query or a document without text.
            ModelError: a model failed.
        """
        if not isinstance(query, str) or not query.strip():
            raise InputError("the query must be a non-empty string")
        if not documents:
            self._local.report = None
            return Selection([], [], {})
        result = self.runtime.result(self.request(query, documents))
        report = selection_json(result, query=query, index_mode=False, detail=self.detail)
        self._local.report = report
        return Selection(list(result.ids), report["passages"], report)
