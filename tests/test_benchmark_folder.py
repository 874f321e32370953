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


def test_the_folder_benchmark_times_selects_over_an_index_already_built(tmp_path):
    from click.testing import CliRunner

    from meteora_edge.cli.main import main

    index = tmp_path / "notes.index"
    assert CliRunner().invoke(main, ["index", "build", str(ROOT / "examples" / "corpus"), "--out", str(index)]).exit_code == 0
    questions = tmp_path / "questions.txt"
    questions.write_text("How much notice ends the agreement?\n\nWhen are fees due?\n")
    script = [sys.executable, str(ROOT / "benchmarks" / "folder.py"), "--index", str(index)]
    done = subprocess.run([*script, "--questions", str(questions), "--repeat", "2"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert "encoder hashing:384; 2 questions" in done.stdout and "one thread, 4 questions (ms)" in done.stdout
    for phase in ("select", "candidates", "selection", "verify", "fallback", "prioritise", "budget"):
        assert len(re.findall(rf"^  {phase} +[\d.]+ +[\d.]+$", done.stdout, re.M)) == 1, phase
    missing = subprocess.run(script, capture_output=True, text=True, timeout=300)
    assert missing.returncode == 2 and "--index needs --questions FILE" in missing.stderr
