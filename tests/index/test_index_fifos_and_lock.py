"""A FIFO in place of an index file is refused at once, never waited on, and a writer waits for
another writer's lock only up to a timeout (H1)."""

from __future__ import annotations

import os
import threading
import time

import pytest
from filelock import FileLock

from meteora_edge import HashingEncoder
from meteora_edge.errors import ConfigError, InputError, LocalIndexError
from meteora_edge.index.corpus import SourceDocument
from meteora_edge.index.generations import LOCK_TIMEOUT_ENV, WRITER_LOCK, lock_timeout
from meteora_edge.index.local_index import LocalIndex

from test_index_manifest import _generation

ENC = HashingEncoder()
DOCS = [SourceDocument("a", "Either party may terminate."), SourceDocument("b", "Fees are payable monthly.")]


def _within(seconds, call):
    """Run ``call`` in a thread; return what it raised (it must finish within ``seconds``)."""
    outcome = {}

    def run():
        try:
            outcome["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            outcome["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():  # unblock it (a writer on the FIFO) so the test process can end
        pytest.fail(f"{call} still blocked after {seconds} s")
    return outcome.get("error")


def _fifo_in_place_of(path):
    path.unlink()
    os.mkfifo(path)


def _cleanup_fifo(path):
    try:  # a blocked opener would wait forever: open the other end without blocking
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass


@pytest.mark.parametrize("name", ["pointer", "manifest.json", "vectors.npy", "chunks.jsonl", "bm25_vocab.json"])
def test_a_fifo_in_place_of_an_index_file_is_one_error_not_a_hang(tmp_path, name):
    root = tmp_path / "ix"
    LocalIndex.build(root, DOCS, ENC)
    fifo = root / "manifest.json" if name == "pointer" else _generation(root) / name
    _fifo_in_place_of(fifo)
    try:
        for call in (lambda: LocalIndex.load(root), lambda: LocalIndex.load(root, verify=False)):
            error = _within(10, call)
            assert isinstance(error, LocalIndexError), error
            assert "not a regular file" in str(error) and "\n" not in str(error), str(error)
    finally:
        _cleanup_fifo(fifo)


def test_writers_refuse_a_fifo_pointer_without_hanging(tmp_path):
    root = tmp_path / "ix"
    index = LocalIndex.build(root, DOCS[:1], ENC)
    _fifo_in_place_of(root / "manifest.json")
    try:
        assert isinstance(_within(10, lambda: index.add(DOCS[1:], ENC)), LocalIndexError)
        error = _within(10, lambda: LocalIndex.build(root, DOCS, ENC, overwrite=True))
        assert isinstance(error, InputError) and "not a meteora-edge index" in str(error), error
        assert (root / index.generation).is_dir()  # nothing was removed
    finally:
        _cleanup_fifo(root / "manifest.json")


def test_a_writer_gives_up_on_a_held_lock_after_the_timeout_in_one_line(tmp_path):
    root = tmp_path / "ix"
    index = LocalIndex.build(root, DOCS[:1], ENC)
    with FileLock(str(root / WRITER_LOCK)):  # another writer that hangs
        started = time.monotonic()
        with pytest.raises(LocalIndexError) as info:
            index.add(DOCS[1:], ENC, lock_timeout=0.3)
        assert 0.25 <= time.monotonic() - started < 5
        assert str(info.value) == (f"another writer has held the lock of {root} for 0.3 s; try again once it has "
                                   f"finished (lock_timeout, or {LOCK_TIMEOUT_ENV}, sets how long to wait)")
        with pytest.raises(LocalIndexError, match="another writer"):
            LocalIndex.build(root, DOCS, ENC, overwrite=True, lock_timeout=0)
    assert len(LocalIndex.load(root)) == 1  # unchanged
    assert len(index.add(DOCS[1:], ENC, lock_timeout=0)) == 2  # free again: no wait needed


def test_the_environment_sets_the_default_wait(tmp_path, monkeypatch):
    assert lock_timeout() == 60.0
    monkeypatch.setenv(LOCK_TIMEOUT_ENV, "0.2")
    assert lock_timeout() == 0.2 and lock_timeout(5) == 5.0
    root = tmp_path / "ix"
    index = LocalIndex.build(root, DOCS[:1], ENC)
    with FileLock(str(root / WRITER_LOCK)), pytest.raises(LocalIndexError, match="for 0.2 s"):
        index.add(DOCS[1:], ENC)


@pytest.mark.parametrize("value", [-1, float("inf"), float("nan"), "10", True])
def test_bad_timeouts_are_refused_before_any_work(tmp_path, value):
    with pytest.raises(ConfigError, match="lock_timeout must be a number of seconds"):
        LocalIndex.build(tmp_path / "ix", DOCS, ENC, lock_timeout=value)
    assert not (tmp_path / "ix").exists()


def test_a_bad_environment_value_is_refused(monkeypatch):
    monkeypatch.setenv(LOCK_TIMEOUT_ENV, "soon")
    with pytest.raises(ConfigError, match=f"{LOCK_TIMEOUT_ENV} must be a number of seconds, got 'soon'"):
        lock_timeout()
