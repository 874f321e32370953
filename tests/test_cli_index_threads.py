"""How many encoder threads the commands that embed a folder use when none is given."""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

from meteora_edge.cli import encoder_option, index_commands
from meteora_edge.cli.main import main

from repo_paths import EXAMPLES


@pytest.fixture()
def asked(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, bool]]:
    """The (threads, bulk) each command asks the encoder for; the hashing encoder still does the work."""
    seen: list[tuple[int, bool]] = []
    real = index_commands.encoder_from_options

    def spy(bundle, threads, precision, **kwargs):
        seen.append((threads, kwargs.get("bulk", False)))
        return real(bundle, threads, precision, **kwargs)

    monkeypatch.setattr(index_commands, "encoder_from_options", spy)
    return seen


@pytest.mark.parametrize("cores, expected", [(1, 1), (3, 3), (16, encoder_option.BUILD_THREADS_CAP)])
def test_build_add_and_sync_embed_on_the_usable_cores_by_default(tmp_path, monkeypatch, asked, cores, expected):
    monkeypatch.setattr(encoder_option, "usable_cores", lambda: cores)
    out = str(tmp_path / "ix")
    runner = CliRunner()
    assert runner.invoke(main, ["index", "build", str(EXAMPLES / "corpus" / "contract.md"), "--out", out]).exit_code == 0
    assert runner.invoke(main, ["index", "add", out, str(EXAMPLES / "corpus" / "handbook.md")]).exit_code == 0
    assert runner.invoke(main, ["index", "sync", out, str(EXAMPLES / "corpus")]).exit_code == 0
    assert asked == [(expected, True)] * 3


def test_threads_given_win_and_search_keeps_one(tmp_path, monkeypatch, asked):
    monkeypatch.setattr(encoder_option, "usable_cores", lambda: 8)
    out = str(tmp_path / "ix")
    runner = CliRunner()
    built = runner.invoke(main, ["index", "build", str(EXAMPLES / "corpus"), "--out", out, "--threads", "2"])
    assert built.exit_code == 0, built.output
    assert runner.invoke(main, ["index", "search", out, "-q", "notice"]).exit_code == 0
    assert asked == [(2, True), (1, False)]


def test_usable_cores_reads_the_affinity_mask():
    assert 1 <= encoder_option.usable_cores() <= (os.cpu_count() or 1)
