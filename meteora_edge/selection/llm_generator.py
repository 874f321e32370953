"""METEORA's rationale generator on a local GGUF model.

A few-shot prompt (sample shots are required, in any form :mod:`~meteora_edge.selection.sample_shots`
reads: METEORA's ``{query, response}``, ``{query, rationales}`` or plain strings) asks for
exactly N rationales in the tagged form
``<rationale_i>[Label] what to look for Flag Instructions: when to reject</rationale_i>``.
The answer is started with ``<rationale_1>`` (so a small model numbers from 1); generation
stops after ``</rationale_N>``, at ``<rationale_{N+1}>`` or when the model starts a new query;
the text is read with the core :func:`parse_rationales`.

Example:
    >>> gen = LlamaRationaleGenerator("SmolLM2-135M-Instruct.Q4_1.gguf",
    ...                               sample_shots=load_sample_shots())          # doctest: +SKIP
    >>> reranker = MeteoraReranker(HashingEncoder(), rationale_generator=gen)  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence

from ..errors import ConfigError, InputError
from ..models.llm_model import DEFAULT_CONTEXT_SIZE, ChatMessage, Completion, LocalLLM, as_local_llm
from .rationales import Rationale, format_rationales, parse_rationales
from .sample_shots import SampleShot, check_shots, load_sample_shots

__all__ = ["LlamaRationaleGenerator", "SampleShot", "load_sample_shots", "stop_sequences"]

logger = logging.getLogger(__name__)

ANSWER_PREFIX = "<rationale_1>"
SAMPLING_TEMPERATURE = 0.7  # METEORA's temperature when do_sample=True and none is given
_SYSTEM = (
    "You write search rationales for a retrieval system{domain}. Given a query, write exactly {n} "
    "rationale(s), one per line, each as <rationale_i>[Label] the evidence to look for{flag}</rationale_i>, "
    "numbered from 1. Write nothing else."
)
_FLAG = " Flag Instructions: when a passage must be rejected"
_CHAT_STOPS = ("<|im_end|>", "<|im_start|>", "<|endoftext|>", "<|eot_id|>", "<end_of_turn>", "</s>")


def _sampling(do_sample: object, temperature: object, top_p: object) -> tuple[float, float | None]:
    """(temperature, top_p) from METEORA's ``do_sample``/``temperature``/``top_p``; 0 is greedy."""
    if do_sample is not None and not isinstance(do_sample, bool):
        raise ConfigError(f"do_sample must be True, False or None, got {do_sample!r}")
    if temperature is not None and (
        isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not 0.0 <= temperature <= 2.0
    ):
        raise ConfigError(f"temperature must be in 0..2 or None, got {temperature!r}")
    if top_p is not None and (
        isinstance(top_p, bool) or not isinstance(top_p, (int, float)) or not math.isfinite(top_p) or not 0.0 < top_p <= 1.0
    ):
        raise ConfigError(f"top_p must be in (0, 1] or None, got {top_p!r}")
    if do_sample is False:
        return 0.0, None  # greedy, whatever the temperature (as in transformers)
    if do_sample is True:
        if temperature == 0:
            raise ConfigError("do_sample=True needs a temperature above 0 (or leave temperature unset for 0.7)")
        return float(SAMPLING_TEMPERATURE if temperature is None else temperature), None if top_p is None else float(top_p)
    chosen = float(temperature or 0.0)  # do_sample unset: sample exactly when a temperature above 0 is given
    return chosen, None if top_p is None or chosen == 0 else float(top_p)


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
        sample_shots: examples: METEORA's ``{"query", "response"}`` (tagged text),
            ``{"query", "rationales"}`` or plain strings; required (:func:`load_sample_shots`
            reads shot files and gives the shipped ones).
        domain: optional subject named in the prompt (e.g. ``"online store policies"``).
        num_rationales: how many rationales to ask for (the result has at most this many).
        include_flag_instructions: ask for (and show) ``Flag Instructions``.
        max_new_tokens: answer budget; default ``tokens_per_rationale * num_rationales + 16``
            (80 per rationale here).
        do_sample: ``False`` is greedy whatever the temperature; ``True`` samples (temperature
            0.7 unless given); ``None`` (default) samples exactly when ``temperature`` > 0.
        temperature: sampling temperature (default: greedy, so the result is deterministic).
        top_p: nucleus sampling cut-off when sampling (default: none).
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
        do_sample: bool | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        seed: int = 0,
        threads: int = 1,
        context_size: int = DEFAULT_CONTEXT_SIZE,
        chat_format: str | None = None,
    ) -> None:
        if not isinstance(num_rationales, int) or isinstance(num_rationales, bool) or not 1 <= num_rationales <= 20:
            raise ConfigError(f"num_rationales must be an integer in 1..20, got {num_rationales!r}")
        if max_new_tokens is not None and (not isinstance(max_new_tokens, int) or max_new_tokens < 1):
            raise ConfigError(f"max_new_tokens must be a positive integer or None, got {max_new_tokens!r}")
        self.temperature, self.top_p = _sampling(do_sample, temperature, top_p)
        self.do_sample = self.temperature > 0
        self.shots = check_shots(sample_shots)
        self.domain = domain
        self.num_rationales = num_rationales
        self.include_flag_instructions = include_flag_instructions
        self.max_new_tokens = max_new_tokens or self.tokens_per_rationale * num_rationales + 16
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
        examples = [shot.text for shot in self.shots if shot.query is None]
        if examples:
            system += "\n\nExamples:\n" + "\n\n".join(examples)
        turns = [ChatMessage("system", (system,))]
        for shot in self.shots:
            if shot.query is not None:
                turns.append(ChatMessage("user", (f"Query: {shot.query}\nRationales:",)))
                turns.append(ChatMessage("assistant", (self._shot_answer(list(shot.rationales)),)))
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
        # The answer is started with "<rationale_1>" so that a small model numbers from 1: after a
        # one-rationale shot it would otherwise open "<rationale_2>", which is a stop string.
        tokens = self.model.chat_tokens(self.messages(query)) + self.model.tokenize(ANSWER_PREFIX)
        completion = self.model.complete(
            tokens,
            max_tokens=self.max_new_tokens,
            stop=stop_sequences(self.num_rationales),
            temperature=self.temperature,
            top_p=self.top_p,
        )
        self.last_completion = completion
        text = completion.text
        if not text.lstrip().lower().startswith(ANSWER_PREFIX):
            text = ANSWER_PREFIX + text
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
