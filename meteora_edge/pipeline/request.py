"""One select request, checked once with one set of rules, whatever entry point built it.

The CLI turns its options into a :class:`SelectRequest`, ``serve`` (HTTP and stdio) its JSON
body (:func:`request_from_json`), the embedded API and the adapters their call; each then
asks :class:`~meteora_edge.pipeline.runtime.SelectRuntime` to run it. The rules live here
only; their messages name the request's own keys in quotes (``'query'``, ``'chunks'``), and
:func:`reword` lets an entry point put its own names in their place (the CLI its flags).

Example:
    >>> request = SelectRequest(query="who may terminate?", chunks=["Either party may terminate."])
    >>> request.config.verification, request.detail
    ('none', 'summary')
    >>> SelectRequest(query="q", chunks=["a"], generate_rationales=True, rationales=["a rationale"])
    Traceback (most recent call last):
    ...
    meteora_edge.pipeline.request.RequestError: 'generate_rationales' writes the rationales itself; drop 'rationales'
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from ..documents import check_unicode, document_texts
from ..errors import InputError, MeteoraError
from ..selection.rationales import Rationale, as_rationales
from .config import RATIONALE_STRATEGIES, PipelineConfig, select_config
from .report import DETAILS

__all__ = ["SelectRequest", "RequestError", "REQUEST_KEYS", "SETTING_KEYS", "LIMIT_KEYS", "RATIONALE_PROMPTS",
           "request_from_json", "json_body", "refuse_unknown_keys", "reword"]

#: ``hops``: one short rationale per hop of the question; ``meteora``: METEORA's general few-shot prompt
RATIONALE_PROMPTS = ("hops", "meteora")
REQUEST_KEYS = ("query", "chunks", "index", "rationales", "detail", "generate_rationales", "verify", "llm_rerank",
                "rationale_prompt", "num_rationales", "reject")
SETTING_KEYS = tuple(f.name for f in fields(PipelineConfig) if f.name != "rationales")
LIMIT_KEYS = ("max_candidates", "max_chunk_chars", "max_rationales")


class RequestError(InputError):
    """A request breaks one of the rules; the message names the request's keys in quotes."""


def reword(exc: MeteoraError, names: Mapping[str, str]) -> MeteoraError:
    """The same error with each quoted key (``'query'``) replaced by an entry point's name for it.

    Args:
        exc: an error raised by the library.
        names: key → the entry point's name (e.g. ``{"query": "--query"}``); keys not named stay.

    Returns:
        An error of the same type with the reworded message (``exc`` itself when nothing changed).
    """
    message = str(exc)
    reworded = re.sub(r"'([a-z_]+)'", lambda m: names.get(m.group(1), m.group(0)), message)
    if reworded == message:
        return exc
    try:
        return type(exc)(reworded)
    except TypeError:  # an error class with another constructor keeps its words
        return exc


def _typed(key: str, value: Any, kinds: tuple[type, ...], what: str) -> Any:
    if value is not None and (not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds)):
        raise RequestError(f"'{key}' must be {what}, got {type(value).__name__}")
    return value


def _rationales(value: Any) -> tuple[tuple[Rationale, ...], str | None]:
    """Given rationales (numbered 1..N) and the strategy a string may name instead."""
    if value is None:
        return (), None
    if isinstance(value, str) and value.strip() in RATIONALE_STRATEGIES:
        return (), value.strip()
    if isinstance(value, Rationale):
        value = [value]
    if not isinstance(value, (str, list, tuple)):
        raise RequestError(f"'rationales' must be \"auto\", \"query\", a text or a list, got {type(value).__name__}")
    found = [r if isinstance(r, Rationale) else None for r in value] if isinstance(value, (list, tuple)) else []
    if found and all(found):
        parsed = list(found)
    else:
        parsed = as_rationales(list(value) if isinstance(value, tuple) else value)
    if not parsed:
        raise RequestError("'rationales' holds no rationale; give at least one, or drop the key")
    for i, r in enumerate(parsed, start=1):
        for part in (r.text, r.label, r.flag_instructions):
            if part:
                check_unicode(part, f"rationale {i}")
    return tuple(Rationale(r.text, i, r.label, r.flag_instructions) for i, r in enumerate(parsed, start=1)), None


