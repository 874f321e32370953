"""Building the GGUF rationale generator and verifier from a bundle, for the commands that need them."""

from __future__ import annotations

from meteora_edge.errors import InputError


def llm_roles(bundle: str | None, *, generate: bool, verify: bool, threads: int = 1):
    """(generator, verifier) from the bundle's llm component; None for a role not asked for."""
    if not (generate or verify):
        return None, None
    if bundle is None:
        raise InputError("the LLM roles need --bundle with an llm component; add one with "
                         "'meteora-edge export llm --gguf FILE --out BUNDLE'")
    raise InputError("this build has no GGUF runtime yet")
