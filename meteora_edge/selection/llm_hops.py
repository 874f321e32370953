"""Rationales that decompose a question into its hops, written by a local GGUF model.

A multi-hop question names only the start of its chain ("the woman who portrayed Corliss
Archer"); the evidence for the next step talks about an entity the first step reveals. The
:class:`HopRationaleGenerator` asks for one short rationale per hop — the entity and the
relation to find, then what to find about the entity that step reveals — and one per
compared thing for a comparison, each a few words with a flag instruction where one helps.
It is :class:`~meteora_edge.selection.llm_generator.LlamaRationaleGenerator` with other
instructions and a short answer budget (32 tokens per rationale: generated tokens are most
of the cost on a CPU); its few-shot examples are :func:`load_hop_shots`
(``meteora_edge/data/rationale_shots_hops.json``, none from the evaluation data).

Example:
    >>> gen = HopRationaleGenerator("qwen2.5-coder-0.5b-instruct.Q4_K_M.gguf",
    ...                             sample_shots=load_hop_shots())                    # doctest: +SKIP
    >>> [r.text for r in gen("The band that recorded Blue Monday was formed where?")]  # doctest: +SKIP
    ['"Blue Monday": the band that recorded the song', 'that band: the city where it was formed']
"""

from __future__ import annotations

from typing import Any

from .llm_generator import LlamaRationaleGenerator
from .sample_shots import load_sample_shots

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


def load_hop_shots() -> list[dict[str, Any]]:
    """The shipped hop examples (three questions, two or three rationales each).

    Raises:
        InputError: the shipped file is unreadable (a broken install).
    """
    return load_sample_shots(shipped=HOP_SHOTS)


class HopRationaleGenerator(LlamaRationaleGenerator):
    """Decomposing rationales (see the module doc); built and used like its parent,
    e.g. ``HopRationaleGenerator(llm, sample_shots=load_hop_shots(), num_rationales=3)``."""

    system_template = _SYSTEM
    flag_template = _FLAG
    tokens_per_rationale = 32