@dataclass(frozen=True)
class SelectRequest:
    """One selection to run, checked at construction (pass everything by keyword).

    Args:
        query: the question; it is the first rationale when none is given.
        chunks: the candidates (strings, mappings with a text, or objects with ``.page_content``/``.text``),
            or None to search an index.
        index: the index to search: the name of one the runtime serves, an index object, or None for
            the runtime's first.
        rationales: ``"auto"``/``"query"``/``"llm+auto"`` (the strategy), a tagged text, or a list of texts,
            mappings or :class:`Rationale` objects (flag instructions included).
        detail: ``"summary"`` or ``"full"`` (every candidate, verdict and stage).
        generate_rationales: the GGUF model writes the rationales (needs ``query``).
        verify: the GGUF model judges each selected chunk (``verification="llm"``).
        llm_rerank: the GGUF model scores ECSE's best candidates, which are re-cut with ECSE's scores.
        rationale_prompt, num_rationales: the generated rationales' prompt (:data:`RATIONALE_PROMPTS`) and count
            (None: the runtime's).
        reject: rejection rules in plain words (a string or a list), e.g. "draft notes that are not part of
            the signed agreement": the LLM verifier flags a chunk that matches one and the LLM rerank scores it
            down (they join the first rationale's flag instructions); needs ``verify`` or ``llm_rerank``.
        settings: :class:`PipelineConfig` settings by name, with ``select``'s defaults (see
            :func:`~meteora_edge.pipeline.config.select_config`); the resource limits may only be lowered.
        source: the name reported as the passages' source when a chunk names none (the chunks file).

    Raises:
        RequestError: a rule is broken (the message names the keys).
        InputError: a chunk without text, text that is not valid Unicode.
        ConfigError: a setting out of range.
    """

    query: str | None = None
    chunks: Any = None
    index: Any = None
    rationales: Any = None
    detail: str = "summary"
    generate_rationales: bool = False
    verify: bool = False
    llm_rerank: bool = False
    rationale_prompt: str | None = None
    num_rationales: int | None = None
    reject: Any = None
    settings: Mapping[str, Any] = field(default_factory=dict)
    source: str | None = None
    #: the checked settings the pipeline runs with (computed)
    config: PipelineConfig = field(init=False, repr=False)
    #: the given rationales, numbered 1..N (computed; empty when none or a strategy was given)
    given_rationales: tuple[Rationale, ...] = field(init=False, repr=False)
    #: the rejection rules, whitespace folded (computed; empty when none were given)
    reject_rules: tuple[str, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        query = _typed("query", self.query, (str,), "a string")
        chunks = _typed("chunks", self.chunks, (list, tuple), "a list of chunks")
        if isinstance(self.index, (bool, int, float, list, dict)):
            raise RequestError(f"'index' must be the name of an index, got {type(self.index).__name__}")
        if _typed("detail", self.detail, (str,), "\"summary\" or \"full\"") not in DETAILS:
            raise RequestError(f"'detail' must be \"summary\" or \"full\", got {self.detail!r}")
        for key in ("generate_rationales", "verify", "llm_rerank"):
            _typed(key, getattr(self, key), (bool,), "true or false")
        if self.rationale_prompt is not None and self.rationale_prompt not in RATIONALE_PROMPTS:
            raise RequestError(f"'rationale_prompt' must be one of {', '.join(RATIONALE_PROMPTS)}, "
                               f"got {self.rationale_prompt!r}")
        num = _typed("num_rationales", self.num_rationales, (int,), "an integer from 1 to 20")
        if num is not None and not 1 <= num <= 20:
            raise RequestError(f"'num_rationales' must be an integer from 1 to 20, got {num}")
        if not isinstance(self.settings, Mapping):
            raise RequestError(f"'settings' must be a mapping of pipeline settings, got {type(self.settings).__name__}")
        if query:
            check_unicode(query, "'query'")
        if chunks is not None and self.index is not None:
            raise RequestError("give 'chunks' or 'index', not both")
        if chunks is not None:
            if not chunks:
                raise RequestError("'chunks' is empty; give at least one chunk")
            document_texts(chunks)  # every chunk has a text, before anything loads
        has_query = bool(query and query.strip())
        if chunks is None and not has_query:
            raise RequestError("a search of the index needs a non-empty 'query' (or give 'chunks')")
        given, strategy = _rationales(self.rationales)
        if not given and not has_query:
            raise RequestError("no rationale and no query; give 'query' or 'rationales'")
        if self.generate_rationales and (given or (strategy and strategy != "llm+auto")):
            raise RequestError("'generate_rationales' writes the rationales itself; drop 'rationales'")
        if (self.rationale_prompt or num) and not self.generate_rationales:
            raise RequestError("'rationale_prompt' and 'num_rationales' shape the generated rationales; "
                               "add 'generate_rationales'")
        settings = dict(self.settings)
        for key in LIMIT_KEYS:
            limit, value = getattr(PipelineConfig(), key), settings.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > limit:
                raise RequestError(f"'{key}' may only lower the limit ({limit}), got {value}")
        verification = settings.get("verification")
        if self.verify and verification not in (None, "llm", "auto"):
            raise RequestError(f"'verify' uses the LLM verifier; it conflicts with 'verification' {verification}")
        if self.verify or verification == "llm":
            object.__setattr__(self, "verify", True)
            settings["verification"] = "llm"
        if strategy:
            settings["rationales"] = strategy
        config = select_config(settings, from_index=chunks is None, chunks=chunks)
        object.__setattr__(self, "settings", settings)
        object.__setattr__(self, "config", config)
        object.__setattr__(self, "given_rationales", given)
        object.__setattr__(self, "reject_rules", self._reject_rules())

    def _reject_rules(self) -> tuple[str, ...]:
        value = self.reject
        if value is None:
            return ()
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, (list, tuple)) or any(not isinstance(r, str) or not r.strip() for r in items):
            raise RequestError("'reject' must be a rule or a list of rules, each a non-empty string")
        if not items:
            return ()
        for rule in items:
            check_unicode(rule, "'reject'")
        if not (self.verify or self.llm_rerank):
            raise RequestError("'reject' rules are applied by the LLM; add 'verify' or 'llm_rerank'")
        return tuple(dict.fromkeys(" ".join(r.split()) for r in items))

    @property
    def uses_index(self) -> bool:
        """Whether the candidates come from an index (no chunks given)."""
        return self.chunks is None

    @property
    def batched(self) -> bool:
        """Whether the LLM verifier judges several chunks per prompt (``verification_batch`` above 1 was given)."""
        batch = self.settings.get("verification_batch")
        return isinstance(batch, int) and batch > 1

    @property
    def needs_llm(self) -> tuple[str, ...]:
        """The request's keys that need the GGUF model."""
        return tuple(k for k in ("generate_rationales", "verify", "llm_rerank") if getattr(self, k))


