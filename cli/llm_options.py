"""Building the GGUF model's roles (rationales, verdicts, relevance scores) from a bundle, for the commands that need them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from meteora_edge.errors import InputError

_HOW = "add one with 'meteora-edge models install NAME --bundle BUNDLE' or 'meteora-edge export llm --gguf FILE --out BUNDLE'"


def _load_model(bundle: str | None, *, role: str, threads: int, context_size: int | None) -> Any:
    if bundle is None:
        raise InputError(f"{role}: give --bundle with an llm component; {_HOW}")
    from meteora_edge.models.bundle import MANIFEST_NAME, Bundle

    if (Path(bundle) / MANIFEST_NAME).is_file() and "llm" not in Bundle.load(bundle).components:
        raise InputError(f"bundle {bundle} has no llm component; {_HOW}")
    from meteora_edge.models.llm_model import LocalLLM

    return LocalLLM.from_bundle(bundle, threads=threads, context_size=context_size)


def llm_roles(
    bundle: str | None,
    *,
    generate: bool,
    verify: bool,
    threads: int = 1,
    context_size: int | None = None,
    num_rationales: int = 3,
    batch: int = 1,
    prompt: str = "hops",
):
    """(generator, verifier) from the bundle's llm component; None for a role not asked for.

    One model is loaded and shared by both roles. With ``batch`` > 1 the verifier judges
    several chunks per prompt (``LlamaBatchVerifier``), else one (METEORA's ``LlamaVerifier``).
    ``prompt`` picks the rationale prompt: ``hops`` (one rationale per hop) or ``meteora``.
    """
    if not (generate or verify):
        return None, None
    role = "LLM verification needs a verifier" if verify else "--generate-rationales needs a GGUF model"
    model = _load_model(bundle, role=role, threads=threads, context_size=context_size)
    from meteora_edge.selection.llm_batch_verifier import LlamaBatchVerifier
    from meteora_edge.selection.llm_verifier import LlamaVerifier

    generator = _generator(model, prompt, num_rationales) if generate else None
    verifier = (LlamaBatchVerifier(model) if batch > 1 else LlamaVerifier(model)) if verify else None
    return generator, verifier


def _generator(model: Any, prompt: str, num_rationales: int) -> Any:
    from meteora_edge.selection.llm_generator import LlamaRationaleGenerator, load_sample_shots
    from meteora_edge.selection.llm_hops import HopRationaleGenerator, load_hop_shots

    if prompt == "hops":
        return HopRationaleGenerator(model, sample_shots=load_hop_shots(), num_rationales=num_rationales)
    return LlamaRationaleGenerator(model, sample_shots=load_sample_shots(), num_rationales=num_rationales)


def llm_scorer(bundle: str | None, *, shared: Any = None, threads: int = 1, context_size: int | None = None) -> Any:
    """The relevance scorer of the LLM rerank, on the model of ``shared`` (a generator or verifier) when given."""
    from meteora_edge.selection.llm_scorer import LlamaRelevanceScorer

    model = getattr(shared, "model", None)
    if model is None:
        model = _load_model(bundle, role="--llm-rerank needs a GGUF model", threads=threads, context_size=context_size)
    return LlamaRelevanceScorer(model)


@dataclass(frozen=True)
class LLMRoles:
    """Every role of one loaded GGUF model (what ``eval``'s ``llm`` methods may use)."""

    generator: Any
    verifier: Any
    batch_verifier: Any
    scorer: Any


def all_llm_roles(bundle: str | None, *, threads: int = 1, context_size: int | None = None,
                  num_rationales: int = 3, prompt: str = "hops") -> LLMRoles:
    """Load the bundle's GGUF model once and give it every role (``prompt``: ``hops`` or ``meteora`` rationales)."""
    model = _load_model(bundle, role="methods with 'llm' in their name need a GGUF model", threads=threads,
                        context_size=context_size)
    from meteora_edge.selection.llm_batch_verifier import LlamaBatchVerifier
    from meteora_edge.selection.llm_scorer import LlamaRelevanceScorer
    from meteora_edge.selection.llm_verifier import LlamaVerifier

    return LLMRoles(
        generator=_generator(model, prompt, num_rationales),
        verifier=LlamaVerifier(model),
        batch_verifier=LlamaBatchVerifier(model),
        scorer=LlamaRelevanceScorer(model),
    )
