"""Which variant of an encoder to run on this CPU: the rule behind ``precision="auto"``.

A bundle's encoder may hold several variants of one model (:data:`VARIANTS`): ``fp32``;
``int8``, the mixed recipe (attention projections in int8, the feed-forward blocks in fp32:
40 % less memory); ``int8-dot``, nearly every MatMul in int8, for CPUs with int8 dot-product
instructions (x86 VNNI/AMX, ARM dot product/i8mm). :func:`choose_precision` picks one from
the CPU's flags (:mod:`.cpu_features`) and says why, skipping an int8 variant whose embeddings
were measured too far from fp32's (:data:`MIN_COSINE`): at export, or on this CPU by
:func:`probe_cosine` (onnxruntime's AVX2 uint8×int8 kernels saturate on some models).

Example:
    >>> from meteora_edge.models.cpu_features import CpuInfo
    >>> vnni = CpuInfo("test", "x86_64", frozenset({"avx2", "avx512_vnni"}), "test")
    >>> choose_precision(["fp32", "int8", "int8-dot"], vnni)[0]
    'int8-dot'
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import BundleError
from .cpu_features import CpuInfo, cpu_info

if TYPE_CHECKING:
    import numpy as np

__all__ = ["VARIANTS", "PRECISIONS", "MIN_COSINE", "choose_precision", "below_bound", "probe_cosine"]

VARIANTS = ("fp32", "int8", "int8-dot")  # the model files an encoder component may hold
PRECISIONS = ("auto", *VARIANTS)
# The least cosine to fp32's embedding an int8 variant may show on any probe text before it counts
# as broken. int8-dot trades the shortest texts' cosine for speed (all-MiniLM-L6-v2: 0.96-0.97 on
# "OK"/"No."); a model whose activations saturate the AVX2 kernels falls far lower (all-mpnet-base-v2:
# below 0.2 on every text).
MIN_COSINE = {"int8": 0.98, "int8-dot": 0.95}


def below_bound(variant: str, min_cosine: object) -> bool:
    """Whether ``min_cosine`` (a measured cosine to fp32) marks ``variant`` as broken."""
    bound = MIN_COSINE.get(variant)
    return bound is not None and isinstance(min_cosine, (int, float)) and not isinstance(min_cosine, bool) \
        and float(min_cosine) < bound


def probe_cosine(vectors: np.ndarray, probe: Mapping[str, Any]) -> float | None:
    """The least cosine between ``vectors`` (the variant's embeddings of ``probe["texts"]``) and the
    fp32 embeddings the export recorded (``probe["fp32"]``); None when the record does not fit."""
    import numpy as np  # the command line's option lists import this module; they need no numpy

    reference = np.asarray(probe.get("fp32") or [], dtype=np.float32)
    if reference.ndim != 2 or reference.shape != vectors.shape or not len(reference):
        return None
    norms = np.linalg.norm(reference, axis=1) * np.linalg.norm(vectors, axis=1)
    return float(np.min(np.sum(reference * vectors, axis=1) / np.maximum(norms, 1e-12)))


def choose_precision(
    available: Iterable[str], cpu: CpuInfo | None = None, report: Mapping[str, Any] | None = None
) -> tuple[str, str]:
    """The variant ``precision="auto"`` runs, and why.

    Rule (measured with ``benchmarks/encoder_variants.py`` and ``benchmarks/select_latency.py``;
    see docs/models.md): a CPU with int8 dot-product instructions runs ``int8-dot``, about 2× fp32
    with retrieval F1 within 0.01 of fp32. An x86 CPU with AVX2 but no dot-product instructions
    runs ``int8-dot`` too: onnxruntime's AVX2 uint8×int8 kernels can saturate, but on an AMD
    EPYC Zen 3 (AVX2 only) its embeddings kept a minimum cosine of 0.987 to fp32 over 600 dev
    sentences, every eval F1 on both dev sets stayed within 0.01 of fp32's, and it encoded
    1.3–1.75× as fast at one thread; no other int8 recipe onnxruntime offers (all MatMuls, u8 weights,
    7-bit weights, fused QAttention, MatMulNBits) ran faster there (docs/what-did-not-pay.md).
    Any other CPU (no AVX2, or flags that cannot be read) runs
    ``fp32``. The mixed ``int8`` recipe is never the first choice (it loses up to 0.016 F1 on
    the dev data); a bundle that lacks the preferred file falls back in the order given, and so
    does one whose export report measured a variant below :data:`MIN_COSINE`.

    Args:
        available: the variants the bundle holds.
        cpu: the CPU to choose for [this one].
        report: the encoder's export report (``{"int8-dot": {"min_cosine": …}, …}``), if any.

    Returns:
        ``(variant, reason)``.

    Raises:
        BundleError: the bundle holds no variant at all.
    """
    have = [v for v in VARIANTS if v in set(available)]
    if not have:
        raise BundleError("the encoder component holds no model file (fp32, int8 or int8-dot); re-export the bundle")
    report = report or {}
    broken = {v: report[v]["min_cosine"] for v in have if isinstance(report.get(v), Mapping)
              and below_bound(v, report[v].get("min_cosine"))}
    if len(broken) < len(have):
        have = [v for v in have if v not in broken]
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
    if chosen == order[0]:
        missing = ""
    elif order[0] in broken:
        missing = (f"; the bundle's {order[0]} model was measured at export too far from fp32 "
                   f"(min cosine {broken[order[0]]:.3f} < {MIN_COSINE[order[0]]})")
    else:
        missing = f"; the bundle has no {order[0]} model" + (" (re-export to add it)" if order[0] == "int8-dot" else "")
    return chosen, f"{cpu_says}{missing}"
