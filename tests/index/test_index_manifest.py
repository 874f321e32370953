"""The index manifest is checked against a schema and a fixed file list, even when an attacker
recomputed every hash; format-1 indexes (written by earlier versions) still load and migrate."""

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from meteora_edge import HashingEncoder
from meteora_edge.cli.main import main
from meteora_edge.errors import LocalIndexError
from meteora_edge.index.corpus import SourceDocument
from meteora_edge.index.local_index import LocalIndex

FORMAT1 = Path(__file__).parent / "data" / "format1_index"  # written by meteora-edge 0.1.0 (format 1), NaN included
DOCS = [
    SourceDocument("a", "Either party may terminate the agreement on ninety days notice.", {}),
    SourceDocument("b", "Fees are payable monthly within thirty days of the invoice.", {}),
    SourceDocument("c", "The agreement is governed by the laws of England and Wales.", {}),
]


def _generation(root: Path) -> Path:
    return root / json.loads((root / "manifest.json").read_text())["generation"]


def _rewrite(folder: Path, change_manifest=lambda m: None) -> None:
    """Recompute every listed file's sha256 and size as an attacker would, then change the manifest."""
    manifest = json.loads((folder / "manifest.json").read_text())
    for name, entry in manifest["files"].items():
        data = (folder / name).read_bytes()
        entry.update(sha256=hashlib.sha256(data).hexdigest(), size=len(data))
    change_manifest(manifest)
    (folder / "manifest.json").write_text(json.dumps(manifest))


def _save(folder: Path, name: str, array: np.ndarray) -> None:
    np.save(folder / name, array, allow_pickle=True)


def _vocab(folder: Path, change) -> None:
    vocab = json.loads((folder / "bm25_vocab.json").read_text())
    change(vocab)
    (folder / "bm25_vocab.json").write_text(json.dumps(vocab))


TAMPERING = {
    "offsets-reversed": lambda g: _save(g, "chunk_offsets.npy", np.load(g / "chunk_offsets.npy")[::-1].copy()),
    "offsets-past-the-end": lambda g: _save(g, "chunk_offsets.npy", np.load(g / "chunk_offsets.npy") + 10**6),
    "offsets-as-floats": lambda g: _save(g, "chunk_offsets.npy", np.load(g / "chunk_offsets.npy").astype(float)),
    "offsets-as-objects": lambda g: _save(g, "chunk_offsets.npy", np.load(g / "chunk_offsets.npy").astype(object)),
    "vectors-as-float64": lambda g: _save(g, "vectors.npy", np.load(g / "vectors.npy").astype(np.float64)),
    "vectors-one-row-short": lambda g: _save(g, "vectors.npy", np.load(g / "vectors.npy")[:-1]),
    "bm25-extra-parameter": lambda g: _vocab(g, lambda v: v["params"].update(delta=1.0)),
    "bm25-parameter-as-string": lambda g: _vocab(g, lambda v: v["params"].update(k1="1.5")),
    "bm25-terms-repeated": lambda g: _vocab(g, lambda v: v["terms"].__setitem__(1, v["terms"][0])),
    "bm25-term-ptr-decreasing": lambda g: _save(g, "bm25_term_ptr.npy", np.load(g / "bm25_term_ptr.npy")[::-1].copy()),
    "bm25-doc-id-out-of-range": lambda g: _save(g, "bm25_doc_ids.npy", np.load(g / "bm25_doc_ids.npy") + 1000),
}

MANIFEST_EDITS = {
    "encoder-as-string": lambda m: m.update(encoder="hashing:384"),
    "chunking-missing": lambda m: m.pop("chunking"),
    "vectors-left-out-of-files": lambda m: m["files"].pop("vectors.npy"),
    "extra-file-listed": lambda m: m["files"].update({"../../etc/passwd": m["files"]["vectors.npy"]}),
    "unknown-key": lambda m: m.update(trusted=True),
    "count-as-bool": lambda m: m.update(count=True),
    "count-as-string": lambda m: m.update(count="3"),
    "overlap-not-below-chunk-size": lambda m: m["chunking"].update(overlap=m["chunking"]["chunk_size"]),
    "dimension-negative": lambda m: m["encoder"].update(dimension=-384),
    "bad-sha256-text": lambda m: m["files"]["chunks.jsonl"].update(sha256="not-hex"),
    "last-write-unknown-op": lambda m: m["last_write"].update(op="merge"),
}


def _built(tmp_path: Path) -> Path:
    LocalIndex.build(tmp_path / "ix", DOCS, HashingEncoder(), chunk_size=5, overlap=1)
    return tmp_path / "ix"


def _refused(root: Path) -> str:
    with pytest.raises(LocalIndexError) as info:
        LocalIndex.load(root)
    message = str(info.value)
    assert "\n" not in message and len(message) < 400, message
    return message


@pytest.mark.parametrize("name", sorted(TAMPERING))
def test_tampered_files_with_recomputed_hashes_are_refused(tmp_path, name):
    root = _built(tmp_path)
    gen = _generation(root)
    TAMPERING[name](gen)
    _rewrite(gen)
    _refused(root)