def json_body(data: Any) -> Mapping[str, Any]:
    """``data`` when it is a JSON object (a request body); else RequestError."""
    if not isinstance(data, Mapping):
        raise RequestError(f"the body must be a JSON object, got {type(data).__name__}")
    return data


def refuse_unknown_keys(data: Mapping[str, Any], allowed: tuple[str, ...], takes: str) -> None:
    """RequestError naming every key of ``data`` outside ``allowed``, then ``takes`` (what the object takes)."""
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise RequestError(f"unknown key(s) {', '.join(map(repr, unknown))}; {takes}")


def request_from_json(data: Any) -> SelectRequest:
    """A request from a parsed JSON body: request keys and pipeline settings side by side.

    Raises:
        RequestError: not an object, an unknown key, or a broken rule.
        InputError, ConfigError: as :class:`SelectRequest`.
    """
    refuse_unknown_keys(json_body(data), (*REQUEST_KEYS, *SETTING_KEYS),
                        f"the request takes {', '.join(REQUEST_KEYS)} and the pipeline settings {', '.join(SETTING_KEYS)}")
    if data.get("index") is not None and not isinstance(data["index"], str):
        raise RequestError(f"'index' must be the name of an index of the server, got {type(data['index']).__name__}")
    parts = {k: data[k] for k in REQUEST_KEYS if k in data and data[k] is not None}
    for key in ("generate_rationales", "verify", "llm_rerank"):
        _typed(key, parts.get(key), (bool,), "true or false")
    return SelectRequest(**parts, settings={k: data[k] for k in SETTING_KEYS if k in data})
