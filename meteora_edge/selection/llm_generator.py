"""METEORA's rationale generator on a local GGUF model.

A few-shot prompt (sample shots are required: each a query and its rationales) asks for
exactly N rationales in the tagged form
``<rationale_i>[Label] what to look for Flag Instructions: when to reject</rationale_i>``.
Generation stops after ``</rationale_N>``, at ``<rationale_{N+1}>`` or when the model
starts a new query; the text is read with the core :func:`parse_rationales`.

Example:
    >>> gen = LlamaRationaleGenerator("SmolLM2-135M-Instruct.Q4_1.gguf",
    ...                               sample_shots=load_sample_shots())          # doctest: +SKIP
    >>> reranker = MeteoraReranker(HashingEncoder(), rationale_generator=gen)  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ConfigError, InputError
from ..models.llm_model import DEFAULT_CONTEXT_SIZE, ChatMessage, Completion, LocalLLM, as_local_llm
from .rationales import Rationale, as_rationales, format_rationales, parse_rationales

__all__ = ["LlamaRationaleGenerator", "SampleShot", "load_sample_shots", "stop_sequences"]

logger = logging.getLogger(__name__)

SampleShot = Mapping[str, Any]
_SYSTEM = (
    "You write search rationales for a retrieval system{domain}. Given a query, write exactly {n} "
    "rationale(s), one per line, each as <rationale_i>[Label] the evidence to look for{flag}</rationale_i>, "
    "numbered from 1. Write nothing else."
)
_FLAG = " Flag Instructions: when a passage must be rejected"
_CHAT_STOPS = ("<|im_end|>", "<|im_start|>", "<|endoftext|>", "<|eot_id|>", "<end_of_turn>", "</s>")


def load_sample_shots(path: str | os.PathLike[str] | None = None, *, shipped: str = "data/rationale_shots.json") -> list[dict[str, Any]]:
    """Read sample shots from a JSON file (a list, or ``{"shots": [...]}``); the shipped defaults when ``path`` is None.

    Args:
        path: a shots file, or None for the shipped file ``shipped`` (a path inside the package).

    Raises:
        InputError: the file is missing, malformed or holds no shots.
    """
    from ..fileio import read_json_source

    data, where = read_json_source(path, shipped=shipped, what="sample shots")
    shots = data.get("shots") if isinstance(data, dict) else data
    if not isinstance(shots, list):
        raise InputError(f"{where} must hold a list of shots or {{\"shots\": [...]}}")
    return shots


def _check_shots(shots: object) -> list[tuple[str, list[Rationale]]]:
    if not isinstance(shots, Sequence) or isinstance(shots, (str, bytes)) or not shots:
        raise ConfigError("sample_shots is required: give a non-empty list of {'query': …, 'rationales': …} (see load_sample_shots())")
    checked = []
    for position, shot in enumerate(shots):
        if not isinstance(shot, Mapping) or not isinstance(shot.get("query"), str) or not shot["query"].strip():
            raise ConfigError(f"sample shot {position} needs a non-empty string 'query'")
        rationales = as_rationales(shot.get("rationales", []))
        if not rationales:
            raise ConfigError(f"sample shot {position} needs at least one rationale")
        checked.append((" ".join(shot["query"].split()), rationales))
    return checked


def stop_sequences(num_rationales: int) -> list[str]:
    """Where generation of ``num_rationales`` rationales ends: after the last closing tag,
    at the next opening tag, at a new query, or at a chat turn marker."""
    n = num_rationales
    return [f"</rationale_{n}>", f"<rationale_{n + 1}>", "\nQuery:", *_CHAT_STOPS]


class LlamaRationaleGenerator:
    """Write rationales for a query with a local GGUF model.

    Usable as ``MeteoraReranker(rationale_generator=…)`` (it is callable and has ``.generate``).

    Args:
        model: a :class:`LocalLLM` (shared with a verifier) or the path of a ``.gguf`` file.
        sample_shots: examples, each ``{"query": str, "rationales": text | list}``; required
            (:func:`load_sample_shots` gives the shipped ones).
        domain: optional subject named in the prompt (e.g. ``"contract law"``).
        num_rationales: how many rationales to ask for (the result has at most this many).
        include_flag_instructions: ask for (and show) ``Flag Instructions``.
        max_new_tokens: answer budget; default ``tokens_per_rationale * num_rationales + 16``
            (80 per rationale here).
        temperature: 0 is greedy (deterministic).
        seed, threads, context_size, chat_format: used when ``model`` is a path.

    Raises:
        ConfigError: missing or malformed shots, an option out of range.
    """

    #: the system instructions (``{domain}``, ``{n}`` and ``{flag}`` are filled in); subclasses
    #: such as :class:`~meteora_edge.selection.llm_hops.HopRationaleGenerator` change them.
    system_template = _SYSTEM
    flag_template = _FLAG
    tokens_per_rationale = 80

    def __init__(
        self,
        model: LocalLLM | str | os.PathLike[str],
        *,
        sample_shots: Sequence[SampleShot],
        domain: str | None = None,
        num_rationales: int = 3,
        include_flag_instructions: bool = True,
        max_new_tokens: int | None = None,
        temperature: float = 0.0,
        seed: int = 0,
        threads: int = 1,
        context_size: int = DEFAULT_CONTEXT_SIZE,
        chat_format: str | None = None,
    ) -> None:
        if not isinstance(num_rationales, int) or isinstance(num_rationales, bool) or not 1 <= num_rationales <= 20:
            raise ConfigError(f"num_rationales must be an integer in 1..20, got {num_rationales!r}")
        if max_new_tokens is not None and (not isinstance(max_new_tokens, int) or max_new_tokens < 1):
            raise ConfigError(f"max_new_tokens must be a positive integer or None, got {max_new_tokens!r}")
        if not isinstance(temperature, (int, float)) or not 0.0 <= temperature <= 2.0:
            raise ConfigError(f"temperature must be in 0..2, got {temperature!r}")
        self.shots = _check_shots(sample_shots)
        self.domain = domain
        self.num_rationales = num_rationales
        self.include_flag_instructions = include_flag_instructions
        self.max_new_tokens = max_new_tokens or self.tokens_per_rationale * num_rationales + 16
        self.temperature = float(temperature)
        self.model = as_local_llm(model, threads=threads, context_size=context_size, seed=seed, chat_format=chat_format)
        self.last_completion: Completion | None = None
        self.last_text = ""

    def _shot_answer(self, rationales: list[Rationale]) -> str:
        kept = rationales[: self.num_rationales]
        return format_rationales(
            [
                Rationale(r.text, i, r.label, r.flag_instructions if self.include_flag_instructions else None)
                for i, r in enumerate(kept, start=1)
            ]
        )

    def messages(self, query: str) -> list[ChatMessage]:
        """The few-shot chat: instructions, each shot as a user/assistant pair, then the query."""
        system = self.system_template.format(
            domain=f" in {self.domain}" if self.domain else "",
            n=self.num_rationales,
            flag=self.flag_template if self.include_flag_instructions else "",
        )
        turns = [ChatMessage("system", (system,))]
        for shot_query, rationales in self.shots:
            turns.append(ChatMessage("user", (f"Query: {shot_query}\nRationales:",)))
            turns.append(ChatMessage("assistant", (self._shot_answer(rationales),)))
        turns.append(ChatMessage("user", (f"Query: {' '.join(query.split())}\nRationales:",)))
        return turns

    def generate(self, query: str) -> list[Rationale]:
        """Rationales for ``query`` (at most ``num_rationales``; empty when the model wrote none).

        Raises:
            InputError: an empty query.
            ModelError: the prompt does not fit the context, or llama.cpp failed.
        """
        if not isinstance(query, str) or not query.strip():
            raise InputError("the rationale generator needs a non-empty query")
        tokens = self.model.chat_tokens(self.messages(query))
        completion = self.model.complete(
            tokens,
            max_tokens=self.max_new_tokens,
            stop=stop_sequences(self.num_rationales),
            temperature=self.temperature,
        )
        self.last_completion = completion
        text = completion.text
        last = self.num_rationales
        if f"<rationale_{last}>" in text and f"</rationale_{last}>" not in text:
            text += f"</rationale_{last}>"  # the stop string itself is not returned
        self.last_text = text
        rationales = parse_rationales(text)[: self.num_rationales]
        if not self.include_flag_instructions:
            rationales = [Rationale(r.text, r.index, r.label, None) for r in rationales]
        if not rationales:
            logger.warning("the model wrote no usable rationale for %r: %r", query[:80], text[:200])
        logger.debug("rationales in %.0f ms (%d tokens)", completion.seconds * 1000, completion.completion_tokens)
        return rationales

    __call__ = generate

    def __repr__(self) -> str:
        return f"LlamaRationaleGenerator(model={self.model!r}, num_rationales={self.num_rationales})"
