"""Token budgeting: count tokens with the answer model's tokenizer and pack greedily.

Counters: a Hugging Face ``tokenizer.json`` (via ``tokenizers``), a GGUF model's own
vocabulary (via llama-cpp-python, vocabulary only), or — the stated fallback when the
answer model's tokenizer is unknown — whitespace-separated words, where a run longer than
:data:`LONG_WORD` characters (a URL, base64, code, unspaced CJK) counts as a quarter of its
characters, as a BPE tokenizer would roughly cut it.

Packing walks the chunks in priority order and keeps each one that still fits; one that
does not fit is skipped and later, shorter chunks may still fill the gap. A chunk that alone
exceeds the whole budget is dropped (``oversize="drop"``, the default), or cut at a word
boundary to the room left (``oversize="truncate"``).

The budget never empties a context on its own: when every chunk is larger than ``t_max``
(e.g. 200-word chunks, which count ~205 tokens, under ``t_max=200``) the first one is cut to
fit whatever ``oversize`` says, with the outcome :data:`CUT_TO_FIT` so the trace says so.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from ..errors import BundleError, ConfigError, InputError, MissingExtraError, ModelError

__all__ = [
    "TokenCounter",
    "WhitespaceCounter",
    "TokenizerJsonCounter",
    "GgufTokenCounter",
    "load_token_counter",
    "pack",
    "PackDecision",
    "truncate_to_tokens",
    "LONG_WORD",
    "CHARS_PER_TOKEN",
    "CUT_TO_FIT",
]

Oversize = Literal["drop", "truncate"]
_WORD = re.compile(r"\S+")
LONG_WORD = 16  # characters: a longer whitespace-free run is no longer one word
CHARS_PER_TOKEN = 4  # how a long run is counted: ceil(characters / 4) tokens
#: The outcome of the first chunk when no chunk fits the whole budget: it is cut rather than dropped.
CUT_TO_FIT = "truncated: every chunk is larger than the budget; the first was cut to fit"


@runtime_checkable
class TokenCounter(Protocol):
    identity: str

    def count(self, texts: Sequence[str]) -> list[int]: ...


def _whitespace_tokens(text: str) -> int:
    words = text.split()
    long_extra = sum(-(-len(w) // CHARS_PER_TOKEN) - 1 for w in words if len(w) > LONG_WORD)
    return len(words) + long_extra


class WhitespaceCounter:
    """Counts whitespace-separated words: the fallback when no tokenizer is given.

    A word of up to :data:`LONG_WORD` characters is one token; a longer run counts
    ``ceil(len / CHARS_PER_TOKEN)``, so a 5 MB "word" cannot pass as one token.

    Example:
        >>> WhitespaceCounter().count(["Either party may terminate.", "x" * 40])
        [4, 10]
    """

    identity = "whitespace"

    def count(self, texts: Sequence[str]) -> list[int]:
        return [_whitespace_tokens(text) for text in texts]


class TokenizerJsonCounter:
    """Counts tokens with a Hugging Face ``tokenizer.json`` (no special tokens, no truncation)."""

    def __init__(self, path: str | Path) -> None:
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise MissingExtraError("tokenizers", "onnx") from None
        from ..models.onnx_session import check_tokenizer

        try:
            self._tokenizer = Tokenizer.from_file(str(path))
        except Exception as exc:  # tokenizers raises plain Exception subclasses
            raise InputError(f"cannot read tokenizer {path}: {str(exc)[:200]}") from None
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()
        check_tokenizer(self._tokenizer, path, error=InputError)
        self.identity = f"tokenizer.json:{Path(path).name}"

    def count(self, texts: Sequence[str]) -> list[int]:
        from ..models.onnx_session import tokenize_batch

        return [len(e.ids) for e in tokenize_batch(self._tokenizer, list(texts), add_special_tokens=False)]


class GgufTokenCounter:
    """Counts tokens with a GGUF model's vocabulary (loads the vocabulary only)."""

    def __init__(self, path: str | Path) -> None:
        from ..models.llm_model import import_llama_cpp

        llama_cpp = import_llama_cpp()
        path = Path(path)
        if not path.is_file():
            raise InputError(f"GGUF file not found: {path}")
        with open(path, "rb") as handle:
            if handle.read(4) != b"GGUF":
                raise ModelError(f"{path} is not a GGUF file (bad magic bytes)")
        try:
            self._llama = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
        except (ValueError, RuntimeError) as exc:
            raise ModelError(f"cannot load the vocabulary of {path}: {exc}") from None
        self.identity = f"gguf:{path.name}"

    def count(self, texts: Sequence[str]) -> list[int]:
        return [len(self._llama.tokenize(t.encode("utf-8"), add_bos=False, special=False)) for t in texts]


