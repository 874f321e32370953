"""The index's JSON documents against their schema, key by key, with the exact complaint."""

from __future__ import annotations

import copy

import pytest

from meteora_edge.errors import LocalIndexError
from meteora_edge.index.manifest import (
    ANN_FILE,
    REQUIRED_FILES,
    check_manifest,
    check_pointer,
    generation_files,
    parse_strict_json,
)

ENTRY = {"sha256": "ab" * 32, "size": 10}
VALID = {
    "format": "meteora-edge-index",
    "format_version": 2,
    "encoder": {"id": "hashing:384", "dimension": 384},
    "chunking": {"chunk_size": 200, "overlap": 20},
    "count": 3,
    "created": "2025-01-01T00:00:00+00:00",
    "updated": "2025-01-02T00:00:00+00:00",
    "files": {name: dict(ENTRY) for name in REQUIRED_FILES},
    "last_write": {"op": "build", "chunks": 3},
}
ANN = {"kind": "ivf", "factory": "IVF64,SQ8", "probe": 8}


def _edited(path: str | tuple[str, ...], value=None, base: dict | None = None, *, delete: bool = False) -> dict:
    manifest = copy.deepcopy(VALID if base is None else base)
    *parents, key = path if isinstance(path, tuple) else path.split(".")
    node = manifest
    for part in parents:
        node = node[part]
    if delete:
        del node[key]
    else:
        node[key] = value
    return manifest


def _problem(manifest, version=2) -> str:
    with pytest.raises(LocalIndexError) as info:
        check_manifest(manifest, "ix/manifest.json", version=version)
    message = str(info.value)
    assert message.startswith("ix/manifest.json is corrupt: ") and message.endswith("; rebuild the index")
    return message[len("ix/manifest.json is corrupt: "):-len("; rebuild the index")]


# (edit, the complaint); every bound is tried just outside, and just inside in ACCEPTED below
REFUSED = [
    (_edited("format", "other"), "manifest.format must be 'meteora-edge-index', got 'other'"),
    (_edited("format_version", 2.0), "manifest.format_version must be 2, got 2.0"),
    (_edited("format_version", True), "manifest.format_version must be 2, got True"),
    ([1, 2], "manifest must be an object, got list"),
    (_edited("encoder", "hashing:384"), "manifest.encoder must be an object, got str"),
    (_edited("encoder.dimension", 0), "manifest.encoder.dimension must be an integer in [1, 65536], got 0"),
    (_edited("encoder.dimension", 65537), "manifest.encoder.dimension must be an integer in [1, 65536], got 65537"),
    (_edited("encoder.dimension", True), "manifest.encoder.dimension must be an integer in [1, 65536], got True"),
    (_edited("encoder.id", ""), "manifest.encoder.id must be a string of 1..512 characters, got ''"),
    (_edited("encoder.id", "e" * 513), "manifest.encoder.id must be a string of 1..512 characters, got " + repr("e" * 513)[:60]),
    (_edited("encoder.id", 7), "manifest.encoder.id must be a string of 1..512 characters, got 7"),
    (_edited("chunking.chunk_size", 0), "manifest.chunking.chunk_size must be an integer in [1, 16777216], got 0"),
    (_edited("chunking.overlap", -1), "manifest.chunking.overlap must be an integer in [0, 16777216], got -1"),
    (_edited("chunking.overlap", 200), "manifest.chunking.overlap (200) must be below chunk_size"),
    (_edited("count", 0), "manifest.count must be an integer in [1, 1099511627776], got 0"),
    (_edited("count", 2 ** 40 + 1), "manifest.count must be an integer in [1, 1099511627776], got 1099511627777"),
    (_edited("created", "t" * 65), "manifest.created must be a string of 1..64 characters, got " + repr("t" * 65)[:60]),
    (_edited("updated", None), "manifest.updated must be a string of 1..64 characters, got None"),
    (_edited("chunking", None, delete=True), "manifest lacks 'chunking'"),
    (_edited("last_write", None, delete=True), "manifest lacks 'last_write'"),
    (_edited("trusted", True), "manifest has unexpected 'trusted'"),
    (_edited(("files", "vectors.npy"), None, delete=True), "manifest.files lacks 'vectors.npy'"),
    (_edited(("files", "extra.bin"), ENTRY), "manifest.files has unexpected 'extra.bin'"),
    (_edited(("files", "chunks.jsonl"), {"sha256": "AB" * 32, "size": 1}),
     "manifest.files.chunks.jsonl.sha256 must be a string matching [0-9a-f]{64}, got '" + "AB" * 29 + ""),
    (_edited(("files", "chunks.jsonl"), {"sha256": "ab" * 32, "size": -1}),
     "manifest.files.chunks.jsonl.size must be an integer in [0, 1125899906842624], got -1"),
    (_edited("last_write.op", "merge"), "manifest.last_write.op must be one of build, add, got 'merge'"),
    (_edited("last_write.op", ["add"]), "manifest.last_write.op must be one of build, add, got ['add']"),
    (_edited("last_write.chunks", 0), "manifest.last_write.chunks must be an integer in [1, 1099511627776], got 0"),
    (_edited("ann", {**ANN, "kind": "flat"}), "manifest.ann.kind must be one of ivf, hnsw, got 'flat'"),
    (_edited("ann", {**ANN, "probe": 0}), "manifest.ann.probe must be an integer in [1, 1048576], got 0"),
    (_edited("ann", ANN), f"manifest.files must list {ANN_FILE} exactly when manifest.ann is given"),
    (_edited(("files", ANN_FILE), ENTRY), f"manifest.files must list {ANN_FILE} exactly when manifest.ann is given"),
]


