"""Outputs are all or nothing: a write that fails, is cut off or is killed midway leaves the old file."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from meteora_edge.errors import InputError
from meteora_edge.fileio import write_text_atomic

CLI = [sys.executable, "-m", "meteora_edge.cli.main"]
OLD = "the old result\n"


@pytest.fixture
def target(tmp_path: Path) -> Path:
    path = tmp_path / "out.json"
    path.write_text(OLD)
    return path


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name != "out.json" and p.suffix != ".txt")


def test_a_write_that_fails_midway_keeps_the_old_file(target):
    def pieces():
        yield "{\"chunks\": [" + "x" * 100_000
        raise InputError("the input turned out to be bad halfway")

    with pytest.raises(InputError, match="halfway"):
        write_text_atomic(target, pieces())
    assert target.read_text() == OLD and _leftovers(target.parent) == []


def test_a_completed_write_replaces_the_file_and_keeps_its_mode(target):
    target.chmod(0o640)
    write_text_atomic(target, iter(["new ", "result\n"]))
    assert target.read_text() == "new result\n"
    assert target.stat().st_mode & 0o777 == 0o640 and _leftovers(target.parent) == []


def test_a_new_file_is_owner_only_unless_it_is_not_private(tmp_path):
    write_text_atomic(tmp_path / "mine.json", "{}")
    write_text_atomic(tmp_path / "shared.json", "{}", private=False)
    assert (tmp_path / "mine.json").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "shared.json").stat().st_mode & 0o777 == 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.fixture
def big_text(tmp_path: Path) -> Path:
    path = tmp_path / "big.txt"
    with open(path, "w") as handle:
        for block in range(60):
            handle.write(" ".join(f"w{block}x{i}" for i in range(50_000)) + "\n")
    return path  # about 40 MB: its chunks JSON takes seconds to write


def _limit_file_size() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))


def test_a_write_cut_off_by_the_file_size_limit_is_one_line_and_keeps_the_old_file(big_text, target):
    proc = subprocess.run([*CLI, "chunk", str(big_text), "-o", str(target)], capture_output=True, text=True,
                          preexec_fn=_limit_file_size, timeout=300)
    assert proc.returncode == 1 and proc.stderr.startswith("Error: cannot write") and proc.stderr.count("\n") == 1
    assert target.read_text() == OLD and _leftovers(target.parent) == []


def test_a_writer_killed_midway_leaves_the_old_file(big_text, target):
    proc = subprocess.Popen([*CLI, "chunk", str(big_text), "-o", str(target)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:  # kill once a good part of the new output is on disk
            written = [p for p in target.parent.iterdir() if p.name.startswith(".out.json.")]
            if (written and written[0].stat().st_size > 2_000_000) or target.read_text() != OLD:
                break
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "the writer finished before it could be killed"
    assert target.read_text() == OLD
