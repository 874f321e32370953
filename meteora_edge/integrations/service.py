"""Models loaded once, many selections: what ``meteora-edge serve`` answers over HTTP and stdio.

:class:`SelectService` holds the encoder, the optional cross-encoder and GGUF roles, the
answer model's tokenizer and the indexes the server was started with, and turns one
``/v1/select`` body into the ``select`` command's JSON object. It is safe to call from many
threads: a pipeline is built per request over the shared models (onnxruntime sessions run
concurrently; the GGUF model serialises its calls with its own lock).

Example:
    >>> service = SelectService.load()
    >>> data = service.select(b'{"query": "who may terminate?", "chunks": ["Either party may terminate."]}')
    >>> data["format"], data["passages"][0]["text"]
    ('meteora-edge.selection', 'Either party may terminate.')
"""

from __future__ import annotations

import json
import logging
import os
import platform
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from importlib import metadata
from pathlib import Path
from typing import Any

from ..errors import Cancelled, ConfigError, InputError, LocalIndexError, MeteoraError
from ..fileio import escape_line_separators
from ..index.corpus_index import CorpusIndex, open_index
from ..models.encoders import EncoderLike, encoder_id
from ..pipeline.budget import TokenCounter
from ..pipeline.ladder import CrossEncoder
from ..pipeline.request import SelectRequest
from ..pipeline.runtime import SelectRuntime, load_bundle
from .select_request import parse_select_request

__all__ = ["SelectService", "IndexSlot", "index_names", "error_status", "one_line", "json_line"]

logger = logging.getLogger(__name__)

_VERSIONED = ("numpy", "onnxruntime", "tokenizers", "llama-cpp-python", "starlette", "uvicorn")
_NO_LLM = "this server has no GGUF model; start it with --llm and a bundle that holds one"


def one_line(exc: BaseException) -> str:
    """An exception as the one line a client sees."""
    return " ".join(str(exc).split()) or type(exc).__name__


def json_line(data: Any) -> bytes:
    """One JSON object as a UTF-8 line (text that cannot be UTF-8, a lone surrogate, is escaped, and so
    are U+2028/U+2029: see :func:`~meteora_edge.fileio.escape_line_separators`)."""
    text = escape_line_separators(json.dumps(data, ensure_ascii=False))
    try:
        return (text + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(data) + "\n").encode("ascii")


def error_status(exc: BaseException) -> int:
    """The HTTP status for an error: 400 for the caller's mistakes, 504 for work stopped at its deadline,
    503 for memory, a request that waited past its deadline or a server that is stopping, else 500."""
    if isinstance(exc, (InputError, ConfigError)):
        return 400
    if isinstance(exc, Cancelled):
        return 504 if exc.reason == "deadline" else 503
    if isinstance(exc, MemoryError):
        return 503
    return 500


def index_names(paths: Sequence[str]) -> dict[str, str]:
    """Name each index folder after its last path part (``models/demo.index`` → ``demo.index``).

    Raises:
        InputError: two folders share a name.
    """
    from ..index.milvus_location import is_milvus_url, parse_milvus_url

    names: dict[str, str] = {}
    for path in paths:
        name = parse_milvus_url(path).collection if is_milvus_url(path) else (Path(path).name or str(path))
        if name in names:
            raise InputError(f"two --index folders are named {name!r} ({names[name]} and {path}); "
                             "requests name an index by its folder name, so rename one")
        names[name] = path
    return names


def _recorded_encoder(spec: str) -> str:
    """The encoder identity an index was built with (a local index is not hash-checked for this)."""
    from ..index.local_index import LocalIndex
    from ..index.milvus_location import is_milvus_url

    return open_index(spec).encoder_id if is_milvus_url(spec) else LocalIndex.load(spec, verify=False).encoder_id


