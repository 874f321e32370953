"""One local GGUF language model, loaded once and shared by the generator and the verifier.

:class:`LocalLLM` wraps a ``llama_cpp.Llama`` (extra ``llm``, imported only inside
:meth:`LocalLLM.load`). It renders chat messages with the GGUF's own chat template (or a
plain layout for base models), tokenises trusted scaffolding and untrusted content apart
(a passage that contains ``<|im_end|>`` stays text), and runs completions under a lock, so
one instance may serve both roles from several threads.

Prompts are passed as token lists. llama-cpp-python keeps the evaluated tokens of the last
call and re-evaluates only what differs, so callers that keep a long prompt prefix
identical (the verifier: instructions, query, rationales) pay for it once per query
(``reuse_prefix=False`` turns this off, for measurements).

:meth:`LocalLLM.load` first makes sure llama.cpp has a CPU backend (a runtime-dispatch build
loads the best one for this CPU: :func:`~meteora_edge.models.llm_backend.cpu_backend`).

Example:
    >>> llm = LocalLLM.load("SmolLM2-135M-Instruct.Q4_1.gguf", threads=1)   # doctest: +SKIP
    >>> tokens = llm.chat_tokens([ChatMessage("user", ("Say hi.",))])      # doctest: +SKIP
    >>> llm.complete(tokens, max_tokens=8).text                             # doctest: +SKIP
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .bundle import Bundle
from ..errors import ConfigError, MissingExtraError, ModelError
from .llm_backend import cpu_backend, import_llama_cpp, llama_verbose, set_llama_verbose
from .llm_file import check_gguf_complete, context_length, kv_cache_bytes

__all__ = [
    "LocalLLM", "ChatMessage", "Completion", "CHAT_FORMATS", "DEFAULT_CONTEXT_SIZE", "as_local_llm",
    "import_llama_cpp", "set_llama_verbose",
]

logger = logging.getLogger(__name__)

DEFAULT_CONTEXT_SIZE = 4096
CHAT_FORMATS = ("gguf", "chatml", "plain")
_CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
_MARK = "\x1eMETEORA{}\x1e"
_MARK_RE = re.compile("\x1eMETEORA(\\d+)\x1e")


@dataclass(frozen=True)
class ChatMessage:
    """One chat turn; ``parts`` are concatenated, each tokenised on its own so that a
    caller can keep a prefix of parts token-identical across calls."""

    role: str
    parts: tuple[str, ...]


@dataclass(frozen=True)
class Completion:
    """What one completion produced and cost."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    reused_tokens: int
    finish_reason: str
    seconds: float


def _positive(name: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")
    return value


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _available_memory() -> int | None:
    """Bytes this process may still use: MemAvailable, lowered by a cgroup limit; None if unknown."""
    found: list[int] = []
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError):
        pass
    try:
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as limit, \
                open("/sys/fs/cgroup/memory.current", encoding="ascii") as used:
            text = limit.read().strip()
            if text != "max":
                found.append(max(0, int(text) - int(used.read().strip())))
    except (OSError, ValueError):
        pass
    return min(found) if found else None


def _check_context(context_size: int, metadata: dict[str, Any]) -> None:
    """Refuse a context the model was not trained for, or whose KV cache cannot fit in memory."""
    trained = context_length(metadata)
    if trained is not None and context_size > trained:
        raise ConfigError(
            f"context size {context_size} exceeds the {trained} tokens the model was trained for; ask for at most "
            f"{trained} (--context-size, or context_size in the bundle's llm settings)"
        )
    need, free = kv_cache_bytes(metadata, context_size), _available_memory()
    if need is not None and free is not None and need > free:
        raise ConfigError(
            f"context size {context_size} needs about {need / 2**30:.1f} GiB of KV cache but only "
            f"{free / 2**30:.1f} GiB of memory is free; lower --context-size"
        )


