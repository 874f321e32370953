"""Rationales that decompose a question into its hops, written by a local GGUF model.

A multi-hop question names only the start of its chain ("the woman who portrayed Corliss
Archer"); the evidence for the next step talks about an entity the first step reveals. The
:class:`HopRationaleGenerator` asks for one short rationale per hop — the entity and the
relation to find, then what to find about the entity that step reveals — and one per
compared thing for a comparison, each a few words with a flag instruction where one helps.
It is :class:`~meteora_edge.selection.llm_generator.LlamaRationaleGenerator` with other
instructions, its own few-shot examples (``meteora_edge/data/rationale_shots_hops.json``,
none from the evaluation data) and a short answer budget: generated tokens are most of the
cost on a CPU.

Example:
    >>> gen = HopRationaleGenerator("qwen2.5-coder-0.5b-instruct.Q4_K_M.gguf")      # doctest: +SKIP
    >>> [r.text for r in gen("The band that recorded Blue Monday was formed where?")]  # doctest: +SKIP
    ['"Blue Monday": the band that recorded the song', 'that band: the city where it was formed']
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from ..models.llm_model import DEFAULT_CONTEXT_SIZE, LocalLLM
from .llm_generator import LlamaRationaleGenerator, SampleShot

__all__ = ["HopRationaleGenerator", "load_hop_shots", "HOP_SHOTS"]

HOP_SHOTS = "data/rationale_shots_hops.json"
_SYSTEM = (
    "You write search rationales for a retrieval system{domain}. A rationale says what a passage must state to "
    "help answer the question. Split the question into its steps: for each step, name the entity and the fact to "
    "find about it; a later step is about the entity the step before reveals. For a comparison, one rationale per "
    "compared thing. Write at most {n} rationale(s), each under 15 words, as <rationale_i>[Label] text{flag}"
    "</rationale_i>, numbered from 1. Write nothing else."
)
_FLAG = " Flag Instructions: when a passage must be rejected (only where it helps)"


def load_hop_shots() -> list[dict]:
    """The shipped hop examples (three questions, two or three rationales each)."""
    from importlib import resources
    import json

    return json.loads(resources.files("meteora_edge").joinpath(HOP_SHOTS).read_text(encoding="utf-8"))["shots"]


class HopRationaleGenerator(LlamaRationaleGenerator):
    """Decomposing rationales (see the module doc); usable wherever a rationale generator is.

    Args:
        model: a :class:`LocalLLM` or the path of a ``.gguf`` file.
        sample_shots: examples (default: the shipped hop examples).
        num_rationales: at most this many (default 3: most questions have two hops or two compared things).
        max_new_tokens: answer budget (default ``32 * num_rationales + 8``).
        Other arguments as :class:`~meteora_edge.selection.llm_generator.LlamaRationaleGenerator`.
    """

    system_template = _SYSTEM
    flag_template = _FLAG

    def __init__(
        self,
        model: LocalLLM | str | os.PathLike[str],
        *,
        sample_shots: Sequence[SampleShot] | None = None,
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
        super().__init__(
            model, sample_shots=load_hop_shots() if sample_shots is None else sample_shots, domain=domain,
            num_rationales=num_rationales, include_flag_instructions=include_flag_instructions,
            max_new_tokens=max_new_tokens or 32 * num_rationales + 8, temperature=temperature, seed=seed,
            threads=threads, context_size=context_size, chat_format=chat_format,
        )


