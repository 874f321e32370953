import json
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from meteora_edge import HashingEncoder
from meteora_edge.index.corpus import SourceDocument, read_documents
from meteora_edge.errors import InputError, LocalIndexError
from meteora_edge.index.local_index import LocalIndex

DOCS = [
    SourceDocument("a", "Either party may terminate the agreement on ninety days notice.", {}),
    SourceDocument("b", "Fees are payable monthly within thirty days of the invoice.", {}),
    SourceDocument("c", "The agreement is governed by the laws of England and Wales.", {}),
]


def test_build_load_search_and_records(tmp_path):
    enc = HashingEncoder()
    built = LocalIndex.build(tmp_path / "ix", DOCS, enc, chunk_size=5, overlap=1)
    loaded = LocalIndex.load(tmp_path / "ix", encoder=enc)
    assert len(loaded) == len(built) > 3
    assert isinstance(loaded.vectors, np.memmap)
    ids, scores = loaded.search(enc.encode(["terminate the agreement"])[0], 2)
    assert loaded.records(ids.tolist())[0]["source"] == "a"
    assert list(scores) == sorted(scores, reverse=True)
    rec = loaded.records([0])[0]
    assert DOCS[0].text[rec["start"] : rec["end"]] == rec["text"]
    assert loaded.bm25_search("invoice", 3)[0].size >= 1


def test_add_appends_and_keeps_ids(tmp_path):
    enc = HashingEncoder()
    first = LocalIndex.build(tmp_path / "ix", DOCS[:2], enc)
    grown = first.add(DOCS[2:], enc)
    assert len(grown) == len(first) + 1
    assert grown.records([len(grown) - 1])[0]["source"] == "c"
    assert grown.bm25.n_docs == len(grown)
    assert [p.name for p in tmp_path.iterdir()] == ["ix"]  # no leftovers


def test_refuses_another_encoder(tmp_path):
    LocalIndex.build(tmp_path / "ix", DOCS, HashingEncoder())
    with pytest.raises(LocalIndexError, match="built with encoder 'hashing:384'"):
        LocalIndex.load(tmp_path / "ix", encoder=HashingEncoder(n_features=128))


@pytest.mark.parametrize("damage", ["truncate-vectors", "flip-chunk-byte", "drop-manifest", "newer-format", "missing-bm25"])
def test_damaged_index_is_refused(tmp_path, damage):
    LocalIndex.build(tmp_path / "ix", DOCS, HashingEncoder())
    root = tmp_path / "ix"
    if damage == "truncate-vectors":
        data = (root / "vectors.npy").read_bytes()
        (root / "vectors.npy").write_bytes(data[: len(data) // 2])
    elif damage == "flip-chunk-byte":
        data = bytearray((root / "chunks.jsonl").read_bytes())
        data[10] ^= 0x01
        (root / "chunks.jsonl").write_bytes(bytes(data))
    elif damage == "drop-manifest":
        (root / "manifest.json").unlink()
    elif damage == "newer-format":
        manifest = json.loads((root / "manifest.json").read_text())
        manifest["format_version"] = 99
        (root / "manifest.json").write_text(json.dumps(manifest))
    else:
        (root / "bm25_tf.npy").unlink()
    with pytest.raises(LocalIndexError):
        LocalIndex.load(root)


def test_existing_target_and_empty_inputs(tmp_path):
    LocalIndex.build(tmp_path / "ix", DOCS, HashingEncoder())
    with pytest.raises(InputError, match="already exists"):
        LocalIndex.build(tmp_path / "ix", DOCS, HashingEncoder())
    with pytest.raises(InputError, match="no text"):
        LocalIndex.build(tmp_path / "empty", [], HashingEncoder())
    with pytest.raises(LocalIndexError, match="not found"):
        LocalIndex.load(tmp_path / "nothing")


def test_interrupted_build_leaves_no_index_that_loads(tmp_path):
    script = textwrap.dedent(
        f"""
        import os, signal
        from meteora_edge import HashingEncoder
        from meteora_edge.index.corpus import SourceDocument
        from meteora_edge.index.local_index import LocalIndex
        docs = [SourceDocument(str(i), "word " * 50, {{}}) for i in range(200)]
        def progress(done, total):
            if done >= 64:
                os.kill(os.getpid(), signal.SIGKILL)  # die mid-build, no cleanup at all
        LocalIndex.build({str(tmp_path / 'ix')!r}, docs, HashingEncoder(), batch_size=32, progress=progress)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True)
    assert proc.returncode == -signal.SIGKILL
    assert not (tmp_path / "ix").exists()
    for leftover in tmp_path.iterdir():  # a hidden work folder may remain; it must not load
        with pytest.raises(LocalIndexError):
            LocalIndex.load(leftover)


def test_read_documents_shapes(tmp_path):
    (tmp_path / "a.md").write_text("# Title\n\nBody text.")
    (tmp_path / "b.jsonl").write_text('{"id": "x1", "text": "first", "title": "T"}\n{"content": "second"}\n')
    (tmp_path / "c.json").write_text(json.dumps({"documents": ["third", {"page_content": "fourth"}]}))
    (tmp_path / "skip.bin").write_bytes(b"\x00\x01")
    docs = read_documents([tmp_path])
    assert [d.text for d in docs] == ["# Title\n\nBody text.", "first", "second", "third", "fourth"]
    assert docs[1].source_id == "x1" and docs[1].metadata["title"] == "T"
    with pytest.raises(InputError, match="file not found"):
        read_documents([tmp_path / "nope.txt"])
    (tmp_path / "bad.json").write_text("[1,")
    with pytest.raises(InputError, match="not valid JSON"):
        read_documents([tmp_path / "bad.json"])


def test_index_folder_and_files_are_readable_by_others(tmp_path):
    LocalIndex.build(tmp_path / "ix", DOCS, HashingEncoder())
    assert (tmp_path / "ix").stat().st_mode & 0o055 == 0o055 & ~_umask()
    assert (tmp_path / "ix" / "manifest.json").stat().st_mode & 0o044 == 0o044 & ~_umask()


def _umask() -> int:
    for line in open("/proc/self/status"):
        if line.startswith("Umask:"):
            return int(line.split()[1], 8)
    return 0o022


def test_json_document_files_in_every_layout(tmp_path):
    (tmp_path / "one.json").write_text('{"text": "a single document", "id": "solo"}')
    (tmp_path / "chunks.json").write_text('{"chunks": ["from chunks"]}')
    (tmp_path / "bad.json").write_text('{"documents": "not a list"}')
    docs = read_documents([tmp_path / "one.json", tmp_path / "chunks.json"])
    assert [(d.source_id, d.text) for d in docs] == [("solo", "a single document"), (f"{tmp_path / 'chunks.json'}#0", "from chunks")]
    with pytest.raises(InputError, match="'documents' must be a list"):
        read_documents([tmp_path / "bad.json"])
