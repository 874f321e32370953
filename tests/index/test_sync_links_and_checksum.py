"""Sources named by their resolved path, and ``sync(checksum=True)``, on a local index and on Milvus Lite.

A folder synced through a link to it is the folder it points to (nothing is added again, an edit
replaces the old text); a link to a file beside it is that file, held once; an index whose stored
paths have become links keeps matching its files; an edit that keeps a file's size and time is
missed by the fast check and found by the content hash.
"""

import os

import pytest

from meteora_edge import HashingEncoder
from meteora_edge.index.corpus import read_documents
from meteora_edge.index.local_index import LocalIndex

ENC = HashingEncoder()


def _local(tmp_path, docs):
    return LocalIndex.build(tmp_path / "ix", docs, ENC, chunk_size=6, overlap=0)


def _milvus(tmp_path, docs):
    pytest.importorskip("pymilvus")
    pytest.importorskip("milvus_lite")
    from meteora_edge.index.milvus_index import MilvusIndex
    from meteora_edge.index.milvus_location import milvus_location

    return MilvusIndex.build(milvus_location(str(tmp_path / "notes.db")), docs, ENC, chunk_size=6, overlap=0)


BACKENDS = [pytest.param(_local, id="local"), pytest.param(_milvus, id="milvus")]


def _texts(index):
    if isinstance(index, LocalIndex):
        return sorted(r["text"] for r in index.records(index.live_ids()))
    return sorted(r["text"] for r in index.each_record())


def _close(index):
    if not isinstance(index, LocalIndex):
        index.close()


@pytest.fixture
def notes(tmp_path):
    folder = tmp_path / "real" / "notes"
    folder.mkdir(parents=True)
    (folder / "terms.md").write_text("Either party may terminate the agreement on ninety (90) days notice.")
    (folder / "fees.md").write_text("Fees are payable monthly within thirty days of the invoice.")
    return folder


@pytest.mark.parametrize("build", BACKENDS)
def test_a_sync_through_a_link_to_the_folder_adds_nothing_and_replaces_an_edit(build, notes, tmp_path):
    link = tmp_path / "link"
    link.symlink_to(notes, target_is_directory=True)
    index = build(tmp_path, read_documents([notes]))
    before = len(index)
    index = index.sync([link], ENC)
    assert (index.added_chunks, index.removed_chunks, len(index)) == (0, 0, before)
    (link / "terms.md").write_text("Either party may terminate the agreement on fourteen days notice.")
    index = index.sync([link], ENC)
    texts = " ".join(_texts(index))
    assert "fourteen" in texts and "ninety" not in texts and len(index) == before
    assert sorted(index.sources) == sorted(os.path.realpath(notes / n) for n in ("fees.md", "terms.md"))
    _close(index)


@pytest.mark.parametrize("build", BACKENDS)
def test_a_link_to_a_file_beside_it_is_one_source(build, notes, tmp_path):
    (notes / "alias.md").symlink_to(notes / "terms.md")
    index = build(tmp_path, read_documents([notes]))
    assert len(index.sources) == 2 and sum("ninety" in t for t in _texts(index)) == 1
    index = index.sync([notes], ENC)
    assert (index.added_chunks, index.removed_chunks) == (0, 0)
    _close(index)


@pytest.mark.parametrize("build", BACKENDS)
def test_stored_paths_that_became_links_keep_matching_their_files(build, notes, tmp_path):
    index = build(tmp_path, read_documents([notes]))
    before = len(index)
    _close(index)
    moved = tmp_path / "moved"
    notes.rename(moved)
    notes.symlink_to(moved, target_is_directory=True)  # the stored keys now pass through a link
    index = LocalIndex.load(tmp_path / "ix") if build is _local else _reopen(tmp_path)
    assert sorted(index.sources) == sorted(str(moved / n) for n in ("fees.md", "terms.md"))
    index = index.sync([notes], ENC)
    assert (index.added_chunks, index.removed_chunks, len(index)) == (0, 0, before)
    _close(index)


def _reopen(tmp_path):
    from meteora_edge.index.milvus_index import MilvusIndex
    from meteora_edge.index.milvus_location import milvus_location

    return MilvusIndex.open(milvus_location(str(tmp_path / "notes.db")))


@pytest.mark.parametrize("build", BACKENDS)
def test_checksum_finds_an_edit_that_keeps_size_and_time(build, notes, tmp_path):
    index = build(tmp_path, read_documents([notes]))
    terms = notes / "terms.md"
    info = terms.stat()
    terms.write_text("Either party may terminate the agreement on ninety (80) days notice.")  # same size
    os.utime(terms, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert terms.stat().st_size == info.st_size
    index = index.sync([notes], ENC)
    assert (index.added_chunks, index.removed_chunks) == (0, 0)  # the fast check cannot see it
    index = index.sync([notes], ENC, checksum=True)
    assert index.removed_chunks > 0 and "(80)" in " ".join(_texts(index)) and "(90)" not in " ".join(_texts(index))
    index = index.sync([notes], ENC, checksum=True)  # nothing changed: nothing is written
    assert (index.added_chunks, index.removed_chunks) == (0, 0)
    _close(index)


def test_an_index_that_holds_a_file_twice_under_two_paths_is_healed_by_the_next_sync(notes, tmp_path, monkeypatch):
    link = tmp_path / "link"
    link.symlink_to(notes, target_is_directory=True)
    with monkeypatch.context() as old:  # keys by unresolved path, as before, so the link adds every file again
        old.setattr(os.path, "realpath", lambda path, **_: os.path.abspath(path))
        index = _local(tmp_path, read_documents([notes]))
        index = index.sync([link], ENC)
        assert len(index.sources) == 4 and sum("ninety" in t for t in _texts(index)) == 2
    index = LocalIndex.load(tmp_path / "ix")
    assert len(index.sources) == 2  # the two paths of each file are one source again
    index = index.sync([link], ENC)
    texts = _texts(index)
    assert sum("ninety" in t for t in texts) == 1 and len(texts) == len(set(texts)) and len(index.sources) == 2
