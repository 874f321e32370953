"""Whether a folder may receive a new index: free, an index to replace, or refused untouched with one exact line."""

from __future__ import annotations

import pytest

from meteora_edge.errors import InputError
from meteora_edge.index.corpus import SourceDocument
from meteora_edge.index.generations import WRITER_LOCK, target_state
from meteora_edge.index.local_index import LocalIndex
from meteora_edge.models.encoders import HashingEncoder

REFUSE = "refusing to touch it; choose another --out"


def _refusal(root):
    with pytest.raises(InputError) as caught:
        target_state(root)
    return str(caught.value)


def test_a_missing_folder_is_free(tmp_path):
    assert target_state(tmp_path / "new") == "free"


def test_an_empty_folder_is_free(tmp_path):
    assert target_state(tmp_path) == "free"


def test_what_a_killed_first_build_leaves_is_free(tmp_path):
    (tmp_path / WRITER_LOCK).write_bytes(b"")
    (tmp_path / "gen-000001-0123abcd").mkdir()
    (tmp_path / ".manifest.json.1234.tmp").write_bytes(b"{")
    assert target_state(tmp_path) == "free"


def test_an_index_is_an_index(tmp_path):
    LocalIndex.build(tmp_path / "ix", [SourceDocument("a", "one two three")], HashingEncoder(n_features=8))
    assert target_state(tmp_path / "ix") == "index"


def test_a_file_is_refused(tmp_path):
    (tmp_path / "f").write_text("keep me")
    assert _refusal(tmp_path / "f") == f"{tmp_path / 'f'} exists and is not a folder; {REFUSE}"
    assert (tmp_path / "f").read_text() == "keep me"


def test_a_foreign_manifest_is_refused(tmp_path):
    (tmp_path / "manifest.json").write_text('{"format": "something-else"}')
    assert _refusal(tmp_path) == f"{tmp_path} holds a manifest.json that is not a meteora-edge index; {REFUSE}"


def test_a_folder_with_one_other_file_names_it(tmp_path):
    (tmp_path / WRITER_LOCK).write_bytes(b"")
    (tmp_path / "notes.txt").write_text("x")
    assert _refusal(tmp_path) == (f"{tmp_path} is a folder that is not a meteora-edge index (it holds 'notes.txt'); "
                                  f"{REFUSE}")


def test_a_folder_with_other_files_names_the_first_and_counts_the_rest(tmp_path):
    for name in ("c.txt", "a.txt", "b"):
        (tmp_path / name).write_text("x")
    (tmp_path / "gen-000001-0123abcd").mkdir()
    assert _refusal(tmp_path) == (f"{tmp_path} is a folder that is not a meteora-edge index (it holds 'a.txt' "
                                  f"and 2 more); {REFUSE}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b", "c.txt", "gen-000001-0123abcd"]


def test_two_other_files_count_one_more(tmp_path):
    """With exactly two strangers the message names the first and counts the other one."""
    for name in ("b.txt", "a.txt"):
        (tmp_path / name).write_text("x")
    assert _refusal(tmp_path) == (f"{tmp_path} is a folder that is not a meteora-edge index (it holds 'a.txt' "
                                  f"and 1 more); {REFUSE}")
