"""The GGUF model's roles (rationales, verdicts, relevance scores) from a bundle, for the CLI
commands and the server.

:func:`check_llm_bundle` only reads the manifest (callers use it while validating their
inputs); :func:`llm_roles`, :func:`llm_scorer` and :func:`all_llm_roles` load the model,
which callers do last. One model is loaded and shared by every role asked for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InputError

__all__ = ["check_llm_bundle", "llm_roles", "llm_scorer", "all_llm_roles", "LLMRoles", "RATIONALE_PROMPTS"]

_HOW = "add one with 'meteora-edge models install NAME --bundle BUNDLE' or 'meteora-edge export llm --gguf FILE --out BUNDLE'"
#: ``hops``: one short rationale per hop (:class:`~.llm_hops.HopRationaleGenerator`); ``meteora``: METEORA's prompt
RATIONALE_PROMPTS = ("hops", "meteora")


def check_llm_bundle(bundle: str | None, *, generate: bool, verify: bool, role: str | None = None) -> None:
    """Refuse, before any model loads, a role that has no GGUF model to run on.

    Args:
        role: how messages name what needs the model (default: from ``generate``/``verify``).

    Raises:
        InputError: a role is asked for without a bundle, or the bundle has no llm component.
    """
    if not (generate or verify):
        return
    if bundle is None:
        role = role or ("LLM verification needs a verifier" if verify else "--generate-rationales needs a GGUF model")
        raise InputError(f"{role}: give --bundle with an llm component; {_HOW}")
    from ..models.bundle import MANIFEST_NAME, Bundle

    if (Path(bundle) / MANIFEST_NAME).is_file() and "llm" not in Bundle.load(bundle).components:
        raise InputError(f"bundle {bundle} has no llm component; {_HOW}")


def _open(bundle: str | None, threads: int, context_size: int | None) -> Any:
    from ..models.llm_model import LocalLLM

    return LocalLLM.from_bundle(bundle, threads=threads, context_size=context_size)  # type: ignore[arg-type]


def _load_model(bundle: str | None, *, role: str, threads: int, context_size: int | None) -> Any:
    check_llm_bundle(bundle, generate=True, verify=False, role=role)
    return _open(bundle, threads, context_size)


def _generator(model: Any, prompt: str, num_rationales: int, sample_shots: Sequence[Any] | None,
               domain: str | None) -> Any:
    if prompt not in RATIONALE_PROMPTS:
        raise InputError(f"rationale prompt must be one of {', '.join(RATIONALE_PROMPTS)}, got {prompt!r}")
    if prompt == "hops" and sample_shots is None:
        from .llm_hops import HopRationaleGenerator, load_hop_shots

        return HopRationaleGenerator(model, sample_shots=load_hop_shots(), num_rationales=num_rationales, domain=domain)
    from .llm_generator import LlamaRationaleGenerator
    from .sample_shots import load_sample_shots

    shots = load_sample_shots() if sample_shots is None else sample_shots
    return LlamaRationaleGenerator(model, sample_shots=shots, num_rationales=num_rationales, domain=domain)


def llm_roles(
    bundle: str | None,
    *,
    generate: bool,
    verify: bool,
    threads: int = 1,
    context_size: int | None = None,
    num_rationales: int = 3,
    sample_shots: Sequence[Any] | None = None,
    domain: str | None = None,
    batch: int = 1,
    prompt: str = "hops",
):
    """(generator, verifier) from the bundle's llm component; None for a role not asked for.

    Args:
        sample_shots: the rationale prompt's examples (given shots use METEORA's prompt);
            default: the shipped ones of ``prompt``.
        batch: above 1, the verifier judges that many chunks per prompt
            (:class:`~.llm_batch_verifier.LlamaBatchVerifier`), else one (:class:`~.llm_verifier.LlamaVerifier`).
        prompt: the rationale prompt, one of :data:`RATIONALE_PROMPTS`.

    Raises:
        InputError: as :func:`check_llm_bundle`.
        BundleError, ModelError: the GGUF file is missing, corrupt or cannot be loaded.
    """
    check_llm_bundle(bundle, generate=generate, verify=verify)
    if not (generate or verify):
        return None, None
    from .llm_batch_verifier import LlamaBatchVerifier
    from .llm_verifier import LlamaVerifier

    model = _open(bundle, threads, context_size)
    generator = _generator(model, prompt, num_rationales, sample_shots, domain) if generate else None
    verifier = None
    if verify:
        verifier = LlamaBatchVerifier(model, domain=domain) if batch > 1 else LlamaVerifier(model, domain=domain)
    return generator, verifier


def llm_scorer(bundle: str | None, *, shared: Any = None, threads: int = 1, context_size: int | None = None) -> Any:
    """The relevance scorer of the LLM rerank, on the model of ``shared`` (a generator or verifier) when given."""
    from .llm_scorer import LlamaRelevanceScorer

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
    """Load the bundle's GGUF model once and give it every role (``prompt``: one of :data:`RATIONALE_PROMPTS`)."""
    model = _load_model(bundle, role="methods with 'llm' in their name need a GGUF model", threads=threads,
                        context_size=context_size)
    from .llm_batch_verifier import LlamaBatchVerifier
    from .llm_scorer import LlamaRelevanceScorer
    from .llm_verifier import LlamaVerifier

    return LLMRoles(
        generator=_generator(model, prompt, num_rationales, None, None),
        verifier=LlamaVerifier(model),
        batch_verifier=LlamaBatchVerifier(model),
        scorer=LlamaRelevanceScorer(model),
    )
