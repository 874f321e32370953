"""Only generation folders this index wrote are removed or count as leftovers; a folder merely
named like a generation is somebody's data and stays untouched (D2)."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from meteora_edge import HashingEncoder
from meteora_edge.cli.main import main
from meteora_edge.errors import InputError
from meteora_edge.index.corpus import SourceDocument
from meteora_edge.index.generations import GENERATION_MARKER, GenerationWriter, target_state
from meteora_edge.index.local_index import LocalIndex

ENC = HashingEncoder()
DOCS = [SourceDocument("a", "Either party may terminate."), SourceDocument("b", "Fees are payable monthly.")]
GEN = "gen-000001-0123abcd"


def _users_folder(root):
    (root / GEN).mkdir(parents=True)
    (root / GEN / "thesis.md").write_text("years of work")
    (root / "gen-000002-89abcdef").mkdir()
    (root / "gen-000002-89abcdef" / "vectors.npy").write_bytes(b"a backup")
    return root


def test_a_folder_of_generation_named_folders_is_not_free(tmp_path):
    root = _users_folder(tmp_path / "out")
    with pytest.raises(InputError, match=rf"not a meteora-edge index \(it holds '{GEN}' and 1 more\)"):
        target_state(root)


def test_build_refuses_it_untouched_with_and_without_overwrite(tmp_path):
    root = _users_folder(tmp_path / "out")
    for overwrite in (False, True):
        with pytest.raises(InputError, match="refusing to touch it"):
            LocalIndex.build(root, DOCS, ENC, overwrite=overwrite)
    assert (root / GEN / "thesis.md").read_text() == "years of work"
    assert sorted(os.listdir(root)) == [GEN, "gen-000002-89abcdef"]


def test_the_cli_refuses_it_in_one_line(tmp_path):
    root = _users_folder(tmp_path / "out")
    source = tmp_path / "doc.txt"
    source.write_text("Either party may terminate the agreement.")
    result = CliRunner().invoke(main, ["index", "build", str(source), "--out", str(root)])
    assert result.exit_code == 1 and result.output.count("\n") == 1 and "refusing to touch it" in result.output
    assert sorted(os.listdir(root)) == [GEN, "gen-000002-89abcdef"]


def test_every_generation_carries_a_marker_naming_it(tmp_path):
    index = LocalIndex.build(tmp_path / "ix", DOCS, ENC)
    marker = json.loads((tmp_path / "ix" / index.generation / GENERATION_MARKER).read_text())
    assert marker == {"format": "meteora-edge-index", "generation": index.generation}


def test_a_killed_first_builds_marked_generation_is_free_and_removed(tmp_path):
    root = tmp_path / "ix"
    root.mkdir()
    half = GenerationWriter(root, None)  # a writer killed mid-way: marker and one file, no pointer
    half.write_bytes("vectors.npy", b"half")
    assert target_state(root) == "free"
    index = LocalIndex.build(root, DOCS, ENC)
    assert sorted(os.listdir(root)) == [".writer.lock", index.generation, "manifest.json"]


def test_a_copied_marker_does_not_make_another_folder_ours(tmp_path):
    """The marker names its own folder: a marker copied into a folder of another name proves nothing."""
    root = tmp_path / "out"
    (root / GEN).mkdir(parents=True)
    other = GenerationWriter(tmp_path, None)
    (root / GEN / GENERATION_MARKER).write_bytes((other.folder / GENERATION_MARKER).read_bytes())
    (root / GEN / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="refusing to touch it"):
        target_state(root)


def test_inside_an_index_a_stranger_named_like_a_generation_stays(tmp_path):
    root = tmp_path / "ix"
    index = LocalIndex.build(root, DOCS[:1], ENC)
    (root / GEN).mkdir()
    (root / GEN / "thesis.md").write_text("years of work")
    old = GenerationWriter(root, index.generation)  # an unmarked generation of an older version: only index files
    (old.folder / GENERATION_MARKER).unlink()
    old.write_bytes("vectors.npy", b"half")
    grown = index.add(DOCS[1:], ENC)
    assert sorted(os.listdir(root)) == [".writer.lock", GEN, grown.generation, "manifest.json"]
    assert (root / GEN / "thesis.md").read_text() == "years of work"


def test_a_non_empty_lock_file_is_not_a_leftover(tmp_path):
    (tmp_path / ".writer.lock").write_text("my notes")
    with pytest.raises(InputError, match=r"it holds '.writer.lock'"):
        target_state(tmp_path)
