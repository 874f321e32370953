"""Which variant of an encoder to run on this CPU: the rule behind ``precision="auto"``.

A bundle's encoder may hold several variants of one model (:data:`VARIANTS`): ``fp32``;
``int8``, the mixed recipe (attention projections in int8, the feed-forward blocks in fp32:
40 % less memory); ``int8-dot``, nearly every MatMul in int8, for CPUs with int8 dot-product
instructions (x86 VNNI/AMX, ARM dot product/i8mm). :func:`choose_precision` picks one from
the CPU's flags (:mod:`.cpu_features`) and says why.

Example:
    >>> from meteora_edge.models.cpu_features import CpuInfo
    >>> vnni = CpuInfo("test", "x86_64", frozenset({"avx2", "avx512_vnni"}), "test")
    >>> choose_precision(["fp32", "int8", "int8-dot"], vnni)[0]
    'int8-dot'
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import BundleError
from .cpu_features import CpuInfo, cpu_info

__all__ = ["VARIANTS", "PRECISIONS", "choose_precision"]

VARIANTS = ("fp32", "int8", "int8-dot")  # the model files an encoder component may hold
PRECISIONS = ("auto", *VARIANTS)


def choose_precision(available: Iterable[str], cpu: CpuInfo | None = None) -> tuple[str, str]:
    """The variant ``precision="auto"`` runs, and why.

    Rule (measured with ``benchmarks/encoder_variants.py`` and ``benchmarks/select_latency.py``;
    see docs/models.md): a CPU with int8 dot-product instructions runs ``int8-dot``, about 2× fp32
    with retrieval F1 within 0.01 of fp32. An x86 CPU with AVX2 but no dot-product instructions
    runs ``int8-dot`` too: onnxruntime's AVX2 uint8×int8 kernels can saturate, but on an AMD
    EPYC Zen 3 (AVX2 only) its embeddings kept a minimum cosine of 0.987 to fp32 over 600 dev
    sentences, every eval F1 on both dev sets stayed within 0.01 of fp32's, and it encoded
    1.3–1.75× as fast at one thread; no other int8 recipe onnxruntime offers (all MatMuls, u8 weights,
    7-bit weights, fused QAttention, MatMulNBits) ran faster there (``benchmarks/int8_recipes.py``).
    Any other CPU (no AVX2, or flags that cannot be read) runs
    ``fp32``. The mixed ``int8`` recipe is never the first choice (it loses up to 0.016 F1 on
    the dev data); a bundle that lacks the preferred file falls back in the order given.

    Args:
        available: the variants the bundle holds.
        cpu: the CPU to choose for [this one].

    Returns:
        ``(variant, reason)``.

    Raises:
        BundleError: the bundle holds no variant at all.
    """
    have = [v for v in VARIANTS if v in set(available)]
    if not have:
        raise BundleError("the encoder component holds no model file (fp32, int8 or int8-dot); re-export the bundle")
    cpu = cpu or cpu_info()
    dot = cpu.int8_dot
    if dot:
        cpu_says = f"the CPU has int8 dot-product instructions ({dot})"
        order = ("int8-dot", "fp32", "int8")
    elif "avx2" in cpu.flags:
        cpu_says = ("the CPU has AVX2 without int8 dot-product instructions, where int8-dot still runs faster than "
                    "fp32 within 0.01 F1")
        order = ("int8-dot", "fp32", "int8")
    else:
        unknown = "its flags could not be read" if not cpu.flags else "no VNNI/AMX/dot-product or AVX2 flag"
        cpu_says = f"the CPU has no int8 dot-product instructions nor AVX2 ({unknown}), so int8 is not worth its loss"
        order = ("fp32", "int8", "int8-dot")
    chosen = next(v for v in order if v in have)
    missing = "" if chosen == order[0] else f"; the bundle has no {order[0]} model" + (
        " (re-export to add it)" if order[0] == "int8-dot" else "")
    return chosen, f"{cpu_says}{missing}"