@pytest.mark.parametrize("name", sorted(MANIFEST_EDITS))
def test_manifests_off_the_schema_are_refused(tmp_path, name):
    root = _built(tmp_path)
    _rewrite(_generation(root), MANIFEST_EDITS[name])
    _refused(root)


def test_a_flipped_vector_file_is_refused_even_when_left_out_of_the_hash_list(tmp_path):
    root = tmp_path / "ix"
    shutil.copytree(FORMAT1, root)
    data = bytearray((root / "vectors.npy").read_bytes())
    data[-5] ^= 0x40
    (root / "vectors.npy").write_bytes(bytes(data))
    _rewrite(root, lambda m: m["files"].pop("vectors.npy"))
    assert "lacks 'vectors.npy'" in _refused(root)


@pytest.mark.parametrize("pointer", [
    '{"format": "meteora-edge-index", "format_version": 2, "generation": "../elsewhere"}',
    '{"format": "meteora-edge-index", "format_version": 2, "generation": "gen-000001-0123abcd", "extra": 1}',
    '{"format": "meteora-edge-index", "format_version": 2}',
    '{"format": "meteora-edge-index", "format_version": NaN, "generation": "gen-000001-0123abcd"}',
    '{"format": "meteora-edge-index", "format": "meteora-edge-index", "format_version": 2}',
    '{"format": "meteora-edge-index", "format_version": "2", "generation": "gen-000001-0123abcd"}',
    '[' * 100_000,
    '{"format": "meteora-edge-index", "format_version": 1' + ' ' * (1 << 20) + '}',
    '\udcff',
])
def test_malformed_pointers_are_refused_in_one_line(tmp_path, pointer):
    root = _built(tmp_path)
    (root / "manifest.json").write_bytes(pointer.encode("utf-8", "surrogateescape"))
    _refused(root)


@pytest.mark.parametrize("where", ["pointer", "generation"])
def test_a_folder_named_manifest_json_is_refused(tmp_path, where):
    root = _built(tmp_path)
    target = root / "manifest.json" if where == "pointer" else _generation(root) / "manifest.json"
    target.unlink()
    target.mkdir()
    _refused(root)
    result = CliRunner().invoke(main, ["index", "info", str(root)])
    assert result.exit_code == 1 and result.output.count("\n") == 1 and result.output.startswith("Error: ")


def test_misaligned_offsets_are_caught_when_records_are_read(tmp_path):
    root = _built(tmp_path)
    gen = _generation(root)
    offsets = np.load(gen / "chunk_offsets.npy")
    offsets[2] += 3  # still increasing, so the load-time check passes
    _save(gen, "chunk_offsets.npy", offsets)
    _rewrite(gen)
    index = LocalIndex.load(root)
    assert index.records([0])[0]["id"] == 0
    for bad in (1, 2):
        with pytest.raises(LocalIndexError, match=f"chunk record {bad} .* not where its offset says"):
            index.records([bad])


def test_format1_index_loads_and_the_next_write_migrates_it(tmp_path):
    root = tmp_path / "ix"
    shutil.copytree(FORMAT1, root)
    enc = HashingEncoder()
    old = LocalIndex.load(root, encoder=enc)
    assert old.generation is None and old.manifest["format_version"] == 1 and len(old) == 9
    texts = [r["text"] for r in old.records(range(len(old)))]
    grown = old.add([SourceDocument("d", "Notices are given in writing.", {})], enc)
    assert grown.manifest["format_version"] == 3 and grown.manifest["created"] == old.manifest["created"]
    assert sorted(p.name for p in root.iterdir()) == [".writer.lock", grown.generation, "manifest.json"]
    records = grown.records(range(len(grown)))
    assert [r["text"] for r in records[:9]] == texts and records[9]["source"] == "d"
    assert [r["id"] for r in records] == list(range(10))
    assert all(r["sha256"] == hashlib.sha256(r["text"].encode()).hexdigest() for r in records)
    assert records[0]["metadata"] == {"score": None}  # format 1 stored NaN, which is not JSON
    raw = (root / grown.generation / "chunks.jsonl").read_text()
    assert "NaN" not in raw and all(json.loads(line, parse_constant=_no_constants) for line in raw.splitlines())
    np.testing.assert_array_equal(np.asarray(grown.vectors[:9]), np.asarray(old.vectors))
    assert old.records([8])[0]["text"] == texts[8]  # the migrated-away files stay readable to old readers


def _no_constants(name):
    raise AssertionError(f"{name} in stored JSON")


def test_build_overwrite_recognises_a_format1_index(tmp_path):
    root = tmp_path / "ix"
    shutil.copytree(FORMAT1, root)
    rebuilt = LocalIndex.build(root, DOCS[:1], HashingEncoder(), overwrite=True)
    assert sorted(p.name for p in root.iterdir()) == [".writer.lock", rebuilt.generation, "manifest.json"]
