"""Building the GGUF rationale generator and verifier from a bundle, for the commands that need them."""

from __future__ import annotations

from pathlib import Path

from meteora_edge.errors import InputError

_HOW = "add one with 'meteora-edge export llm --gguf FILE --out BUNDLE'"


def llm_roles(
    bundle: str | None,
    *,
    generate: bool,
    verify: bool,
    threads: int = 1,
    context_size: int | None = None,
    num_rationales: int = 3,
):
    """(generator, verifier) from the bundle's llm component; None for a role not asked for.

    One model is loaded and shared by both roles.
    """
    if not (generate or verify):
        return None, None
    if bundle is None:
        role = "LLM verification needs a verifier" if verify else "--generate-rationales needs a GGUF model"
        raise InputError(f"{role}: give --bundle with an llm component; {_HOW}")
    from meteora_edge.models.bundle import MANIFEST_NAME, Bundle

    if (Path(bundle) / MANIFEST_NAME).is_file() and "llm" not in Bundle.load(bundle).components:
        raise InputError(f"bundle {bundle} has no llm component; {_HOW}")
    from meteora_edge.selection.llm_generator import LlamaRationaleGenerator, load_sample_shots
    from meteora_edge.models.llm_model import LocalLLM
    from meteora_edge.selection.llm_verifier import LlamaVerifier

    model = LocalLLM.from_bundle(bundle, threads=threads, context_size=context_size)
    generator = (
        LlamaRationaleGenerator(model, sample_shots=load_sample_shots(), num_rationales=num_rationales)
        if generate
        else None
    )
    verifier = LlamaVerifier(model) if verify else None
    return generator, verifier
