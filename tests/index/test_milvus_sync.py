"""A Milvus collection that follows its files, on Milvus Lite (the real engine) in a tmp folder:
sync (add, change, delete, rename, touch), remove, add replacing a changed file, and a collection
written before sources were tracked (format 1), which opens as it was and is migrated by its first write."""

import os

import numpy as np
import pytest

from meteora_edge import HashingEncoder
from meteora_edge.errors import CollectionError, InputError
from meteora_edge.index.corpus import SourceDocument, read_documents
from meteora_edge.index.milvus_location import milvus_location

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")
from meteora_edge.index import milvus_collection, milvus_index, milvus_updates  # noqa: E402
from meteora_edge.index.milvus_index import MilvusIndex  # noqa: E402

ENC = HashingEncoder()


class CountingEncoder(HashingEncoder):
    """The hashing encoder, counting the texts it embeds."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def encode(self, texts):
        self.texts += list(texts)
        return super().encode(texts)


@pytest.fixture
def notes(tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "terms.md").write_text("Either party may terminate the agreement on ninety (90) days notice.")
    (folder / "fees.md").write_text("Fees are payable monthly within thirty days of the invoice.")
    (folder / "law.md").write_text("The agreement is governed by the laws of Ireland.")
    return folder


def _build(notes, tmp_path, encoder=ENC):
    return MilvusIndex.build(milvus_location(str(tmp_path / "notes.db")), read_documents([notes]), encoder,
                             chunk_size=6, overlap=0)


def _texts(index):
    return sorted(r["text"] for r in index.each_record())


def _names(index):
    return sorted(os.path.basename(key) for key in index.sources)


def test_sync_adds_replaces_and_deletes_and_a_rename_reuses_the_vectors(notes, tmp_path):
    enc = CountingEncoder()
    index = _build(notes, tmp_path, enc)
    assert len(index) == 6 and _names(index) == ["fees.md", "law.md", "terms.md"]
    fees = next(e for k, e in index.sources.items() if k.endswith("fees.md"))
    fees_vectors = index.vectors_for(fees.chunk_ids())
    enc.texts.clear()
    (notes / "terms.md").write_text("Either party may terminate the agreement on fourteen days notice.")
    (notes / "law.md").unlink()
    (notes / "fees.md").rename(notes / "payment.md")
    (notes / "plan.md").write_text("Ship the release in May.")
    assert index.sync([notes], enc) is index
    assert (index.added_chunks, index.removed_chunks) == (5, 6) and len(index) == 5
    assert _names(index) == ["payment.md", "plan.md", "terms.md"]
    texts = " ".join(_texts(index))
    assert "fourteen" in texts and "ninety" not in texts and "Ireland" not in texts
    # the renamed file's chunks were not embedded again: their stored vectors came along
    assert not any("Fees" in t or "invoice" in t for t in enc.texts) and any("fourteen" in t for t in enc.texts)
    payment = next(e for k, e in index.sources.items() if k.endswith("payment.md"))
    np.testing.assert_allclose(index.vectors_for(payment.chunk_ids()), fees_vectors, atol=1e-6)
    # new chunks never take a deleted chunk's id; search and records see the new state
    assert min(i for e in index.sources.values() for i in e.chunk_ids()) >= 0 and index.next_id == 11
    ids, _ = index.search(ENC.encode(["terminate on fourteen days notice"])[0], 3)
    assert "fourteen" in index.records([int(ids[0])])[0]["text"]
    assert "fourteen" in index.records(index.bm25_search("fourteen days", 1)[0].tolist())[0]["text"]
    # a second sync with nothing changed writes nothing and embeds nothing
    enc.texts.clear()
    index.sync([notes], enc)
    assert (index.added_chunks, index.removed_chunks, enc.texts) == (0, 0, [])
    reopened = MilvusIndex.open(index.location)
    assert len(reopened) == 5 and _texts(reopened) == _texts(index) and reopened.next_id == 11
    reopened.close()
    index.close()


def test_a_touched_file_that_reads_the_same_is_not_embedded_and_gets_its_new_time(notes, tmp_path):
    enc = CountingEncoder()
    index = _build(notes, tmp_path, enc)
    enc.texts.clear()
    stamp = (notes / "law.md").stat().st_mtime_ns + 5_000_000_000
    os.utime(notes / "law.md", ns=(stamp, stamp))
    index.sync([notes], enc)
    assert (index.added_chunks, index.removed_chunks, enc.texts) == (0, 0, []) and len(index) == 6
    law = next(e for k, e in index.sources.items() if k.endswith("law.md"))
    assert law.mtime_ns == stamp and law.sha256 is not None
    index.close()


def test_sync_leaves_sources_outside_its_paths_and_refuses_a_missing_path(notes, tmp_path):
    index = _build(notes, tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "x.md").write_text("Zebras graze in the quiet meadow at dawn.")
    index.sync([other], ENC)
    assert index.added_chunks == 2 and len(index) == 8 and "x.md" in _names(index)
    with pytest.raises(InputError, match="nowhere"):
        index.sync([tmp_path / "nowhere"], ENC)
    assert len(index) == 8
    index.close()


def test_remove_by_path_folder_or_label_and_refusals(notes, tmp_path):
    index = _build(notes, tmp_path)
    index.remove([str(notes / "fees.md")])
    assert index.removed_chunks == 2 and len(index) == 4 and _names(index) == ["law.md", "terms.md"]
    with pytest.raises(InputError, match="fees.md is not a source of collection .*nothing was removed"):
        index.remove([str(notes / "fees.md"), str(notes / "law.md")])
    assert len(index) == 4  # a name that matches nothing: nothing was removed
    with pytest.raises(InputError, match="would delete every chunk"):
        index.remove([str(notes)])
    assert len(index) == 4
    label = next(e.label for e in index.sources.values() if e.key.endswith("law.md"))
    index.remove([label])
    assert _names(index) == ["terms.md"] and len(index) == 2
    assert "Ireland" not in " ".join(_texts(index))
    index.close()


def test_add_replaces_a_changed_file_and_leaves_out_an_unchanged_one(notes, tmp_path):
    index = _build(notes, tmp_path)
    assert index.add(read_documents([notes / "terms.md"]), ENC) == 0 and index.left_out_documents == 1
    (notes / "terms.md").write_text("Either party may terminate the agreement on seven days notice.")
    assert index.add(read_documents([notes / "terms.md"]), ENC) == 2 and index.removed_chunks == 2
    texts = " ".join(_texts(index))
    assert "seven" in texts and "ninety" not in texts and len(index) == 6
    # a new file whose text the collection holds already is left out; --allow-duplicates appends it
    (notes / "copy.md").write_text((notes / "law.md").read_text())
    assert index.add(read_documents([notes / "copy.md"]), ENC) == 0 and index.left_out_documents == 1
    assert index.add(read_documents([notes / "copy.md"]), ENC, allow_duplicates=True) == 2 and len(index) == 8
    index.add([SourceDocument("note", "Zebras graze at dawn.", {"k": 1})], ENC)
    assert index.added_chunks == 1 and "id:note" in index.sources
    with pytest.raises(CollectionError, match="encoder"):
        index.add(read_documents([notes]), _Other())
    index.close()


class _Other(HashingEncoder):
    identity = "other:384"


def _format_1(notes, tmp_path, monkeypatch):
    """A collection as format 1 wrote it: no source fields, no next id, format_version 1."""
    monkeypatch.setattr(milvus_collection, "add_source_fields", lambda *args: None)
    monkeypatch.setattr(milvus_index, "document_columns", lambda documents: [{} for _ in documents])
    index = _build(notes, tmp_path)
    name = index.location.collection
    index.client.drop_collection_properties(name, property_keys=[milvus_updates.NEXT_ID])
    index.client.alter_collection_properties(name, properties={"meteora_edge.format_version": "1"})
    location = index.location
    index.close()
    monkeypatch.undo()
    return location


def test_a_format_1_collection_reads_as_before_and_its_first_write_migrates_it(notes, tmp_path, monkeypatch):
    location = _format_1(notes, tmp_path, monkeypatch)
    old = MilvusIndex.open(location, encoder=ENC)
    before = _texts(old)
    assert not old.tracks_sources and old.info()["format_version"] == 1 and old.next_id == 6
    assert _names(old) == ["fees.md", "law.md", "terms.md"]  # keyed by file, size and hash unknown
    assert all(e.sha256 is None for e in old.sources.values())
    old.close()
    enc = CountingEncoder()
    index = MilvusIndex.open(location)
    (notes / "terms.md").write_text("Either party may terminate the agreement on fourteen days notice.")
    index.sync([notes], enc)
    assert index.tracks_sources and index.info()["format_version"] == 2
    assert index.client.list_collections() == [location.collection]  # the copy was switched in, nothing left
    texts = _texts(index)
    assert len(texts) == 6 and "fourteen" in " ".join(texts) and [t for t in texts if "Ireland" in t] == [
        t for t in before if "Ireland" in t]
    # every file was read again once (its hash was unknown), but only the changed text was embedded
    assert enc.texts and all("fourteen" in t or "terminate" in t or "Either" in t for t in enc.texts)
    assert all(e.sha256 is not None and e.mtime_ns for e in index.sources.values())
    enc.texts.clear()
    index.sync([notes], enc)
    assert (index.added_chunks, index.removed_chunks, enc.texts) == (0, 0, [])
    index.close()


def test_a_format_1_collection_gets_removes_and_adds_too(notes, tmp_path, monkeypatch):
    location = _format_1(notes, tmp_path, monkeypatch)
    with MilvusIndex.open(location) as index:
        index.remove([str(notes / "law.md")])
        assert index.removed_chunks == 2 and len(index) == 4 and index.tracks_sources
    with MilvusIndex.open(location) as index:
        assert index.add([SourceDocument("z", "Zebras graze at dawn.", {})], ENC) == 1
        assert index.records([6])[0]["text"] == "Zebras graze at dawn."  # after every id used before


def test_a_newer_format_is_refused_in_one_line(notes, tmp_path):
    index = _build(notes, tmp_path)
    index.client.alter_collection_properties(index.location.collection,
                                             properties={"meteora_edge.format_version": "3"})
    with pytest.raises(CollectionError, match=r"format version '3'; this meteora-edge reads up to 2"):
        MilvusIndex.open(index.location)
    index.close()


def test_each_write_plans_against_the_rows_as_they_are_now(notes, tmp_path):
    first = _build(notes, tmp_path)
    second = MilvusIndex.open(first.location, client=first.client)
    assert len(first.sources) == 3  # first has read (and cached) the table
    (notes / "plan.md").write_text("Ship the release in May.")
    second.sync([notes], ENC)
    assert second.added_chunks == 1
    first.remove([str(notes / "plan.md")])  # written by the other object: first sees it
    assert first.removed_chunks == 1 and len(first) == 6 and first.next_id == 7
    first.add([SourceDocument("z", "Zebras graze at dawn.", {})], ENC)
    assert first.records([7])[0]["text"] == "Zebras graze at dawn."  # never an id the other object used
    first.close()


def test_hash_lookups_split_a_query_that_reaches_milvus_s_limit(notes, tmp_path, monkeypatch):
    index = _build(notes, tmp_path)
    hashes = sorted({r["sha256"] for r in index.each_record()})
    monkeypatch.setattr(milvus_updates, "_TOP_K", 2)  # every query of more than one hash reaches the limit
    found = milvus_updates.rows_by_hash(index, [*hashes, "0" * 64], ["sha256", "vector"])
    assert sorted(found) == hashes and all(len(row["vector"]) == 384 for row in found.values())
    assert index.stored_hashes({hashes[0], "f" * 64}) == {hashes[0]}
    index.close()
