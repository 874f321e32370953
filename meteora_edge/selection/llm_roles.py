"""The GGUF rationale generator and verifier from a bundle, for the CLI commands and the server.

:func:`check_llm_bundle` only reads the manifest (callers use it while validating their
inputs); :func:`llm_roles` loads the model, which callers do last.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import InputError

__all__ = ["check_llm_bundle", "llm_roles"]

_HOW = "add one with 'meteora-edge export llm --gguf FILE --out BUNDLE'"


def check_llm_bundle(bundle: str | None, *, generate: bool, verify: bool) -> None:
    """Refuse, before any model loads, a role that has no GGUF model to run on.

    Raises:
        InputError: a role is asked for without a bundle, or the bundle has no llm component.
    """
    if not (generate or verify):
        return
    if bundle is None:
        role = "LLM verification needs a verifier" if verify else "--generate-rationales needs a GGUF model"
        raise InputError(f"{role}: give --bundle with an llm component; {_HOW}")
    from ..models.bundle import MANIFEST_NAME, Bundle

    if (Path(bundle) / MANIFEST_NAME).is_file() and "llm" not in Bundle.load(bundle).components:
        raise InputError(f"bundle {bundle} has no llm component; {_HOW}")


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
):
    """(generator, verifier) from the bundle's llm component; None for a role not asked for.

    One model is loaded and shared by both roles; ``sample_shots`` default to the shipped ones.

    Raises:
        InputError: as :func:`check_llm_bundle`.
        BundleError, ModelError: the GGUF file is missing, corrupt or cannot be loaded.
    """
    check_llm_bundle(bundle, generate=generate, verify=verify)
    if not (generate or verify):
        return None, None
    from ..models.llm_model import LocalLLM
    from .llm_generator import LlamaRationaleGenerator
    from .llm_verifier import LlamaVerifier
    from .sample_shots import load_sample_shots

    model = LocalLLM.from_bundle(bundle, threads=threads, context_size=context_size)  # type: ignore[arg-type]
    generator = (
        LlamaRationaleGenerator(model, sample_shots=sample_shots or load_sample_shots(), num_rationales=num_rationales,
                                domain=domain)
        if generate
        else None
    )
    verifier = LlamaVerifier(model, domain=domain) if verify else None
    return generator, verifier
