"""CPU flags from /proc/cpuinfo, and the encoder variant `precision="auto"` picks from them."""

from __future__ import annotations

import pytest

from meteora_edge.errors import BundleError
from meteora_edge.models.cpu_features import CpuInfo, cpu_info, read_cpuinfo
from meteora_edge.models.precision import choose_precision

X86 = """processor	: 0
vendor_id	: AuthenticAMD
model name	: AMD EPYC 9755 128-Core Processor
flags		: fpu sse4_2 avx avx2 fma avx512f avx512_vnni avx_vnni avx512_bf16

processor	: 1
model name	: AMD EPYC 9755 128-Core Processor
flags		: fpu sse4_2 avx avx2 fma avx512f avx512_vnni avx_vnni avx512_bf16
"""
ARM = """processor	: 0
BogoMIPS	: 50.00
Features	: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm asimddp i8mm
CPU implementer	: 0x41
"""


def cpu(*flags: str) -> CpuInfo:
    return CpuInfo(model="test", machine="x86_64", flags=frozenset(flags), source="test")


def test_reads_x86_and_arm_cpuinfo():
    model, flags = read_cpuinfo(X86)
    assert model == "AMD EPYC 9755 128-Core Processor"
    assert {"avx512_vnni", "avx_vnni", "avx2"} <= flags and "asimddp" not in flags
    model, flags = read_cpuinfo(ARM)
    assert model == "" and {"asimd", "asimddp", "i8mm"} <= flags
    assert read_cpuinfo("") == ("", frozenset())


@pytest.mark.parametrize(
    ("flags", "dot"),
    [
        ((), None),
        (("avx2", "fma"), None),
        (("avx2", "avx_vnni"), "avx_vnni"),
        (("avx512f", "avx512_vnni", "avx_vnni"), "avx512_vnni"),
        (("avx512_vnni", "amx_tile", "amx_int8"), "amx_int8"),
        (("asimd",), None),
        (("asimd", "asimddp"), "asimddp"),
        (("asimd", "asimddp", "i8mm"), "i8mm"),
    ],
)
def test_int8_dot_product_flag(flags, dot):
    assert cpu(*flags).int8_dot == dot


@pytest.mark.parametrize(
    ("flags", "available", "chosen", "reason"),
    [
        (("avx512_vnni",), ("fp32", "int8", "int8-dot"), "int8-dot", "has int8 dot-product instructions (avx512_vnni)"),
        (("asimddp",), ("fp32", "int8", "int8-dot"), "int8-dot", "(asimddp)"),
        # AVX2 without VNNI (most laptops): int8-dot, measured within 0.01 F1 of fp32 and faster
        (("avx2", "fma", "f16c"), ("fp32", "int8", "int8-dot"), "int8-dot", "AVX2 without int8 dot-product"),
        (("avx2",), ("fp32", "int8"), "fp32", "the bundle has no int8-dot model (re-export to add it)"),
        (("sse4_2", "avx"), ("fp32", "int8", "int8-dot"), "fp32", "no VNNI/AMX/dot-product or AVX2 flag"),
        (("asimd",), ("fp32", "int8", "int8-dot"), "fp32", "no int8 dot-product instructions nor AVX2"),
        ((), ("fp32", "int8", "int8-dot"), "fp32", "its flags could not be read"),
        # bundles from before int8-dot existed keep working
        (("avx512_vnni",), ("fp32", "int8"), "fp32", "the bundle has no int8-dot model (re-export to add it)"),
        (("sse4_2",), ("int8",), "int8", "the bundle has no fp32 model"),
        (("avx2",), ("int8",), "int8", "the bundle has no int8-dot model"),
        (("avx512_vnni",), ("int8",), "int8", "has no int8-dot model"),
        (("sse4_2",), ("int8-dot",), "int8-dot", "has no fp32 model"),
    ],
)
def test_auto_precision_rule(flags, available, chosen, reason):
    got, why = choose_precision(available, cpu(*flags))
    assert got == chosen and reason in why


def test_auto_precision_needs_a_model():
    with pytest.raises(BundleError, match="holds no model file"):
        choose_precision(("tokenizer",), cpu("avx2"))


def test_this_machine_is_read_without_error():
    info = cpu_info()
    assert info.model and info.machine
    assert info.int8_dot is None or info.int8_dot in info.flags
    assert set(info.reported) <= info.flags