def test_several_missing_or_extra_keys_are_named_together():
    manifest = copy.deepcopy(VALID)
    del manifest["files"]["vectors.npy"], manifest["files"]["chunks.jsonl"]
    assert _problem(manifest) == "manifest.files lacks 'vectors.npy', 'chunks.jsonl'"
    extra = {**copy.deepcopy(VALID), "d": 1, "a": 1, "c": 1, "b": 1}
    assert _problem(extra) == "manifest has unexpected 'a', 'b', 'c'"  # the first three, sorted


@pytest.mark.parametrize(("manifest", "complaint"), REFUSED, ids=[r[1][:50] for r in REFUSED])
def test_a_manifest_off_its_schema_is_refused_with_the_exact_complaint(manifest, complaint):
    assert _problem(manifest).startswith(complaint)


def _with_ann(ann: dict) -> dict:
    manifest = _edited("ann", ann)
    manifest["files"][ANN_FILE] = dict(ENTRY)
    return manifest


ACCEPTED = [
    VALID,
    _edited("encoder.dimension", 1), _edited("encoder.dimension", 65536), _edited("encoder.id", "e" * 512),
    _edited("chunking.overlap", 0), _edited("chunking.overlap", 199), _edited("chunking.chunk_size", 2 ** 24),
    _edited("last_write.chunks", 1, _edited("count", 1)), _edited("last_write.op", "add", _edited("count", 2 ** 40)),
    _edited("created", "2025-01-01T00:00:00Z"), _edited("created", "2025-01-01T23:59:59.999999+12:00"),
    _edited(("files", "vectors.npy"), {"sha256": "0" * 64, "size": 0}), _edited("last_write.op", "add"),
    _with_ann(ANN), _with_ann({"kind": "hnsw", "factory": "HNSW32,SQ8", "probe": 2 ** 20}),
]


@pytest.mark.parametrize("manifest", ACCEPTED)
def test_a_manifest_on_its_schema_is_returned_as_it_is(manifest):
    assert check_manifest(manifest, "m", version=2) is manifest


def test_format_1_has_no_last_write_and_no_ann():
    v1 = {k: v for k, v in copy.deepcopy(VALID).items() if k != "last_write"}
    v1["format_version"] = 1
    assert check_manifest(v1, "m", version=1) is v1
    assert _problem({**v1, "last_write": VALID["last_write"]}, version=1) == "manifest has unexpected 'last_write'"
    assert _problem({**v1, "ann": ANN}, version=1) == "manifest has unexpected 'ann'"


@pytest.mark.parametrize(("factory", "complaint"), [
    ("HNSW32,SQ8", "manifest.ann.factory 'HNSW32,SQ8' is not of kind 'ivf'"),
    ("IVF0,SQ8", "manifest.ann.factory must be a string matching"),
    ("IVF64,Flat", "manifest.ann.factory must be a string matching"),
])
def test_the_ann_factory_matches_its_kind(factory, complaint):
    assert _problem(_with_ann({**ANN, "factory": factory})).startswith(complaint)


def test_generation_files_add_the_ann_file_exactly_with_an_ann():
    assert generation_files(VALID) == REQUIRED_FILES
    assert generation_files(_with_ann(ANN)) == (*REQUIRED_FILES, ANN_FILE)


POINTER = {"format": "meteora-edge-index", "format_version": 2, "generation": "gen-000003-1f2e3d4c"}


@pytest.mark.parametrize(("pointer", "complaint"), [
    ({**POINTER, "generation": "gen-3-1f2e3d4c"}, "pointer.generation must be a string matching"),
    ({**POINTER, "generation": "../gen-000003-1f2e3d4c"}, "pointer.generation must be a string matching"),
    ({**POINTER, "format_version": 1}, "pointer.format_version must be 3, got 1"),
    ({k: v for k, v in POINTER.items() if k != "generation"}, "pointer lacks 'generation'"),
    ("gen-000003-1f2e3d4c", "pointer must be an object, got str"),
])
def test_a_pointer_names_one_generation(pointer, complaint):
    assert check_pointer(POINTER, "ix/manifest.json") == "gen-000003-1f2e3d4c"
    with pytest.raises(LocalIndexError) as info:
        check_pointer(pointer, "ix/manifest.json")
    assert str(info.value).startswith(f"ix/manifest.json is corrupt: {complaint}")
    assert str(info.value).endswith("; rebuild the index")


@pytest.mark.parametrize(("raw", "reason"), [
    (b'{"a": NaN}', "NaN is not JSON"),
    (b'{"a": -Infinity}', "-Infinity is not JSON"),
    (b'{"a": 1, "a": 2}', "a key appears twice"),
    (b"\xff{}", "'utf-8' codec can't decode byte 0xff in position 0"),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    (b'{"a": ', "Expecting value"),
])
def test_strict_json_refuses_what_the_index_never_writes(raw, reason):
    with pytest.raises(LocalIndexError) as info:
        parse_strict_json(raw, "ix/manifest.json", max_bytes=None)
    assert str(info.value) == f"ix/manifest.json is corrupt ({reason}); rebuild the index"


def test_strict_json_has_a_size_limit():
    raw = b'{"a": "' + b"x" * 10 + b'"}'
    assert parse_strict_json(raw, "m", max_bytes=len(raw)) == {"a": "x" * 10}
    with pytest.raises(LocalIndexError) as info:
        parse_strict_json(raw, "m", max_bytes=len(raw) - 1)
    assert str(info.value) == f"m is {len(raw)} bytes, more than an index writes; rebuild the index"
    assert parse_strict_json(b"[1.5, true]", "m") == [1.5, True]
