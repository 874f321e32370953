"""Walking input folders: links that leave the inputs are skipped unless asked (S2), every
non-file gets its own reason (M3), and any depth works (T2)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from meteora_edge.cli.main import main
from meteora_edge.errors import InputError
from meteora_edge.index import corpus
from meteora_edge.index.corpus import read_documents


def _read(paths, **kwargs):
    seen: dict[str, str] = {}
    docs = read_documents(paths, on_skip=lambda path, reason: seen.setdefault(path.name, reason), **kwargs)
    return [d.text for d in docs], seen


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "policy.md").write_text("Returns are accepted within thirty days.")
    (tmp_path / "secret.txt").write_text("root:x:0:0:the secret")
    return folder


def test_a_link_leaving_the_inputs_is_skipped_with_its_target(docs, tmp_path):
    (docs / "x.txt").symlink_to(tmp_path / "secret.txt")
    texts, seen = _read([docs])
    assert texts == ["Returns are accepted within thirty days."]
    assert seen == {"x.txt": f"a link to {tmp_path / 'secret.txt'}, outside the folders being indexed "
                             "(--follow-links indexes it)"}


def test_follow_links_indexes_it(docs, tmp_path):
    (docs / "x.txt").symlink_to(tmp_path / "secret.txt")
    texts, seen = _read([docs], follow_links=True)
    assert texts == ["Returns are accepted within thirty days.", "root:x:0:0:the secret"] and seen == {}


def test_a_link_inside_the_inputs_is_read(docs):
    (docs / "sub" / "again.md").symlink_to(docs / "policy.md")
    (docs / "sub" / "relative.md").symlink_to(Path("..") / "policy.md")
    texts, seen = _read([docs])
    assert texts == ["Returns are accepted within thirty days."] * 3 and seen == {}


def test_a_link_into_another_input_folder_is_still_outside_its_own(docs, tmp_path):
    """Each folder's links are judged against that folder: naming the target's folder too does not widen it."""
    (docs / "x.txt").symlink_to(tmp_path / "secret.txt")
    texts, seen = _read([docs, tmp_path / "secret.txt"])
    assert texts.count("root:x:0:0:the secret") == 1 and "outside" in seen["x.txt"]


def test_a_named_link_is_read_wherever_it_points(docs, tmp_path):
    (tmp_path / "named.txt").symlink_to(tmp_path / "secret.txt")
    assert _read([tmp_path / "named.txt"]) == (["root:x:0:0:the secret"], {})


def test_a_folder_given_as_a_link_is_walked(docs, tmp_path):
    (tmp_path / "alias").symlink_to(docs)
    assert _read([tmp_path / "alias"]) == (["Returns are accepted within thirty days."], {})


def test_each_kind_of_non_file_gets_its_own_reason(docs, tmp_path):
    (docs / "folder-link").symlink_to(tmp_path)
    (docs / "null.txt").symlink_to("/dev/null")
    (docs / "gone.txt").symlink_to(tmp_path / "nowhere.txt")
    os.mkfifo(docs / "pipe.txt")
    (docs / "sub" / "fifo-link.txt").symlink_to(docs / "pipe.txt")
    texts, seen = _read([docs])
    assert texts == ["Returns are accepted within thirty days."]
    assert seen == {
        "folder-link": "a link to a folder (links to folders are not followed; give the folder itself to index it)",
        "null.txt": "a link to a device, not a file",
        "gone.txt": "a broken link",
        "pipe.txt": "a FIFO (named pipe), not a file",
        "fifo-link.txt": "a link to a FIFO (named pipe), not a file",
    }


def test_strict_fails_on_a_fifo(docs):
    os.mkfifo(docs / "pipe.txt")
    with pytest.raises(InputError, match=r"pipe\.txt: a FIFO \(named pipe\), not a file \(--strict\)"):
        read_documents([docs], strict=True)


def test_a_file_vanishing_after_the_listing_is_reported(docs, monkeypatch):
    (docs / "brief.md").write_text("Short and gone.")
    real = corpus._file_documents

    def vanish_first(path, **kwargs):
        if path.name == "brief.md":
            path.unlink()
        return real(path, **kwargs)

    monkeypatch.setattr(corpus, "_file_documents", vanish_first)
    texts, seen = _read([docs])
    assert texts == ["Returns are accepted within thirty days."]
    assert seen == {"brief.md": "it vanished before it could be read"}


def test_an_entry_vanishing_during_the_walk_is_reported(docs, monkeypatch):
    (docs / "brief.md").write_text("Short and gone.")
    real = os.lstat

    def lstat(path, *args, **kwargs):
        if Path(path).name == "brief.md":
            Path(path).unlink(missing_ok=True)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "lstat", lstat)
    texts, seen = _read([docs])
    assert seen == {"brief.md": "it vanished while the folder was read"}


def test_a_thousand_levels_deep_folder_is_indexed(tmp_path):
    deep = tmp_path / "deep"
    leaf = str(deep)
    os.mkdir(leaf)
    for _ in range(1000):  # one level at a time: os.makedirs itself recurses
        leaf += "/d"
        os.mkdir(leaf)
    leaf = Path(leaf)
    try:
        (leaf / "bottom.txt").write_text("Deep down the clause still binds.")
        (deep / "top.txt").write_text("Near the top.")
        texts, seen = _read([deep])
        assert texts == ["Deep down the clause still binds.", "Near the top."] and seen == {}
        result = CliRunner().invoke(main, ["index", "build", str(deep), "--out", str(tmp_path / "ix")])
        assert result.exit_code == 0 and "Traceback" not in result.output, result.output
        assert "indexed 2 documents from 2 files" in result.output
    finally:  # bottom-up, pass or fail: pytest's clean-up (shutil.rmtree) recurses and fails on such a tree
        (leaf / "bottom.txt").unlink(missing_ok=True)
        for folder in [leaf, *leaf.parents][:1000]:
            folder.rmdir()


def test_the_cli_warns_per_link_and_follows_on_request(docs, tmp_path):
    (docs / "x.txt").symlink_to(tmp_path / "secret.txt")
    runner = CliRunner()
    result = runner.invoke(main, ["index", "build", str(docs), "--out", str(tmp_path / "ix")])
    assert result.exit_code == 0, result.output
    assert (f"warning: skipped {docs / 'x.txt'}: a link to {tmp_path / 'secret.txt'}, outside the folders being "
            "indexed (--follow-links indexes it)") in result.output
    assert "indexed 1 document from 1 file into 1 chunk " in result.output
    result = runner.invoke(main, ["index", "add", str(tmp_path / "ix"), str(docs), "--follow-links"])
    assert result.exit_code == 0 and "warning" not in result.output, result.output
    assert "added 1 chunk;" in result.output
