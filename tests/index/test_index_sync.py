"""An index that follows its files: sync (add, change, delete, rename), remove, replace on add,
delta segments read as one index, compaction, old formats, and the self-indexing guard."""

import json
import os
import shutil

import numpy as np
import pytest

from meteora_edge import HashingEncoder
from meteora_edge.errors import InputError
from meteora_edge.index import segments
from meteora_edge.index.corpus import SourceDocument, read_documents
from meteora_edge.index.local_index import LocalIndex

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
    return LocalIndex.build(tmp_path / "ix", read_documents([notes]), encoder, chunk_size=6, overlap=0)


def _texts(index):
    return sorted(r["text"] for r in index.records(index.live_ids()))


def _labels(index):
    return sorted(os.path.basename(e.label) for e in index.sources.values())


def test_sync_adds_replaces_and_removes_and_a_rename_reuses_the_vectors(notes, tmp_path):
    enc = CountingEncoder()
    index = _build(notes, tmp_path, enc)
    enc.texts.clear()
    (notes / "terms.md").write_text("Either party may terminate the agreement on fourteen days notice.")
    (notes / "law.md").unlink()
    (notes / "fees.md").rename(notes / "payment.md")
    (notes / "new.md").write_text("Notices must be given in writing.")
    synced = index.sync([notes], enc)
    assert _labels(synced) == ["new.md", "payment.md", "terms.md"]
    rebuilt = LocalIndex.build(tmp_path / "fresh", read_documents([notes]), ENC, chunk_size=6, overlap=0)
    assert _texts(synced) == _texts(rebuilt)
    # only the changed and the new file were embedded; the renamed one kept its vectors
    assert sorted(enc.texts) == sorted(r["text"] for r in rebuilt.records(range(len(rebuilt)))
                                       if "Fees" not in r["text"] and "payable" not in r["text"]
                                       and "invoice" not in r["text"])
    payment = [i for i in synced.live_ids() if synced.records([i])[0]["file"].endswith("payment.md")]
    np.testing.assert_allclose(synced.vectors_for(payment), ENC.encode([r["text"] for r in synced.records(payment)]),
                               atol=1e-6)
    assert synced.removed_chunks == len(index)  # every old file was changed, renamed or deleted
    assert synced.sync([notes], enc).generation == synced.generation  # nothing changed: nothing written


def test_stale_text_is_gone_after_an_edit(notes, tmp_path):
    index = _build(notes, tmp_path)
    (notes / "terms.md").write_text("Either party may terminate the agreement on fourteen days notice.")
    for updated in (index.add(read_documents([notes / "terms.md"]), ENC), index.sync([notes], ENC)):
        texts = " ".join(_texts(updated))
        assert "fourteen" in texts and "ninety" not in texts
        ids, _ = updated.bm25_search("ninety days", 10)
        assert all("ninety" not in r["text"] for r in updated.records(ids))
        dense, _ = updated.search(ENC.encode(["ninety (90) days notice"])[0], 10)
        assert all("ninety" not in r["text"] for r in updated.records(dense))


def test_a_touched_but_unchanged_file_only_updates_its_time(notes, tmp_path):
    index = _build(notes, tmp_path)
    os.utime(notes / "law.md", ns=(10**18, 10**18))
    touched = index.sync([notes], ENC)
    assert touched.added_chunks == 0 and touched.removed_chunks == 0 and len(touched) == len(index)
    entry = next(e for k, e in touched.sources.items() if k.endswith("law.md"))
    assert entry.mtime_ns == 10**18


def test_sync_leaves_sources_outside_its_folders_alone(notes, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "x.md").write_text("Unrelated text about shipping.")
    index = _build(notes, tmp_path).add(read_documents([other]), ENC)
    (notes / "law.md").unlink()
    synced = index.sync([notes], ENC)
    assert _labels(synced) == ["fees.md", "terms.md", "x.md"]


def test_remove_by_path_label_or_folder_and_errors(notes, tmp_path):
    index = _build(notes, tmp_path)
    left = index.remove([str(notes / "law.md")])
    assert _labels(left) == ["fees.md", "terms.md"] and len(left) < len(index)
    with pytest.raises(InputError, match=r"^nowhere\.md is not a source of the index at .* \(nothing was removed\)$"):
        left.remove(["nowhere.md"])
    with pytest.raises(InputError, match="would remove every chunk"):
        left.remove([str(notes)])
    assert _labels(LocalIndex.load(tmp_path / "ix")) == ["fees.md", "terms.md"]
    with pytest.raises(InputError, match="was removed from the index"):
        left.records([i for i in range(left.id_count) if i not in set(left.live_ids())][:1])


