"""Milvus writes with faults injected at the client's calls (Milvus Lite, the real engine): a
rebuild that fails or is killed at the rename keeps the collection, a killed add is undone by
the next write so re-running it adds each chunk once, and killed builds' temporary collections
are dropped by the next write."""

from __future__ import annotations

from collections import Counter

import pytest

from meteora_edge import HashingEncoder
from meteora_edge.errors import CollectionError
from meteora_edge.index.corpus import read_documents
from meteora_edge.index.milvus_location import connect, milvus_location

from repo_paths import EXAMPLES

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")
from pymilvus.exceptions import MilvusException  # noqa: E402

from meteora_edge.index import milvus_collection, milvus_index, milvus_updates  # noqa: E402
from meteora_edge.index.milvus_index import MilvusIndex  # noqa: E402

ENC = HashingEncoder()


class Killed(BaseException):
    """A kill at that call: no handler may clean up after it (the faulty client refuses every call after)."""


class FaultyClient:
    """A real client whose ``method`` fails at its ``at``-th call (1-based) with ``error``; after a
    ``Killed`` every call fails, as in a process that is gone."""

    def __init__(self, client, method: str, at: int, error: BaseException) -> None:
        self._client, self._method, self._at, self._error = client, method, at, error
        self.calls, self.dead = 0, False

    def __getattr__(self, attr):
        real = getattr(self._client, attr)
        if not callable(real):
            return real

        def call(*args, **kwargs):
            if self.dead:
                raise Killed(attr)
            if attr == self._method:
                self.calls += 1
                if self.calls == self._at:
                    self.dead = isinstance(self._error, Killed)
                    raise self._error
            return real(*args, **kwargs)

        return call


def _docs():
    return read_documents([str(EXAMPLES / "corpus")], strict=True)


def _inject(monkeypatch, method: str, at: int, error: BaseException) -> list[FaultyClient]:
    made: list[FaultyClient] = []

    def faulty(location):
        made.append(FaultyClient(connect(location), method, at, error))
        return made[-1]

    monkeypatch.setattr(milvus_index, "connect", faulty)
    return made


def _texts(index: MilvusIndex) -> list[str]:
    return [r["text"] for r in index.records(range(len(index)))]


@pytest.fixture
def old(tmp_path):
    location = milvus_location(str(tmp_path / "x.db"), "docs")
    index = MilvusIndex.build(location, _docs()[:1], ENC, chunk_size=40)
    texts = _texts(index)
    index.close()
    return location, texts


@pytest.mark.parametrize("at", [1, 2])  # the old collection renamed aside, the new one renamed in place
def test_a_rebuild_failing_at_a_rename_keeps_the_old_collection(old, monkeypatch, at):
    location, texts = old
    _inject(monkeypatch, "rename_collection", at, MilvusException(message="injected rename failure"))
    with pytest.raises(CollectionError, match="rename_collection failed .*injected rename failure"):
        MilvusIndex.build(location, _docs(), ENC, chunk_size=40, overwrite=True)
    monkeypatch.undo()
    with MilvusIndex.open(location) as index:
        assert _texts(index) == texts and index.client.list_collections() == ["docs"]


def test_a_rebuild_killed_between_the_renames_is_undone_by_the_next_command(old, monkeypatch):
    location, texts = old
    _inject(monkeypatch, "rename_collection", 2, Killed("rename"))
    with pytest.raises(Killed):
        MilvusIndex.build(location, _docs(), ENC, chunk_size=40, overwrite=True)
    monkeypatch.undo()
    client = connect(location)
    left = sorted(client.list_collections())
    client.close()
    assert "docs" not in left and len(left) == 2  # the old one aside, the new one still temporary
    with MilvusIndex.open(location) as index:  # a read command: the old collection is back
        assert _texts(index) == texts
    rebuilt = MilvusIndex.build(location, _docs(), ENC, chunk_size=40, overwrite=True)
    assert len(rebuilt) > len(texts) and rebuilt.client.list_collections() == ["docs"]
    rebuilt.close()


