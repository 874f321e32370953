"""The select runtime: models loaded once from one bundle, then ``run(request)`` for every entry point.

``select``, ``serve`` (HTTP and stdio), the embedded API, the LangChain and LlamaIndex
adapters and ``eval`` all build a :class:`~meteora_edge.pipeline.request.SelectRequest` and
hand it to a :class:`SelectRuntime`, so every capability (LLM rerank, the rationale prompt,
batched verification, flag instructions, scoring and cut settings, index selection) works
the same everywhere. The runtime holds the encoder, the cross-encoder, the answer model's
tokenizer, the GGUF model and the indexes it may search; the GGUF model's roles (rationale
writer, verifier, batch verifier, relevance scorer) are cheap wrappers built per request.

Example:
    >>> runtime = SelectRuntime()
    >>> data = runtime.run(SelectRequest(query="who may terminate?", chunks=["Either party may terminate."]))
    >>> data["format"], data["passages"][0]["text"]
    ('meteora-edge.selection', 'Either party may terminate.')
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..models.bundle import Bundle
from ..models.encoders import EncoderLike, HashingEncoder
from .budget import TokenCounter, WhitespaceCounter, load_token_counter
from .engine import EvidencePipeline, PipelineResult
from .ladder import CrossEncoder
from .report import selection_json
from .request import RATIONALE_PROMPTS, RequestError, SelectRequest

__all__ = ["SelectRuntime", "load_bundle", "check_llm_bundle", "NO_LLM_HOW"]

NO_LLM_HOW = ("add one with 'meteora-edge models install NAME --bundle BUNDLE' or "
              "'meteora-edge export llm --gguf FILE --out BUNDLE'")


def load_bundle(bundle: str | os.PathLike[str] | Bundle | None) -> Bundle | None:
    """The bundle behind a path, read once and handed down to every loader (None stays None).

    Raises:
        BundleError: no such folder, no manifest, a malformed or newer-format manifest.
    """
    if bundle is None or isinstance(bundle, Bundle):
        return bundle
    return Bundle.load(bundle)


def check_llm_bundle(bundle: Bundle | None, roles: Sequence[str], *, need: str | None = None) -> None:
    """Refuse, before any model loads, roles (request keys) that have no GGUF model to run on.

    Args:
        bundle: the loaded bundle, or None.
        roles: the request keys that need the model (nothing to check when empty).
        need: what the message says needs the model (default: from the first role).

    Raises:
        RequestError: a role is asked for without a bundle, or the bundle has no llm component.
    """
    if not roles:
        return
    need = need or {"verify": "LLM verification ('verify') needs a verifier"}.get(roles[0], f"'{roles[0]}' needs a GGUF model")
    if bundle is None:
        raise RequestError(f"{need}: give 'bundle' with an llm component; {NO_LLM_HOW}")
    if "llm" not in bundle.components:
        raise RequestError(f"bundle {bundle.root} has no llm component; {NO_LLM_HOW}")


class SelectRuntime:
    """The models of one bundle and the indexes it may search; :meth:`run` answers one request.

    Safe to call from many threads: a pipeline is built per request over the shared models.

    Args:
        encoder: embeds queries and chunks (default: the hashing encoder).
        cross_encoder: the ladder's cross-encoder rung, or None.
        token_counter: the answer model's tokenizer (default: whitespace words).
        llm: the GGUF model (a ``LocalLLM``) every role is built on, or None.
        generator, verifier, batch_verifier, scorer: role objects to use instead of ones built on ``llm``
            (e.g. a chat model as verifier, or the memoised roles of ``eval``).
        indexes: name → index (or an object whose ``current()`` gives the index) a request may name; the first is
            the default.
        num_rationales, rationale_prompt, sample_shots, domain: the generated rationales' defaults and the GGUF
            prompts' examples and subject.
        bundle: the bundle the models came from.
        no_llm: what a request that needs the GGUF model is told when there is none.
    """

    def __init__(
        self,
        *,
        encoder: EncoderLike | None = None,
        cross_encoder: CrossEncoder | None = None,
        token_counter: TokenCounter | None = None,
        llm: Any = None,
        generator: Any = None,
        verifier: Any = None,
        batch_verifier: Any = None,
        scorer: Any = None,
        indexes: Mapping[str, Any] | None = None,
        num_rationales: int = 3,
        rationale_prompt: str = "hops",
        sample_shots: Sequence[Any] | None = None,
        domain: str | None = None,
        bundle: Bundle | None = None,
        no_llm: str = f"give 'bundle' with an llm component; {NO_LLM_HOW}",
    ) -> None:
        if rationale_prompt not in RATIONALE_PROMPTS:
            raise RequestError(f"'rationale_prompt' must be one of {', '.join(RATIONALE_PROMPTS)}, "
                               f"got {rationale_prompt!r}")
        self.encoder = encoder if encoder is not None else HashingEncoder()
        self.cross_encoder = cross_encoder
        self.token_counter = token_counter or WhitespaceCounter()
        self.llm = llm
        self._roles = {"generator": generator, "verifier": verifier, "batch_verifier": batch_verifier, "scorer": scorer}
        self.indexes = dict(indexes or {})
        self.num_rationales, self.rationale_prompt = num_rationales, rationale_prompt
        self.sample_shots, self.domain = sample_shots, domain
        self.bundle, self.no_llm = bundle, no_llm
        self._hop_shots: list[Any] | None = None

    @classmethod
    def load(
        cls,
        bundle: str | os.PathLike[str] | Bundle | None = None,
        *,
        tokenizer: str | TokenCounter | None = None,
        threads: int = 1,
        precision: str = "auto",
        cache: Any = None,
        index_encoder: str | None = None,
        cross_encoder: bool = True,
        llm: bool = False,
        llm_threads: int = 1,
        context_size: int | None = None,
        indexes: Mapping[str, Any] | None = None,
        num_rationales: int = 3,
        rationale_prompt: str = "hops",
        sample_shots: Sequence[Any] | None = None,
        domain: str | None = None,
        no_llm: str = f"give 'bundle' with an llm component; {NO_LLM_HOW}",
    ) -> SelectRuntime:
        """Read the bundle once and load its models, cheapest first.

        Args:
            bundle: a bundle folder or a loaded :class:`Bundle` (None: the hashing encoder, no other model).
            tokenizer: the answer model's tokenizer for the budget (see :func:`load_token_counter`), or a loaded one.
            threads, precision, cache, index_encoder: the ONNX encoder's settings (see :func:`load_encoder`).
            cross_encoder: load the bundle's cross-encoder (when it has one).
            llm, llm_threads, context_size: load the bundle's GGUF model, and how.
            indexes, num_rationales, rationale_prompt, sample_shots, domain, no_llm: as :class:`SelectRuntime`.

        Raises:
            RequestError: ``llm`` without a GGUF model in the bundle.
            BundleError, ModelError, MissingExtraError, ConfigError: a model cannot be loaded.
        """
        counter = tokenizer if isinstance(tokenizer, TokenCounter) else load_token_counter(tokenizer)
        loaded = load_bundle(bundle)
        if llm:
            check_llm_bundle(loaded, ("llm",))
        encoder: EncoderLike = HashingEncoder()  # no bundle, no model: the ONNX modules are not even imported
        cross = None
        if loaded is not None:
            from ..models.onnx_cross_encoder import load_cross_encoder
            from ..models.onnx_encoder import load_encoder

            encoder = load_encoder(loaded, threads=threads, precision=precision, cache=cache,
                                   index_encoder=index_encoder)
            cross = load_cross_encoder(loaded, threads=threads) if cross_encoder else None
        model = None
        if llm:
            from ..models.llm_model import LocalLLM

            model = LocalLLM.from_bundle(loaded, threads=llm_threads, context_size=context_size)  # type: ignore[arg-type]
        return cls(encoder=encoder, cross_encoder=cross, token_counter=counter, llm=model, indexes=indexes,
                   num_rationales=num_rationales, rationale_prompt=rationale_prompt, sample_shots=sample_shots,
                   domain=domain, bundle=loaded, no_llm=no_llm)

    # -- the GGUF model's roles ----------------------------------------------------------

    @property
    def model(self) -> Any:
        """The GGUF model the roles run on: ``llm``, else the ``model`` of a given role, else None."""
        if self.llm is not None:
            return self.llm
        return next((r.model for r in self._roles.values() if getattr(r, "model", None) is not None), None)

    def _role(self, name: str, key: str) -> Any:
        given = self._roles[name]
        if given is not None:
            return given
        if self.llm is None:
            raise RequestError(f"'{key}' needs the GGUF model: {self.no_llm}")
        if name == "verifier":
            from ..selection.llm_verifier import LlamaVerifier

            return LlamaVerifier(self.llm, domain=self.domain)
        if name == "batch_verifier":
            from ..selection.llm_batch_verifier import LlamaBatchVerifier

            return LlamaBatchVerifier(self.llm, domain=self.domain)
        from ..selection.llm_scorer import LlamaRelevanceScorer

        return LlamaRelevanceScorer(self.llm)

    def llm_roles(self) -> dict[str, Any]:
        """Every role of the GGUF model with the runtime's defaults: ``generator``, ``verifier``,
        ``batch_verifier`` and ``scorer`` (what ``eval``'s ``llm`` methods share).

        Raises:
            RequestError: the runtime has no GGUF model.
        """
        return {"generator": self._generator(None), "verifier": self._role("verifier", "verify"),
                "batch_verifier": self._role("batch_verifier", "verify"), "scorer": self._role("scorer", "llm_rerank")}

    def _generator(self, request: SelectRequest | None) -> Any:
        given = self._roles["generator"]
        if given is not None:
            return given
        if self.llm is None:
            raise RequestError(f"'generate_rationales' needs the GGUF model: {self.no_llm}")
        prompt = (request and request.rationale_prompt) or self.rationale_prompt
        count = (request and request.num_rationales) or self.num_rationales
        if prompt == "hops" and self.sample_shots is None:
            from ..selection.llm_hops import HopRationaleGenerator, load_hop_shots

            if self._hop_shots is None:
                self._hop_shots = load_hop_shots()
            return HopRationaleGenerator(self.llm, sample_shots=self._hop_shots, num_rationales=count, domain=self.domain)
        from ..selection.llm_generator import LlamaRationaleGenerator
        from ..selection.sample_shots import load_sample_shots

        shots = load_sample_shots() if self.sample_shots is None else self.sample_shots
        return LlamaRationaleGenerator(self.llm, sample_shots=shots, num_rationales=count, domain=self.domain)

    def roles(self, request: SelectRequest) -> dict[str, Any]:
        """The GGUF roles ``request`` asks for, as :class:`EvidencePipeline` takes them.

        Raises:
            RequestError: a role is asked for and there is no GGUF model to build it on.
        """
        roles: dict[str, Any] = {"rationale_generator": None, "verifier": None, "relevance_scorer": None}
        if request.generate_rationales:
            roles["rationale_generator"] = self._generator(request)
        if request.verify:
            batch = request.batched and (self._roles["batch_verifier"] is not None
                                         or (self.llm is not None and self._roles["verifier"] is None))
            roles["verifier"] = self._role("batch_verifier" if batch else "verifier", "verify")
        if request.llm_rerank:
            roles["relevance_scorer"] = self._role("scorer", "llm_rerank")
        return roles

    def check(self, request: SelectRequest) -> None:
        """Refuse a request this runtime cannot run (no GGUF model for a role, no such index), before it runs.

        Raises:
            RequestError: as :meth:`roles` and :meth:`index`.
        """
        self.roles(request)
        if request.uses_index:
            self.index(request.index)

    def index(self, name: Any) -> Any:
        """The index a request names (by name, or an index object); None: the first.

        Raises:
            RequestError: the runtime has no index, or none of that name.
        """
        if name is not None and not isinstance(name, str):
            return name
        if not self.indexes:
            raise RequestError("give 'chunks' or 'index': there is no index to search")
        found = next(iter(self.indexes.values())) if name is None else self.indexes.get(name)
        if found is None:
            raise RequestError(f"no index named {name!r}; there is {', '.join(map(repr, self.indexes))}")
        return found.current() if hasattr(found, "current") else found

    # -- running -------------------------------------------------------------------------

    def pipeline(self, request: SelectRequest) -> EvidencePipeline:
        """The pipeline that runs ``request`` (its roles, index and settings)."""
        return EvidencePipeline(
            request.config, encoder=self.encoder, index=self.index(request.index) if request.uses_index else None,
            cross_encoder=self.cross_encoder, token_counter=self.token_counter, **self.roles(request),
        )

    def result(self, request: SelectRequest, *, check: Callable[[], None] | None = None) -> PipelineResult:
        """Run ``request`` and return the pipeline's result (passages, documents, trace).

        ``check`` is called between the pipeline's phases and batches (see
        :class:`~meteora_edge.pipeline.deadline.Deadline`); what it raises stops the run.

        Raises:
            RequestError: as :meth:`check`.
            InputError, ModelError, LocalIndexError: the inputs are over a limit, or a model or the index failed.
            Cancelled: ``check`` stopped it.
        """
        pipe = self.pipeline(request)
        query = request.query or request.given_rationales[0].text
        return pipe.run(query, passages=None if request.uses_index else list(request.chunks),
                        rationales=list(request.given_rationales) or None, reject=request.reject_rules, check=check)

    def run(self, request: SelectRequest, *, check: Callable[[], None] | None = None) -> dict[str, Any]:
        """Run ``request`` and return ``select``'s JSON object (``check`` as in :meth:`result`).

        Raises:
            as :meth:`result`.
        """
        result = self.result(request, check=check)
        return selection_json(result, query=request.query, index_mode=request.uses_index,
                              default_source=request.source, detail=request.detail)