class LocalLLM:
    """A loaded GGUF model (or any object with llama-cpp-python's ``Llama`` methods).

    Args:
        llama: a ``llama_cpp.Llama`` or a stand-in with ``tokenize``, ``detokenize``,
            ``create_completion``, ``reset``, ``n_ctx``, ``token_bos``, ``token_eos`` and
            ``metadata``.
        source: where the model came from, for messages and traces.
        chat_format: ``None`` (the GGUF's template, else plain), ``"gguf"``, ``"chatml"``
            or ``"plain"``.
        seed: sampling seed (only matters with a temperature above 0).

    Raises:
        ConfigError: an unknown ``chat_format``, or ``"gguf"`` for a model without a template.
    """

    def __init__(self, llama: Any, *, source: str = "", chat_format: str | None = None, seed: int = 0) -> None:
        self._llama = llama
        self.source = source
        self.seed = seed
        self._lock = threading.RLock()
        self._last_prompt: list[int] = []
        metadata = getattr(llama, "metadata", None) or {}
        template = metadata.get("tokenizer.chat_template")
        self.gguf_template: str | None = template if isinstance(template, str) and template.strip() else None
        self.chat_format = self._resolve_format(chat_format)
        self.context_size = int(llama.n_ctx())
        self._formatter: Any = None

    @property
    def llama(self) -> Any:
        """The wrapped ``llama_cpp.Llama`` (or stand-in), e.g. for a second context on its weights."""
        return self._llama

    def _resolve_format(self, chat_format: str | None) -> str:
        if chat_format is None:
            return "gguf" if self.gguf_template else "plain"
        if chat_format not in CHAT_FORMATS:
            raise ConfigError(f"chat_format must be one of {', '.join(CHAT_FORMATS)} or None, got {chat_format!r}")
        if chat_format == "gguf" and not self.gguf_template:
            raise ConfigError(f"{self.source or 'the model'} has no chat template in its GGUF; use chat_format='plain' or 'chatml'")
        return chat_format

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        *,
        threads: int = 1,
        context_size: int = DEFAULT_CONTEXT_SIZE,
        seed: int = 0,
        chat_format: str | None = None,
        batch_size: int = 512,
    ) -> LocalLLM:
        """Load a GGUF file with llama.cpp (CPU only, quiet).

        Args:
            path: the ``.gguf`` file.
            threads: CPU threads for prompt and generation (1 is the safe default on shared cores).
            context_size: tokens of context (prompt plus answer).
            seed: sampling seed.
            chat_format: see :class:`LocalLLM`.
            batch_size: prompt tokens evaluated per batch.

        Raises:
            MissingExtraError: llama-cpp-python is not installed.
            ModelError: the file is missing, not GGUF, truncated or of an unsupported architecture.
            ConfigError: a non-positive option, or a context larger than the model was trained
                for or than the machine's free memory can hold.
        """
        _positive("threads", threads)
        _positive("context_size", context_size)
        _positive("batch_size", batch_size)
        layout = check_gguf_complete(path)
        _check_context(context_size, layout.metadata)
        p = Path(path)
        Llama = import_llama_cpp().Llama
        cpu_backend()
        started = time.perf_counter()
        try:
            llama = Llama(
                str(p),
                n_ctx=context_size,
                n_batch=min(batch_size, context_size),
                n_threads=threads,
                n_threads_batch=threads,
                seed=seed,
                n_gpu_layers=0,
                verbose=llama_verbose(),
            )
        except (ValueError, RuntimeError, OSError) as exc:
            raise ModelError(
                f"llama.cpp could not load {p} ({exc}); the file may be truncated, corrupt or of an "
                "architecture this llama-cpp-python does not know; re-copy or re-convert it"
            ) from None
        logger.info("loaded %s in %.2fs (context %d, %d thread(s))", p, time.perf_counter() - started, context_size, threads)
        return cls(llama, source=str(p), chat_format=chat_format, seed=seed)

    @classmethod
    def from_bundle(
        cls,
        bundle_dir: str | os.PathLike[str] | Bundle,
        *,
        threads: int = 1,
        context_size: int | None = None,
        seed: int = 0,
        chat_format: str | None = None,
    ) -> LocalLLM:
        """Load the ``llm`` component of a bundle (its hash and size are checked first).

        ``context_size`` and ``chat_format`` default to the component's settings.

        Raises:
            BundleError: no bundle, no ``llm`` component, or a file that fails its check.
            ModelError, MissingExtraError, ConfigError: as :meth:`load`.
        """
        bundle = bundle_dir if isinstance(bundle_dir, Bundle) else Bundle.load(bundle_dir)
        settings = bundle.component("llm").settings
        path = bundle.file("llm", "model")
        if context_size is None:
            recorded = settings.get("context_size")
            context_size = recorded if isinstance(recorded, int) and recorded > 0 else DEFAULT_CONTEXT_SIZE
        if chat_format is None and settings.get("chat_format") in CHAT_FORMATS:
            chat_format = settings["chat_format"]
        return cls.load(path, threads=threads, context_size=context_size, seed=seed, chat_format=chat_format)

    # -- prompts -------------------------------------------------------------------------

    def _special_text(self, token_id: int) -> str:
        if token_id is None or token_id < 0:
            return ""
        return self._llama.detokenize([token_id], special=True).decode("utf-8", errors="replace")

    def _render(self, messages: list[dict[str, str]]) -> str:
        if self._formatter is None:
            try:
                from llama_cpp.llama_chat_format import Jinja2ChatFormatter
            except ImportError:
                raise MissingExtraError("llama_cpp", "llm") from None
            self._formatter = Jinja2ChatFormatter(
                template=_CHATML if self.chat_format == "chatml" else self.gguf_template,
                bos_token=self._special_text(self._llama.token_bos()),
                eos_token=self._special_text(self._llama.token_eos()),
                add_generation_prompt=True,
            )
        return str(self._formatter(messages=messages).prompt)

    def render_segments(self, messages: Sequence[ChatMessage]) -> list[tuple[str, bool]]:
        """The prompt as ``(text, is_content)`` pieces: template scaffolding and message parts.

        Raises:
            ModelError: the model's chat template cannot render these messages.
        """
        parts = [p for m in messages for p in m.parts]
        if self.chat_format == "plain":
            pieces: list[tuple[str, bool]] = []
            for number, message in enumerate(messages):
                if number:
                    pieces.append(("\n\n", False))
                pieces += [(p, True) for p in message.parts]
            return [p for p in pieces if p[0]]
        marked, counter = [], 0
        for message in messages:
            marks = "".join(_MARK.format(counter + i) for i in range(len(message.parts)))
            counter += len(message.parts)
            marked.append({"role": message.role, "content": marks})
        try:
            rendered = self._render(marked)
        except Exception as first:  # templates raise freely (e.g. "system role not supported")
            if marked and marked[0]["role"] == "system" and len(marked) > 1:
                merged = [{"role": marked[1]["role"], "content": marked[0]["content"] + marked[1]["content"]}] + marked[2:]
                try:
                    rendered = self._render(merged)
                except Exception:
                    raise ModelError(f"the chat template of {self.source or 'the model'} failed: {first}; use chat_format='plain'") from None
            else:
                raise ModelError(f"the chat template of {self.source or 'the model'} failed: {first}; use chat_format='plain'") from None
        pieces, pos = [], 0
        for match in _MARK_RE.finditer(rendered):
            pieces.append((rendered[pos : match.start()], False))
            pieces.append((parts[int(match.group(1))], True))
            pos = match.end()
        pieces.append((rendered[pos:], False))
        return [p for p in pieces if p[0]]

    def tokenize(self, text: str, *, special: bool = False, add_bos: bool = False) -> list[int]:
        """Token ids of ``text``; ``special`` parses control tokens such as ``<|im_end|>``."""
        with self._lock:
            return list(self._llama.tokenize(text.encode("utf-8"), add_bos=add_bos, special=special))

    def chat_tokens(self, messages: Sequence[ChatMessage]) -> list[int]:
        """Render ``messages`` and tokenise each piece on its own.

        Scaffolding may hold control tokens; message parts never do. In the plain layout the
        first piece gets the model's BOS token when its vocabulary asks for one.
        """
        tokens: list[int] = []
        for number, (text, is_content) in enumerate(self.render_segments(messages)):
            add_bos = number == 0 and self.chat_format == "plain"
            tokens += self.tokenize(text, special=not is_content, add_bos=add_bos)
        return tokens

    # -- running -------------------------------------------------------------------------

    def complete(
        self,
        tokens: Sequence[int],
        *,
        max_tokens: int,
        stop: Sequence[str] = (),
        grammar: Any = None,
        temperature: float = 0.0,
        top_p: float | None = None,
        reuse_prefix: bool = True,
    ) -> Completion:
        """Continue ``tokens``; at most ``max_tokens`` new tokens, never past the context.

        Args:
            tokens: the prompt as token ids.
            max_tokens: the answer budget; the prompt plus this must fit the context.
            stop: strings that end the answer (not included in it).
            grammar: a ``llama_cpp.LlamaGrammar`` constraining the answer.
            temperature: 0 is greedy (deterministic).
            top_p: nucleus sampling cut-off when sampling (``None``: no cut-off).
            reuse_prefix: keep the evaluated prefix shared with the previous call.

        Raises:
            ModelError: the prompt plus ``max_tokens`` exceeds the context, or llama.cpp failed.
        """
        _positive("max_tokens", max_tokens)
        if len(tokens) + max_tokens > self.context_size:
            raise ModelError(
                f"prompt of {len(tokens)} tokens plus {max_tokens} answer tokens exceeds the model context of "
                f"{self.context_size} tokens; raise the context size (context_size= / --context-size) or shorten the input"
            )
        with self._lock:
            if not reuse_prefix:
                self._llama.reset()
                self._last_prompt = []
            reused = max(0, min(_common_prefix(self._last_prompt, tokens), len(tokens) - 1))
            started = time.perf_counter()
            try:
                out = self._llama.create_completion(
                    list(tokens),
                    max_tokens=max_tokens,
                    temperature=temperature,
                    top_p=1.0 if top_p is None else top_p,
                    stop=list(stop),
                    grammar=grammar,
                    seed=self.seed,
                    repeat_penalty=1.0,
                )
            except (ValueError, RuntimeError, OSError) as exc:
                self._llama.reset()
                self._last_prompt = []
                raise ModelError(f"the language model failed on a {len(tokens)}-token prompt: {exc}") from None
            self._last_prompt = list(tokens)
        choice = out["choices"][0]
        usage = out.get("usage") or {}
        return Completion(
            text=choice.get("text") or "",
            prompt_tokens=int(usage.get("prompt_tokens", len(tokens))),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            reused_tokens=reused if reuse_prefix else 0,
            finish_reason=str(choice.get("finish_reason") or ""),
            seconds=time.perf_counter() - started,
        )

    def next_token_logprobs(self, tokens: Sequence[int], token_ids: Sequence[int]) -> list[float]:
        """Log-probabilities of ``token_ids`` as the token that follows ``tokens``.

        One forward pass over the tokens not shared with the previous call (the same prefix
        reuse as :meth:`complete`); nothing is generated.

        Raises:
            ModelError: the prompt does not fit the context, or llama.cpp failed.
        """
        captured: list[Any] = []

        def capture(_ids: Any, logits: Any) -> Any:
            if not captured:
                captured.append(np.array(logits, dtype=np.float64, copy=True))
            return logits

        if len(tokens) + 1 > self.context_size:
            raise ModelError(f"prompt of {len(tokens)} tokens exceeds the model context of {self.context_size} tokens; "
                             "raise the context size (context_size= / --context-size) or shorten the input")
        with self._lock:
            try:
                self._llama.create_completion(list(tokens), max_tokens=1, temperature=0.0, seed=self.seed,
                                              repeat_penalty=1.0, logits_processor=[capture])
            except (ValueError, RuntimeError, OSError) as exc:
                self._llama.reset()
                self._last_prompt = []
                raise ModelError(f"the language model failed on a {len(tokens)}-token prompt: {exc}") from None
            self._last_prompt = list(tokens)
        if not captured:
            raise ModelError("the language model returned no logits")
        logits = captured[0]
        top = float(logits.max())
        log_total = top + float(np.log(np.exp(logits - top).sum()))
        return [float(logits[t]) - log_total for t in token_ids]

    def __repr__(self) -> str:
        return f"LocalLLM(source={self.source!r}, chat_format={self.chat_format!r}, context_size={self.context_size})"


def as_local_llm(
    model: LocalLLM | str | os.PathLike[str],
    *,
    threads: int,
    context_size: int,
    seed: int,
    chat_format: str | None,
) -> LocalLLM:
    """A :class:`LocalLLM` from a loaded model (returned as is) or a GGUF path (loaded)."""
    if isinstance(model, LocalLLM):
        return model
    if isinstance(model, (str, os.PathLike)):
        return LocalLLM.load(Path(model), threads=threads, context_size=context_size, seed=seed, chat_format=chat_format)
    raise ConfigError(f"model must be a LocalLLM or the path of a .gguf file, got {type(model).__name__}")
