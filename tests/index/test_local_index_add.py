"""LocalIndex.add and records: embedding batches, the encoder check against the version current under
the lock, migrating a format-1 index of more than one read batch (4096 records), and the id range error."""

import hashlib
import json
import shutil

import numpy as np
import pytest

from meteora_edge import HashingEncoder
from meteora_edge.errors import InputError, LocalIndexError
from meteora_edge.index.corpus import SourceDocument
from meteora_edge.index.local_index import LocalIndex

ENC = HashingEncoder()
DOCS = [
    SourceDocument("a", "Either party may terminate the agreement on ninety days notice.", {}),
    SourceDocument("b", "Fees are payable monthly within thirty days of the invoice.", {}),
]


def _words(n: int, prefix: str) -> SourceDocument:
    return SourceDocument(prefix, " ".join(f"{prefix}{i}" for i in range(n)), {"n": n})


def test_add_embeds_64_chunks_at_a_time_by_default(tmp_path):
    index = LocalIndex.build(tmp_path / "ix", DOCS, ENC, chunk_size=1, overlap=0)  # a chunk per word
    calls = []
    grown = index.add([_words(130, "w")], ENC, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(64, 130), (128, 130), (130, 130)]
    assert len(grown) == len(index) + 130


def test_add_refuses_when_another_encoder_rebuilt_the_index_meanwhile(tmp_path):
    """`self` was opened with this encoder, but the index at its folder was rebuilt by another one since:
    the version current under the writer lock decides, so nothing is appended to the other encoder's vectors."""
    stale = LocalIndex.build(tmp_path / "ix", DOCS, ENC, chunk_size=4, overlap=0)
    other = HashingEncoder(n_features=128)
    rebuilt = LocalIndex.build(tmp_path / "ix", DOCS[:1], other, chunk_size=4, overlap=0, overwrite=True)
    with pytest.raises(LocalIndexError) as info:
        stale.add([SourceDocument("c", "Notice must be given in writing.", {})], ENC)
    assert str(info.value) == (f"index {tmp_path / 'ix'} was built with encoder 'hashing:128', not 'hashing:384'; "
                               "use the same --bundle or rebuild the index")
    now = LocalIndex.load(tmp_path / "ix", encoder=other)
    assert now.generation == rebuilt.generation and len(now) == len(rebuilt)


def _as_format1(root):
    """Turn a freshly built index into the format-1 layout (files and manifest at the top, no generation)."""
    pointer = json.loads((root / "manifest.json").read_text())
    generation = root / pointer["generation"]
    manifest = json.loads((generation / "manifest.json").read_text())
    del manifest["files"]["sources.json"]
    for name in manifest["files"]:
        shutil.move(str(generation / name), str(root / name))
    shutil.rmtree(generation)
    del manifest["last_write"], manifest["analyzer"], manifest["segments"]  # format 1 knows none of them
    manifest["format_version"] = 1
    (root / "manifest.json").write_text(json.dumps(manifest))


def test_migrating_a_format1_index_of_more_than_4096_records_keeps_each_once_in_order(tmp_path):
    root = tmp_path / "ix"
    LocalIndex.build(root, [_words(4100, "w")], ENC, chunk_size=1, overlap=0)
    _as_format1(root)
    old = LocalIndex.load(root, encoder=ENC)
    assert old.generation is None and len(old) == 4100
    before = old.records(range(len(old)))
    grown = old.add([SourceDocument("d", "Notices", {})], ENC)
    assert grown.manifest["format_version"] == 3 and len(grown) == 4101
    after = grown.records(range(len(grown)))
    assert after[:4100] == before
    assert [r["id"] for r in after] == list(range(4101)) and after[4100]["source"] == "d"
    assert [r["text"] for r in after[4094:4100]] == [f"w{i}" for i in range(4094, 4100)]


@pytest.mark.parametrize("bad", [-1, 3, 10])
def test_records_outside_the_index_are_refused_naming_the_range(tmp_path, bad):
    index = LocalIndex.build(tmp_path / "ix", [_words(3, "w")], ENC, chunk_size=1, overlap=0)
    assert len(index) == 3
    with pytest.raises(InputError) as info:
        index.records([0, bad])
    assert str(info.value) == f"chunk id {bad} is outside the index (0..2)"


def test_add_copies_the_stored_lines_of_a_format2_index_byte_for_byte(tmp_path):
    """Existing chunk lines are copied as stored, never re-serialised: lines in another valid JSON spelling
    (\\u-escaped, spaced) come out of `index add` unchanged."""
    root = tmp_path / "ix"
    index = LocalIndex.build(root, [SourceDocument("a", "Café crème brûlée", {"lang": "fr"})], ENC,
                             chunk_size=1, overlap=0)
    generation = root / index.generation
    records = index.records(range(len(index)))
    lines = [(json.dumps(r, ensure_ascii=True, separators=(" , ", " : ")) + "\n").encode() for r in records]
    (generation / "chunks.jsonl").write_bytes(b"".join(lines))
    np.save(generation / "chunk_offsets.npy", np.cumsum([0] + [len(x) for x in lines[:-1]]).astype("<i8"))
    manifest = json.loads((generation / "manifest.json").read_text())
    for name, entry in manifest["files"].items():
        data = (generation / name).read_bytes()
        entry.update(sha256=hashlib.sha256(data).hexdigest(), size=len(data))
    (generation / "manifest.json").write_text(json.dumps(manifest))
    assert LocalIndex.load(root).records(range(3)) == records  # the same records, spelt differently

    grown = LocalIndex.load(root).add([SourceDocument("b", "Tarte", {})], ENC)
    stored = (root / grown.generation / "chunks.jsonl").read_bytes()
    assert stored.startswith(b"".join(lines)) and b"Caf\\u00e9" in stored
    assert grown.records(range(3)) == records and grown.records([3])[0]["text"] == "Tarte"