class IndexSlot:
    """One index the server serves; a local one is reopened when a writer publishes a new version.

    Every request stats a local index's pointer file (``manifest.json``, replaced atomically by
    ``index build``/``index add``); when it changed, the new version is loaded and checked once
    and later requests use it. Requests already running keep the version they started with. A
    Milvus collection (``milvus://…``) is always the server's current one.
    """

    def __init__(self, name: str, path: str, encoder: EncoderLike) -> None:
        from ..index.milvus_location import is_milvus_url

        self.name, self.path, self._encoder = name, path, encoder
        self._local = not is_milvus_url(path)
        self._lock = threading.Lock()
        self._stamp = self._pointer_stamp()
        self._index: CorpusIndex = open_index(path, encoder=encoder)
        self._info: dict[str, Any] | None = None

    def _pointer_stamp(self) -> tuple[int, int, int] | None:
        if not self._local:
            return None
        try:
            st = os.stat(Path(self.path) / "manifest.json")
        except OSError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size

    def current(self) -> CorpusIndex:
        """The newest version of the index (the one already open when it cannot be reopened)."""
        stamp = self._pointer_stamp()
        if stamp is None or stamp == self._stamp:
            return self._index
        with self._lock:
            if stamp != self._stamp:
                self._stamp = stamp  # one attempt per published version, not one per request
                try:
                    self._index, self._info = open_index(self.path, encoder=self._encoder), None
                    logger.info("index %s: reopened generation %s", self.name, getattr(self._index, "generation", None))
                except LocalIndexError as exc:
                    logger.warning("index %s changed but cannot be reopened (%s); serving the open version",
                                   self.name, one_line(exc))
            return self._index

    def info(self) -> dict[str, Any]:
        """``index info`` of the current version, with the index's ``name`` (computed once per version)."""
        index = self.current()
        with self._lock:
            if self._info is None or self._info.get("generation") != getattr(index, "generation", None):
                self._info = {"name": self.name, **index.info()}
            return self._info