def load_token_counter(spec: str | Path | None) -> TokenCounter:
    """A counter from ``"whitespace"``/``None``, a ``tokenizer.json``, a ``.gguf`` file, or a bundle.

    A bundle folder uses its ``llm`` component's GGUF vocabulary when present, else its
    encoder's ``tokenizer.json``.

    Raises:
        InputError: the path does not exist or is of an unknown kind.
    """
    if spec is None or str(spec) == "whitespace":
        return WhitespaceCounter()
    path = Path(spec)
    if path.is_dir():
        from ..models.bundle import Bundle

        bundle = Bundle.load(path)
        if "llm" in bundle.components:
            return GgufTokenCounter(bundle.file("llm", "model"))
        if "encoder" in bundle.components:
            return TokenizerJsonCounter(bundle.file("encoder", "tokenizer"))
        raise BundleError(f"bundle {path} has neither an llm nor an encoder tokenizer to count tokens with")
    if not path.is_file():
        raise InputError(f"tokenizer not found: {path}; give a tokenizer.json, a .gguf file, a bundle or 'whitespace'")
    if path.suffix == ".gguf":
        return GgufTokenCounter(path)
    if path.suffix == ".json":
        return TokenizerJsonCounter(path)
    raise InputError(f"{path} is neither a tokenizer.json nor a .gguf file")


def truncate_to_tokens(text: str, limit: int, counter: TokenCounter) -> str:
    """The longest word-prefix of ``text`` that counts at most ``limit`` tokens ('' if none)."""
    ends = [m.end() for m in _WORD.finditer(text)]
    lo, hi = 0, len(ends)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if counter.count([text[: ends[mid - 1]]])[0] <= limit:
            lo = mid
        else:
            hi = mid - 1
    return text[: ends[lo - 1]] if lo else ""


def _cut_characters(text: str, limit: int, counter: TokenCounter) -> str:
    """The longest character-prefix of ``text``'s first word that counts at most ``limit`` tokens.

    For a first word that alone is over the budget (a URL, base64, unspaced CJK); searches at most
    ``limit * 32`` characters, more than any tokenizer packs into ``limit`` tokens.
    """
    match = _WORD.search(text)
    if match is None or limit < 1:
        return ""
    word = text[match.start() : min(match.end(), match.start() + limit * 32)]
    lo, hi = 0, len(word)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if counter.count([word[:mid]])[0] <= limit:
            lo = mid
        else:
            hi = mid - 1
    return word[:lo]


@dataclass(frozen=True)
class PackDecision:
    position: int
    tokens: int
    outcome: str  # "kept" | "truncated" | CUT_TO_FIT | "skipped: needs N, M left" | "dropped: larger than the budget"
    text: str

    @property
    def kept(self) -> bool:
        """Whether the chunk (or its cut ``text``) goes into the context."""
        return self.outcome == "kept" or self.outcome.startswith("truncated")


def pack(
    texts: Sequence[str],
    order: Sequence[int],
    t_max: int,
    counter: TokenCounter,
    *,
    oversize: Oversize = "drop",
) -> list[PackDecision]:
    """Greedy packing of ``texts[i]`` for ``i`` in ``order`` into ``t_max`` tokens.

    Returns:
        One decision per position in ``order``; ``outcome`` says kept, truncated, skipped
        (did not fit the room left) or dropped (larger than the whole budget). When nothing
        would be kept because every chunk is larger than ``t_max``, the first is cut to fit
        (at a word boundary, or inside its first word if that alone is too long) with the
        outcome :data:`CUT_TO_FIT`, so a non-empty input never packs into an empty context.

    Example:
        >>> [d.outcome == CUT_TO_FIT for d in pack(["a b c", "d e f"], [1, 0], 2, WhitespaceCounter())]
        [True, False]
    """
    if not isinstance(t_max, int) or isinstance(t_max, bool) or t_max < 1:
        raise ConfigError(f"t_max must be a positive integer, got {t_max!r}")
    if oversize not in ("drop", "truncate"):
        raise ConfigError(f"oversize must be 'drop' or 'truncate', got {oversize!r}")
    counts = counter.count([texts[i] for i in order])
    used = 0
    decisions = []
    for position, tokens in zip(order, counts):
        room, text = t_max - used, texts[position]
        if tokens <= room:
            used += tokens
            decisions.append(PackDecision(position, tokens, "kept", text))
        elif tokens <= t_max:
            decisions.append(PackDecision(position, tokens, f"skipped: needs {tokens}, {room} left", text))
        else:  # larger than the whole budget: cut to the room left (it counts at most that), or drop
            cut = truncate_to_tokens(text, room, counter) if oversize == "truncate" else ""
            if cut:
                cut_tokens = counter.count([cut])[0]
                used += cut_tokens
                decisions.append(PackDecision(position, cut_tokens, "truncated", cut))
            else:
                decisions.append(PackDecision(position, tokens, "dropped: larger than the budget", text))
    if decisions and not any(d.kept for d in decisions):
        decisions[0] = _cut_first(decisions[0], t_max, counter)
    return decisions


def _cut_first(first: PackDecision, t_max: int, counter: TokenCounter) -> PackDecision:
    """``first`` (larger than ``t_max``, as every chunk was) cut to fit, or unchanged if no piece fits."""
    cut = truncate_to_tokens(first.text, t_max, counter) or _cut_characters(first.text, t_max, counter)
    if not cut:
        return first
    return PackDecision(first.position, counter.count([cut])[0], CUT_TO_FIT, cut)
