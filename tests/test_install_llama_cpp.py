"""scripts/install-llama-cpp.sh's choice of wheel, with a fake pip (no compiler, no network): the demo's
install then the tests' set-up compile llama.cpp once, a cached wheel with this CPU's level is reused
whatever list built it, one without it is not, and an explicit level list takes only its own wheel."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from repo_paths import ROOT

VERSION = "0.3.36"
LEVELS = ["x64", "sse42", "sandybridge", "haswell", "skylakex", "icelake", "alderlake", "sapphirerapids",
          "armv8.0_1", "armv8.2_1", "armv8.2_2", "armv8.6_1"]
WHEEL = f"llama_cpp_python-{VERSION}-cp311-cp311-linux_x86_64.whl"

# pip as the script calls it: `download` writes an sdist whose CMakeLists lists every level, `wheel` builds
# a wheel holding one libggml-cpu-<level>.so per level the script left in that list, `install` is logged
FAKE_PIP = r'''
import io, os, re, sys, tarfile, zipfile
args = sys.argv[1:]
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(" ".join(args) + "\n")
if args[0] == "download":
    folder = args[args.index("-d") + 1]
    lines = "".join(f"ggml_add_cpu_backend_variant({v} X)\n" for v in os.environ["FAKE_LEVELS"].split())
    with tarfile.open(os.path.join(folder, "llama_cpp_python-VERSION.tar.gz"), "w:gz") as tar:
        data = lines.encode()
        info = tarfile.TarInfo("llama_cpp_python-VERSION/vendor/llama.cpp/ggml/src/CMakeLists.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
elif args[0] == "wheel":
    out, src = args[args.index("-w") + 1], args[-1]
    text = open(os.path.join(src, "vendor/llama.cpp/ggml/src/CMakeLists.txt")).read()
    os.makedirs(out, exist_ok=True)
    with zipfile.ZipFile(os.path.join(out, "WHEEL"), "w") as whl:
        for level in re.findall(r"ggml_add_cpu_backend_variant\(([\w.]+)", text):
            whl.writestr(f"llama_cpp/lib/libggml-cpu-{level}.so", b"")
'''.replace("VERSION", VERSION).replace("WHEEL", WHEEL)


@pytest.fixture()
def env(tmp_path: Path) -> dict[str, str]:
    if shutil.which("unzip") is None:
        pytest.skip("no unzip")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "pip").write_text(f"#!{sys.executable}\n{FAKE_PIP}")
    (bin_dir / "python").write_text('#!/bin/sh\necho "$FAKE_SITE"\n')  # where llama_cpp is installed
    for exe in bin_dir.iterdir():
        exe.chmod(0o755)
    (tmp_path / "site").mkdir()
    values = {k: v for k, v in os.environ.items() if k != "LLAMA_CPU_VARIANTS"}
    values.update({"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "FAKE_LOG": str(tmp_path / "pip.log"),
                   "FAKE_SITE": str(tmp_path / "site"), "FAKE_LEVELS": " ".join(LEVELS),
                   "METEORA_EDGE_WHEEL_CACHE": str(tmp_path / "cache")})
    return values


def run(env: dict[str, str], **extra: str) -> tuple[list[str], str]:
    """One run of the script: (the pip commands it ran, its stderr)."""
    log = Path(env["FAKE_LOG"])
    log.write_text("")
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "install-llama-cpp.sh")], env={**env, **extra},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return log.read_text().splitlines(), proc.stderr


def cached(env: dict[str, str]) -> dict[str, list[str]]:
    """Each cached wheel's folder → the CPU levels in it."""
    out = {}
    for wheel in Path(env["METEORA_EDGE_WHEEL_CACHE"]).glob(f"*/{WHEEL}"):
        names = zipfile.ZipFile(wheel).namelist()
        out[wheel.parent.name] = sorted(re.search(r"cpu-(.+)\.so", n).group(1) for n in names)
    return out


def test_the_demo_then_the_tests_compile_once(env):
    demo, said = run(env)  # scripts/demo.sh, on a fresh machine
    assert [c.split()[0] for c in demo] == ["download", "wheel", "install", "install"]
    built = cached(env)
    (levels,) = built.values()
    assert len(levels) == 2 and {"sse42", "armv8.0_1"} & set(levels)  # the baseline and this CPU's level
    assert f"--force-reinstall {env['METEORA_EDGE_WHEEL_CACHE']}/{next(iter(built))}/{WHEEL}" in demo[2]
    tests, said = run(env)  # scripts/setup-dev.sh, from scripts/test.sh, into its own .venv
    assert [c.split()[0] for c in tests] == ["install", "install"] and cached(env) == built
    assert "building" not in said


def test_a_cached_wheel_is_reused_only_with_this_cpus_level(env):
    cache = Path(env["METEORA_EDGE_WHEEL_CACHE"])
    for name, levels in (("cpu-variants-0.3.36-other", ["sse42", "nothing"]), ("cpu-variants-0.3.36-every", LEVELS)):
        (cache / name).mkdir(parents=True)
        with zipfile.ZipFile(cache / name / WHEEL, "w") as whl:
            for level in levels:
                whl.writestr(f"llama_cpp/lib/libggml-cpu-{level}.so", b"")
    commands, said = run(env)
    assert commands[0].endswith(f"cpu-variants-0.3.36-every/{WHEEL}") and "download" not in commands[0]
    assert "reusing the cached cpu-variants-0.3.36-every wheel" in said
    assert (Path(env["FAKE_SITE"]) / ".meteora-wheel").read_text().strip() == "cpu-variants-0.3.36-every"
    (cache / "cpu-variants-0.3.36-every" / WHEEL).unlink()
    commands, said = run(env)
    assert commands[0].startswith("download") and "building a portable" in said


def test_an_explicit_list_takes_only_its_own_wheel(env):
    cache = Path(env["METEORA_EDGE_WHEEL_CACHE"]) / "cpu-variants-0.3.36-every"
    cache.mkdir(parents=True)
    with zipfile.ZipFile(cache / WHEEL, "w") as whl:
        for level in LEVELS:
            whl.writestr(f"llama_cpp/lib/libggml-cpu-{level}.so", b"")
    commands, said = run(env, LLAMA_CPU_VARIANTS="all")
    assert commands[0].startswith("download") and "sse42 haswell skylakex icelake alderlake" in said
    built = [name for name in cached(env) if name != "cpu-variants-0.3.36-every"]
    assert cached(env)[built[0]] == sorted(["sse42", "haswell", "skylakex", "icelake", "alderlake", "armv8.0_1",
                                            "armv8.2_1", "armv8.2_2", "armv8.6_1"])
    again, _ = run(env, LLAMA_CPU_VARIANTS="all")
    assert "download" not in " ".join(again)
