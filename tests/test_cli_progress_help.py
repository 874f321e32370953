"""Progress of ``index build``/``add`` on stderr (lines, JSON events), examples in ``--help``, and
``python -m meteora_edge`` from the repository root."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from meteora_edge.cli.main import main
from meteora_edge.cli.progress import LineProgress

from repo_paths import EXAMPLES, ROOT


def run(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, list(args), env=env)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_lines_are_rate_limited_and_the_last_state_is_always_shown():
    clock, lines = Clock(), []
    progress = LineProgress("embedding", "chunks", as_json=False, write=lines.append, clock=clock, interval=2.0)
    for done in (10, 20, 30):  # within the first 2 s: only the first is printed
        clock.now += 0.5
        progress(done, 100)
    clock.now += 1.0  # 2.5 s after the start, 2 s after the first line
    progress(40, 100)
    clock.now += 0.1
    progress(50, 100)
    progress.finish()
    assert lines == ["embedding: 10/100 chunks (10 %), 20.0 chunks/s",
                     "embedding: 40/100 chunks (40 %), 16.0 chunks/s",
                     "embedding: 50/100 chunks (50 %), 19.2 chunks/s"]
    progress.finish()
    assert len(lines) == 3  # nothing new to show


def test_json_events_and_the_final_count_is_printed_at_once():
    clock, lines = Clock(), []
    progress = LineProgress("embedding", "chunks", as_json=True, write=lines.append, clock=clock)
    progress(32, 64)
    clock.now += 0.25
    progress(64, 64)  # done: printed although under the interval
    progress.finish()
    events = [json.loads(line) for line in lines]
    assert [(e["event"], e["stage"], e["done"], e["total"]) for e in events] == [
        ("progress", "embedding", 32, 64), ("progress", "embedding", 64, 64)]
    assert events[1]["elapsed_s"] == 0.25
    assert events[1]["per_s"] == 256.0  # 64 chunks in 0.25 s


@pytest.mark.parametrize("mode", ["text", "json", "none"])
def test_index_build_reports_progress_on_stderr_outside_a_terminal(tmp_path, mode):
    result = run("index", "build", str(EXAMPLES / "contract.md"), str(EXAMPLES / "contract_clauses.json"),
                 "--out", str(tmp_path / "ix"), "--chunk-size", "30", "--batch-size", "4", "--progress", mode)
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if not line.startswith(("note:", "indexed"))]
    if mode == "none":
        assert lines == []
        return
    total = None
    if mode == "json":
        events = [json.loads(line) for line in lines]
        assert events and all(set(e) == {"event", "stage", "done", "total", "elapsed_s", "per_s"} for e in events)
        assert events[-1]["done"] == events[-1]["total"] > 4
        total = events[-1]["total"]
    else:
        assert lines and lines[-1].startswith("embedding: ") and "chunks/s" in lines[-1]
        total = int(lines[-1].split("/")[0].split()[-1])
    assert f"into {total} chunks" in result.stderr
    assert result.stdout == ""


def test_progress_mode_from_the_environment(tmp_path):
    result = run("index", "build", str(EXAMPLES / "contract.md"), "--out", str(tmp_path / "ix"),
                 env={"METEORA_EDGE_PROGRESS": "json"})
    assert result.exit_code == 0, result.output
    assert json.loads(result.stderr.splitlines()[0])["event"] == "progress"


@pytest.mark.parametrize("command", [["select"], ["index", "build"], ["index", "search"], ["chunk"],
                                     ["models", "install"]])
def test_help_shows_runnable_examples(command):
    result = run(*command, "--help")
    assert result.exit_code == 0, result.output
    text = result.output
    examples = text.split("Examples:")[1].split("Options:")[0]
    lines = [line.strip() for line in examples.strip().splitlines()]
    assert len(lines) >= 2 and all("meteora-edge " + " ".join(command) in line for line in lines), lines
    for line in lines:  # click kept each example on its own line (a \b block), unwrapped
        assert line in text.replace("\n    ", "\n")


def test_python_m_meteora_edge_from_the_repository_root_without_pythonpath():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    for args in (["--help"], ["index", "search", "--help"]):
        proc = subprocess.run([sys.executable, "-m", "meteora_edge", *args], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith("Usage: meteora-edge")
    assert "Examples:" in proc.stdout