def test_killed_builds_leave_temporary_collections_that_the_next_write_drops(old, monkeypatch):
    location, texts = old
    left = []
    for _ in range(2):  # killed while filling the temporary collection
        _inject(monkeypatch, "flush", 1, Killed("flush"))
        with pytest.raises(Killed):
            MilvusIndex.build(location, _docs(), ENC, chunk_size=40, overwrite=True)
        monkeypatch.undo()
        with MilvusIndex.open(location) as index:  # reads leave them; the next build dropped the first
            left.append(sorted(index.client.list_collections()))
            assert _texts(index) == texts
    assert [len(names) for names in left] == [2, 2] and left[0] != left[1]
    with MilvusIndex.open(location) as index:
        assert index.add(_docs()[1:2], ENC) > 0  # a write drops them
        assert index.client.list_collections() == ["docs"]


@pytest.mark.parametrize("at", [2, 3])  # killed after one batch, after two
def test_a_killed_add_is_undone_and_re_running_it_adds_each_chunk_once(old, monkeypatch, at):
    location, texts = old
    monkeypatch.setattr(milvus_collection, "INSERT_BATCH", 2)
    documents = _docs()[1:]
    made = _inject(monkeypatch, "insert", at, Killed("insert"))
    index = MilvusIndex.open(location)
    with pytest.raises(Killed):
        index.add(documents, ENC)
    made[0]._client.close()
    monkeypatch.undo()
    monkeypatch.setattr(milvus_collection, "INSERT_BATCH", 2)
    with MilvusIndex.open(location) as partial:
        assert len(partial) == len(texts) + 2 * (at - 1)  # the kill left a partial add
        added = partial.add(documents, ENC)
        stored = _texts(partial)
        assert len(partial) == len(texts) + added and stored[: len(texts)] == texts
        assert [t for t, n in Counter(stored).items() if n > 1] == []  # nothing twice
        assert partial.add(documents, ENC) == 0  # and a third run adds nothing
    with MilvusIndex.open(location) as fresh:
        assert len(fresh) == len(stored) and "pending_add" not in str(fresh.properties)


def _sync_case(tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "terms.md").write_text("Either party may terminate the agreement on ninety (90) days notice.")
    (notes / "law.md").write_text("The agreement is governed by the laws of Ireland.")
    location = milvus_location(str(tmp_path / "notes.db"))
    MilvusIndex.build(location, read_documents([notes]), ENC, chunk_size=6, overlap=0).close()
    with MilvusIndex.open(location) as index:
        old = sorted(r["text"] for r in index.each_record())
    (notes / "terms.md").write_text("Either party may terminate the agreement on fourteen days notice.")
    (notes / "law.md").unlink()
    return notes, location, old


@pytest.mark.parametrize("method, at, state", [
    ("insert", 1, "old"),  # killed while inserting the new rows: the next write rolls back
    ("delete", 1, "new"),  # killed while deleting the replaced rows: the next write rolls forward
    ("drop_collection_properties", 1, "new"),  # killed just before the journal is dropped
])
def test_a_killed_sync_leaves_the_old_or_the_new_state_after_the_next_write(tmp_path, monkeypatch, method, at,
                                                                             state):
    notes, location, old = _sync_case(tmp_path)
    made = _inject(monkeypatch, method, at, Killed(method))
    index = MilvusIndex.open(location)
    with pytest.raises(Killed):
        index.sync([notes], ENC)
    made[0]._client.close()
    monkeypatch.undo()
    with MilvusIndex.open(location) as after:
        milvus_updates.prepare_write(after)  # what every write does first
        texts = sorted(r["text"] for r in after.each_record())
        assert "pending_add" not in str(after.client.describe_collection(location.collection)["properties"])
    if state == "old":
        assert texts == old
    else:
        assert "fourteen" in " ".join(texts) and "ninety" not in " ".join(texts) and "Ireland" not in " ".join(texts)
        assert Counter(texts).most_common(1)[0][1] == 1
    with MilvusIndex.open(location) as again:  # and the sync, run again, ends in the new state
        again.sync([notes], ENC)
        final = sorted(r["text"] for r in again.each_record())
    assert "fourteen" in " ".join(final) and "ninety" not in " ".join(final) and len(final) == 2