class SelectService:
    """The models and indexes of one server, and the select call over them: a
    :class:`~meteora_edge.pipeline.runtime.SelectRuntime` with the server's indexes.

    Args:
        encoder: embeds queries and chunks (the indexes' encoder).
        cross_encoder: the ladder's cross-encoder rung, or None.
        generator: the GGUF rationale generator (requests with ``generate_rationales``), or None.
        verifier: the GGUF verifier (requests with ``verify``), or None.
        token_counter: the answer model's tokenizer (default: whitespace words).
        indexes: the indexes requests may name; the first is the default.
        bundle: the bundle folder the models came from (reported by :meth:`health`).
        runtime: a runtime to serve instead of one built from the models above.
    """

    def __init__(
        self,
        *,
        encoder: EncoderLike | None = None,
        cross_encoder: CrossEncoder | None = None,
        generator: Any | None = None,
        verifier: Any | None = None,
        token_counter: TokenCounter | None = None,
        indexes: Sequence[IndexSlot] = (),
        bundle: str | None = None,
        runtime: SelectRuntime | None = None,
    ) -> None:
        self.runtime = runtime or SelectRuntime(
            encoder=encoder, cross_encoder=cross_encoder, generator=generator, verifier=verifier,
            token_counter=token_counter, no_llm=_NO_LLM)
        self.indexes = {slot.name: slot for slot in indexes}
        self._paths = {slot.path: slot for slot in indexes}
        self.bundle = bundle

    encoder = property(lambda self: self.runtime.encoder)
    cross_encoder = property(lambda self: self.runtime.cross_encoder)
    token_counter = property(lambda self: self.runtime.token_counter)

    @classmethod
    def load(
        cls,
        *,
        bundle: str | None = None,
        indexes: Sequence[str] = (),
        tokenizer: str | None = None,
        threads: int = 1,
        precision: str = "auto",
        llm: bool = False,
        llm_threads: int = 1,
        context_size: int | None = None,
        num_rationales: int = 3,
        sample_shots: Sequence[Any] | None = None,
        domain: str | None = None,
        cache: bool | None = None,
    ) -> SelectService:
        """Check every input, then load the models once, cheapest first (as ``select`` does).

        Args:
            bundle: model bundle folder (None: the hashing encoder, no cross-encoder, no GGUF).
            indexes: index folders requests may name (by folder name); the first is the default.
            tokenizer: the answer model's tokenizer for the budget (see :func:`load_token_counter`).
            threads, precision: the ONNX encoder's and cross-encoder's settings (``precision="auto"``
                with indexes runs the variant the first index was built with).
            llm: load the bundle's GGUF model for ``generate_rationales``, ``verify`` and ``llm_rerank``.
            llm_threads, context_size, num_rationales, sample_shots, domain: the GGUF roles' settings.
            cache: the embedding cache (see :meth:`OnnxEncoder.from_bundle`): None only when
                ``METEORA_EDGE_CACHE`` asks for it; ``serve`` passes True unless ``--no-cache``.

        Raises:
            InputError: an index name twice, or ``llm`` without a GGUF model in the bundle.
            BundleError, LocalIndexError, ModelError, MissingExtraError: a model or index cannot be loaded,
                or an index was built by another encoder.
        """
        names = index_names(indexes)
        loaded = load_bundle(bundle)
        recorded = _recorded_encoder(next(iter(names.values()))) if names else None
        runtime = SelectRuntime.load(
            loaded, tokenizer=tokenizer, threads=threads, precision=precision, cache=cache, index_encoder=recorded,
            llm=llm, llm_threads=llm_threads, context_size=context_size, num_rationales=num_rationales,
            sample_shots=sample_shots, domain=domain, no_llm=_NO_LLM)
        slots = [IndexSlot(name, path, runtime.encoder) for name, path in names.items()]
        return cls(indexes=slots, bundle=bundle, runtime=runtime)

    def slot(self, name: str | None) -> IndexSlot:
        """The index a request names (by folder name or by the path the server was given); None: the first.

        Raises:
            InputError: the server has no index, or none of that name.
        """
        if not self.indexes:
            raise InputError("this server has no index; send 'chunks', or start it with --index DIR")
        if name is None:
            return next(iter(self.indexes.values()))
        found = self.indexes.get(name) or self._paths.get(name)
        if found is None:
            raise InputError(f"no index named {name!r} on this server; it has {', '.join(map(repr, self.indexes))}")
        return found

    def select(self, body: bytes | str | Mapping[str, Any], *, check: Callable[[], None] | None = None
               ) -> dict[str, Any]:
        """Answer one ``/v1/select`` body with ``select``'s JSON object.

        Args:
            body: the request (see :func:`parse_select_request`).
            check: called between the pipeline's phases and batches (a
                :class:`~meteora_edge.pipeline.deadline.Deadline`); what it raises stops the work.

        Raises:
            InputError, ConfigError: a bad request (see :func:`parse_select_request`).
            ModelError, LocalIndexError: a model or the index failed while running.
            Cancelled: ``check`` stopped it (its deadline passed, or the server is stopping).
        """
        return self.run(parse_select_request(body), check=check)

    def run(self, request: SelectRequest, *, check: Callable[[], None] | None = None) -> dict[str, Any]:
        """Run a checked request through the runtime and return the JSON object."""
        self.runtime.roles(request)  # a role without the GGUF model is refused before the index is looked up
        if request.uses_index:
            request = replace(request, index=self.slot(request.index).current())
        return self.runtime.run(request, check=check)

    def index_info(self, name: str | None = None) -> dict[str, Any]:
        """``index info`` of one served index (the first when ``name`` is None), with its ``name``.

        Raises:
            InputError: no index of that name.
        """
        return self.slot(name).info()

    def health(self) -> dict[str, Any]:
        """Versions, the bundle's identity, the loaded models and the served indexes."""
        versions = {"python": platform.python_version()}
        for package in ("meteora-edge", *_VERSIONED):
            try:
                versions[package] = metadata.version(package)
            except metadata.PackageNotFoundError:
                continue
        return {
            "status": "ok",
            "versions": versions,
            "bundle": _bundle_identity(self.bundle),
            "models": {
                "encoder": encoder_id(self.encoder),
                "cross_encoder": getattr(self.cross_encoder, "identity", None),
                "llm": _llm_identity(self.runtime.model),
                "tokenizer": self.token_counter.identity,
            },
            "indexes": [{"name": s.name, "path": s.path, "generation": s.current().generation,
                         "chunks": len(s.current())} for s in self.indexes.values()],
        }


def _bundle_identity(bundle: str | None) -> dict[str, Any] | None:
    """Path and, per component, kind, source and the first 12 hex digits of each file's sha256."""
    if bundle is None:
        return None
    from ..models.bundle import Bundle

    try:
        loaded = Bundle.load(bundle)
    except MeteoraError as exc:
        return {"path": bundle, "error": one_line(exc)}
    return {"path": bundle, "components": {
        name: {"kind": c.kind, "source": c.source, "files": {role: f.sha256[:12] for role, f in c.files.items()}}
        for name, c in loaded.components.items()
    }}


def _llm_identity(model: Any) -> dict[str, Any] | None:
    if model is None:
        return None
    return {"source": model.source, "chat_format": model.chat_format, "context_size": model.context_size}