def test_bm25_over_base_and_delta_scores_as_one_index(notes, tmp_path):
    """Without removed chunks the combined statistics are those of one index of the same chunks."""
    docs = read_documents([notes])
    grown = LocalIndex.build(tmp_path / "ix", docs[:1], ENC, chunk_size=6, overlap=0).add(docs[1:], ENC)
    assert grown.manifest["segments"]["delta"] > 0
    whole = LocalIndex.build(tmp_path / "whole", docs, ENC, chunk_size=6, overlap=0)
    assert [r["text"] for r in grown.records(range(len(grown)))] == [r["text"] for r in whole.records(range(len(whole)))]
    for query in ("agreement days", "fees invoice monthly", "laws of Ireland"):
        ids, scores = grown.bm25_search(query, 10)
        expected_ids, expected = whole.bm25_search(query, 10)
        np.testing.assert_array_equal(ids, expected_ids)
        np.testing.assert_allclose(scores, expected, rtol=1e-5)
        np.testing.assert_allclose(grown.lexical_scores(query, range(len(grown))),
                                   whole.lexical_scores(query, range(len(whole))), rtol=1e-5)


def test_compaction_drops_removed_chunks_and_renumbers(notes, tmp_path, monkeypatch):
    index = _build(notes, tmp_path)
    (notes / "terms.md").write_text("Either party may terminate the agreement on fourteen days notice.")
    synced = index.sync([notes], ENC)
    assert synced.manifest["segments"]["deleted"] > 0
    compacted = synced.compact()
    assert compacted.manifest["segments"] == {"base": len(synced), "delta": 0, "deleted": 0}
    assert compacted.records(range(len(compacted))) and _texts(compacted) == _texts(synced)
    assert sorted(i for e in compacted.sources.values() for i in e.chunk_ids()) == list(range(len(compacted)))
    # past the threshold an update compacts by itself
    monkeypatch.setattr(segments, "COMPACT_MIN_CHUNKS", 0)
    monkeypatch.setattr(segments, "COMPACT_FRACTION", 0.0)
    (notes / "fees.md").write_text("Fees are payable weekly.")
    auto = compacted.sync([notes], ENC)
    assert auto.manifest["segments"]["delta"] == 0 and auto.manifest["last_write"]["op"] == "sync"
    assert "weekly" in " ".join(_texts(auto))


def _as_format2(root):
    """Turn a fresh build into the format-2 layout (no source table, no segments)."""
    pointer = json.loads((root / "manifest.json").read_text())
    gen = root / pointer["generation"]
    manifest = json.loads((gen / "manifest.json").read_text())
    del manifest["segments"], manifest["files"]["sources.json"]
    (gen / "sources.json").unlink()
    manifest["format_version"] = 2
    (gen / "manifest.json").write_text(json.dumps(manifest))
    (root / "manifest.json").write_text(json.dumps({**pointer, "format_version": 2}))


def test_a_format2_index_opens_and_its_first_sync_migrates_it(notes, tmp_path):
    index = _build(notes, tmp_path)
    _as_format2(tmp_path / "ix")
    old = LocalIndex.load(tmp_path / "ix", encoder=ENC)
    assert old.manifest["format_version"] == 2 and len(old) == len(index)
    assert old.info()["sources"] == 3
    assert _labels(old) == ["fees.md", "law.md", "terms.md"]  # rebuilt from the records
    (notes / "law.md").unlink()
    synced = old.sync([notes], ENC)
    assert synced.manifest["format_version"] == 3 and _labels(synced) == ["fees.md", "terms.md"]
    assert "Ireland" not in " ".join(_texts(synced))


def test_index_folders_are_never_read_as_input(notes, tmp_path):
    """An index inside the folder it indexes (or any index folder met on the way) is skipped."""
    skipped = []
    first = LocalIndex.build(notes / "ix", read_documents([notes]), ENC)
    again = read_documents([notes], on_skip=lambda path, reason: skipped.append((path.name, reason)))
    assert len(again) == 3 == first.info()["documents"]
    assert skipped == [("ix", "a meteora-edge index folder (index folders are never read as input)")]
    nested = tmp_path / "deep" / "copy"
    shutil.copytree(notes / "ix", nested)
    assert len(read_documents([notes, tmp_path / "deep"], on_skip=lambda *a: None)) == 3
    with pytest.raises(InputError, match="hold no text"):
        read_documents([nested], on_skip=lambda *a: None)
    synced = first.sync([notes], ENC)
    assert synced.generation == first.generation and synced.info()["documents"] == 3


def test_add_of_a_jsonl_file_with_one_changed_record_reuses_the_rest(tmp_path):
    enc = CountingEncoder()
    path = tmp_path / "faq.jsonl"
    rows = [{"id": f"q{i}", "text": f"Question {i} answer about topic {i}."} for i in range(3)]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    index = LocalIndex.build(tmp_path / "ix", read_documents([path]), enc, chunk_size=50, overlap=0)
    enc.texts.clear()
    rows[1]["text"] = "Question 1 has a new answer."
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    grown = index.add(read_documents([path]), enc)
    assert enc.texts == ["Question 1 has a new answer."]
    assert len(grown) == 3 and grown.removed_chunks == 3 and grown.added_chunks == 3
