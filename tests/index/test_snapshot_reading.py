"""Reading the version an index pointer names: every missing, corrupt or tampered file gives one exact line."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from meteora_edge.errors import LocalIndexError
from meteora_edge.index import snapshot as snapshot_module
from meteora_edge.index.corpus import SourceDocument
from meteora_edge.index.local_index import LocalIndex
from meteora_edge.index.snapshot import open_snapshot, read_npy
from meteora_edge.models.encoders import HashingEncoder

DOCS = [SourceDocument("a", "alpha beta gamma delta epsilon"), SourceDocument("b", "zeta eta theta")]


@pytest.fixture
def root(tmp_path):
    LocalIndex.build(tmp_path / "ix", DOCS, HashingEncoder(n_features=16), chunk_size=4, overlap=0)
    return tmp_path / "ix"


def _pointer(root):
    return json.loads((root / "manifest.json").read_text())


def _message(root, verify=True):
    with pytest.raises(LocalIndexError) as caught:
        open_snapshot(root, verify=verify)
    return str(caught.value)


# ------------------------------------------------------------------ the pointer
def test_a_folder_without_a_pointer_holds_no_index(root):
    (root / "manifest.json").unlink()
    assert _message(root) == (f"{root} holds no index (manifest.json is missing): not an index, or a first build "
                              "that did not finish; build it again")


def test_a_pointer_that_is_a_folder_is_not_a_manifest(root):
    (root / "manifest.json").unlink()
    (root / "manifest.json").mkdir()
    assert _message(root) == f"{root / 'manifest.json'} is a folder, not a manifest file: {root} is not a meteora-edge index"


def test_an_unreadable_pointer_names_the_reason(root):
    (root / "manifest.json").unlink()
    (root / "manifest.json").symlink_to("manifest.json")  # a loop: open() fails with ELOOP
    assert _message(root) == f"cannot read {root / 'manifest.json'}: Too many levels of symbolic links"


def test_a_pointer_that_is_not_json_is_corrupt(root):
    (root / "manifest.json").write_bytes(b"not json")
    assert _message(root) == f"{root / 'manifest.json'} is corrupt (Expecting value); rebuild the index"


@pytest.mark.parametrize("pointer", [{"format": "other-tool", "format_version": 2}, {"format_version": 2}, [1], "x"])
def test_a_pointer_of_another_format_is_not_an_index(root, pointer):
    (root / "manifest.json").write_text(json.dumps(pointer))
    assert _message(root) == f"{root} is not a meteora-edge index"


@pytest.mark.parametrize("version", [0, 1.5, "2", None])
def test_an_unknown_format_version_is_corrupt(root, version):
    pointer = {**_pointer(root), "format_version": version}
    (root / "manifest.json").write_text(json.dumps(pointer))
    assert _message(root) == (f"{root / 'manifest.json'} is corrupt: format_version must be 1, 2 or 3, "
                              f"got {version!r}")


def test_a_newer_format_version_asks_for_a_newer_reader(root):
    (root / "manifest.json").write_text(json.dumps({**_pointer(root), "format_version": 4}))
    assert _message(root) == (f"{root} has index format version 4, written by a newer meteora-edge; this one reads "
                              "up to 3: upgrade meteora-edge (pip install -U meteora-edge) to open it")


def test_a_pointer_off_its_schema_names_the_pointer_file(root):
    (root / "manifest.json").write_text(json.dumps({**_pointer(root), "generation": 7}))
    message = _message(root)
    assert message.startswith(f"{root / 'manifest.json'} is corrupt: ")
    assert message.endswith("; rebuild the index")


# ------------------------------------------------------------------ the generation
def test_a_pointer_to_a_removed_generation_names_the_missing_manifest(root):
    generation = _pointer(root)["generation"]
    shutil.rmtree(root / generation)
    assert _message(root) == f"{root / generation / 'manifest.json'} is missing from the index; rebuild it"


def test_a_generation_manifest_off_its_schema_names_that_file(root):
    path = root / _pointer(root)["generation"] / "manifest.json"
    manifest = json.loads(path.read_text())
    path.write_text(json.dumps({**manifest, "count": -1}))
    message = _message(root)
    assert message.startswith(f"{path} is corrupt: ")
    assert message.endswith("; rebuild the index")


def test_a_generation_manifest_that_is_not_json_names_that_file(root):
    path = root / _pointer(root)["generation"] / "manifest.json"
    path.write_bytes(b"{")
    assert _message(root) == f"{path} is corrupt (Expecting property name enclosed in double quotes); rebuild the index"


def test_a_missing_data_file_is_named(root):
    path = root / _pointer(root)["generation"] / "bm25_tf.npy"
    path.unlink()
    assert _message(root) == f"{path} is missing from the index; rebuild it"


def test_a_data_file_that_cannot_be_opened_is_named_with_the_reason(root):
    path = root / _pointer(root)["generation"] / "bm25_tf.npy"
    path.unlink()
    path.mkdir()
    assert _message(root) == f"cannot open {path} (Is a directory); rebuild the index"


def test_a_data_file_that_is_not_a_regular_file_is_refused(root):
    path = root / _pointer(root)["generation"] / "bm25_tf.npy"
    path.unlink()
    path.symlink_to("/dev/null")
    assert _message(root) == f"{path} is not a regular file; rebuild the index"


def test_a_data_file_of_another_size_is_refused_even_without_verify(root):
    path = root / _pointer(root)["generation"] / "chunks.jsonl"
    path.write_bytes(path.read_bytes() + b"\n")
    assert _message(root, verify=False) == f"{path} has the wrong size (truncated or replaced); rebuild the index"


def test_a_tampered_file_of_the_same_size_is_caught_only_by_verify(root):
    path = root / _pointer(root)["generation"] / "chunks.jsonl"
    data = bytearray(path.read_bytes())
    data[data.index(b"alpha")] = ord("A")
    path.write_bytes(bytes(data))
    assert _message(root) == f"{path} does not match its sha256 (corrupt or tampered); rebuild the index"
    snapshot = open_snapshot(root, verify=False)
    snapshot.close()


def test_an_intact_index_opens_every_file_at_its_start(root):
    snapshot = open_snapshot(root, verify=True)
    try:
        assert snapshot.generation == _pointer(root)["generation"]
        assert snapshot.folder == root / snapshot.generation
        assert sorted(snapshot.handles) == sorted(snapshot.manifest["files"])
        assert all(handle.tell() == 0 for handle in snapshot.handles.values())
        assert snapshot.handles["chunks.jsonl"].read() == (snapshot.folder / "chunks.jsonl").read_bytes()
    finally:
        snapshot.close()


# ------------------------------------------------------------------ a writer switching versions meanwhile
def _writer_after_first_pointer_read(monkeypatch, action):
    """Run ``action`` (what a concurrent writer does) right after the reader first read the pointer."""
    real = snapshot_module.read_small_file
    calls = []

    def read_then_write(path):
        data = real(path)
        if not calls:
            calls.append(path)
            action()
        return data

    monkeypatch.setattr(snapshot_module, "read_small_file", read_then_write)


def test_a_reader_follows_the_pointer_when_a_writer_switched_versions(root, tmp_path, monkeypatch):
    old = _pointer(root)["generation"]
    other = tmp_path / "other"
    LocalIndex.build(other, DOCS[:1], HashingEncoder(n_features=16), chunk_size=4, overlap=0)
    new = _pointer(other)["generation"]

    def switch():
        shutil.copytree(other / new, root / new)
        (root / "manifest.json").write_bytes((other / "manifest.json").read_bytes())
        shutil.rmtree(root / old)

    _writer_after_first_pointer_read(monkeypatch, switch)
    snapshot = open_snapshot(root, verify=True)
    try:
        assert snapshot.generation == new
        assert snapshot.manifest["count"] == 2
    finally:
        snapshot.close()


def test_a_pointer_removed_while_opening_is_read_again(root, monkeypatch):
    old = _pointer(root)["generation"]

    def remove():
        (root / "manifest.json").unlink()
        shutil.rmtree(root / old)

    _writer_after_first_pointer_read(monkeypatch, remove)
    assert _message(root) == (f"{root} holds no index (manifest.json is missing): not an index, or a first build "
                              "that did not finish; build it again")


# ------------------------------------------------------------------ read_npy
def _npy(array, version=None):
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, array, version=version)
    return buffer.getvalue()


def _read(tmp_path, data, *, dtype="<i4", shape=None, mmap=False):
    path = tmp_path / "a.npy"
    path.write_bytes(data)
    with open(path, "rb") as handle:
        return read_npy(handle, dtype=np.dtype(dtype), shape=shape, mmap=mmap, where="a.npy")


def _npy_error(tmp_path, data, **kwargs):
    with pytest.raises(LocalIndexError) as caught:
        _read(tmp_path, data, **kwargs)
    return str(caught.value)


@pytest.mark.parametrize("version", [(1, 0), (2, 0)])
@pytest.mark.parametrize("mmap", [False, True])
def test_npy_versions_1_and_2_are_read(tmp_path, version, mmap):
    out = _read(tmp_path, _npy(np.arange(5, dtype="<i4"), version), mmap=mmap)
    assert out.dtype == np.dtype("<i4")
    assert out.tolist() == [0, 1, 2, 3, 4]
    assert isinstance(out, np.memmap) == mmap


def test_a_2d_array_is_read_at_its_exact_shape(tmp_path):
    array = np.arange(6, dtype="<f4").reshape(2, 3)
    assert _read(tmp_path, _npy(array, (2, 0)), dtype="<f4", shape=(2, 3)).tolist() == array.tolist()


def test_an_unknown_npy_version_is_not_readable(tmp_path):
    data = bytearray(_npy(np.arange(3, dtype="<i4"), (2, 0)))
    data[6] = 3  # major version 3
    assert _npy_error(tmp_path, bytes(data)) == "a.npy is not a readable array (npy version (3, 0)); rebuild the index"


def test_a_file_that_is_not_npy_is_not_readable(tmp_path):
    message = _npy_error(tmp_path, b"hello world, not an array")
    assert message.startswith("a.npy is not a readable array (")
    assert message.endswith("); rebuild the index")


def test_another_dtype_is_refused_with_what_was_expected(tmp_path):
    assert _npy_error(tmp_path, _npy(np.arange(3, dtype="<i8"))) == (
        "a.npy holds int64 (3,), expected int32 (n,); rebuild the index"
    )


def test_fortran_order_is_refused(tmp_path):
    array = np.asfortranarray(np.arange(6, dtype="<f4").reshape(2, 3))
    assert _npy_error(tmp_path, _npy(array), dtype="<f4", shape=(2, 3)) == (
        "a.npy holds float32 (2, 3), expected float32 (2, 3); rebuild the index"
    )


def test_a_2d_array_where_a_1d_one_is_expected_is_refused(tmp_path):
    assert _npy_error(tmp_path, _npy(np.zeros((2, 2), dtype="<i4"))) == (
        "a.npy holds int32 (2, 2), expected int32 (n,); rebuild the index"
    )


def test_another_shape_than_the_exact_one_is_refused(tmp_path):
    assert _npy_error(tmp_path, _npy(np.zeros((2, 3), dtype="<f4")), dtype="<f4", shape=(3, 2)) == (
        "a.npy holds float32 (2, 3), expected float32 (3, 2); rebuild the index"
    )


def test_a_size_that_does_not_fit_the_header_is_refused(tmp_path):
    data = _npy(np.arange(4, dtype="<i4"))
    assert _npy_error(tmp_path, data[:-2]) == f"a.npy is {len(data) - 2} bytes, which does not fit its header; rebuild the index"
    assert _npy_error(tmp_path, data + b"\0") == f"a.npy is {len(data) + 1} bytes, which does not fit its header; rebuild the index"


@pytest.mark.parametrize("mmap", [False, True])
def test_an_empty_array_comes_back_empty_with_the_expected_dtype(tmp_path, mmap):
    out = _read(tmp_path, _npy(np.zeros(0, dtype="<i8")), dtype="<i8", mmap=mmap)
    assert out.shape == (0,)
    assert out.dtype == np.dtype("<i8")


# ------------------------------------------------------------------ format 1: the whole folder is the version
FORMAT1 = Path(__file__).parent / "data" / "format1_index"  # written by meteora-edge 0.1.0


@pytest.fixture
def format1(tmp_path):
    return Path(shutil.copytree(FORMAT1, tmp_path / "v1"))


def test_a_format1_index_opens_its_own_folder_without_a_generation(format1):
    snapshot = open_snapshot(format1, verify=True)
    try:
        assert snapshot.generation is None
        assert snapshot.folder == format1
        assert sorted(snapshot.handles) == sorted(snapshot.manifest["files"])
    finally:
        snapshot.close()


def test_a_format1_manifest_off_its_schema_names_the_top_manifest(format1):
    manifest = json.loads((format1 / "manifest.json").read_text())
    (format1 / "manifest.json").write_text(json.dumps({**manifest, "count": "many"}))
    message = _message(format1)
    assert message.startswith(f"{format1 / 'manifest.json'} is corrupt: ")
    assert message.endswith("; rebuild the index")


def test_a_format1_index_missing_a_file_names_it(format1):
    (format1 / "vectors.npy").unlink()
    assert _message(format1) == f"{format1 / 'vectors.npy'} is missing from the index; rebuild it"


def test_a_missing_folder_is_not_an_index(tmp_path):
    with pytest.raises(LocalIndexError) as caught:
        open_snapshot(tmp_path / "nowhere", verify=False)
    assert str(caught.value) == (f"index folder not found: {tmp_path / 'nowhere'}; "
                                 "build one with 'meteora-edge index build'")


def test_a_reader_gives_up_when_the_pointer_keeps_moving(root, monkeypatch):
    real = snapshot_module.read_small_file
    switches = []
    (root / "manifest.json").write_text(json.dumps({**_pointer(root), "generation": "gen-000100-0123abcd"}))

    def read_then_switch(path):
        data = real(path)
        if path == root / "manifest.json":  # a writer names a new (not yet written) version after every read
            switches.append(path)
            pointer = {**_pointer(root), "generation": f"gen-{len(switches) + 100:06d}-0123abcd"}
            (root / "manifest.json").write_text(json.dumps(pointer))
        return data

    monkeypatch.setattr(snapshot_module, "read_small_file", read_then_switch)
    assert _message(root) == f"{root} changed 8 times while it was being opened; try again"
