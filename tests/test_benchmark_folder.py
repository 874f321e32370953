"""benchmarks/folder.py in its fast mode: a generated folder indexed and searched end to end (no timing asserted)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys

from repo_paths import ROOT


def test_the_folder_benchmark_runs_in_fast_mode(tmp_path):
    serve = ["--serve"] if importlib.util.find_spec("uvicorn") and importlib.util.find_spec("starlette") else []
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "folder.py"), "--fast", *serve,
                           "--work", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("machine: ") and "cpu flags: " in out and "load average: " in out
    builds = re.findall(r"^([\d,]+) chunks \(([\d,]+) distinct\) from [\d,]+ files: built in", out, re.M)
    assert [int(n.replace(",", "")) >= size for (n, _), size in zip(builds, (60, 150))] == [True, True]
    assert int(builds[1][1].replace(",", "")) < int(builds[1][0].replace(",", ""))  # past --distinct: copies
    for phase in ("select", "candidates", "selection", "verify", "fallback", "prioritise", "budget"):
        assert len(re.findall(rf"^  {phase} +[\d.]+ +[\d.]+$", out, re.M)) == 2, phase
    if serve:
        assert len(re.findall(r"^  request +[\d.]+ +[\d.]+$", out, re.M)) == 2
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(("folder-", "index-"))]  # its files are gone


def test_the_folder_benchmark_reads_a_real_folder_without_embedding(tmp_path):
    (tmp_path / "a.md").write_text("# Notes\n\nEither party may terminate on notice.\n")
    (tmp_path / "page.html").write_text("<html><body><p>Fees are due monthly.</p><script>x()</script></body></html>")
    (tmp_path / "blob.bin").write_bytes(bytes(range(256)) * 40)
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "folder.py"), "--read", str(tmp_path),
                           "--repeat", "1"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "files read 2, skipped 1" in done.stdout and "1 binary" in done.stdout, done.stdout
