"""The generation manifest's own fields are checked against each other and the data when an
index is opened, even with every file hash recomputed (M4)."""

from __future__ import annotations

import copy

import pytest

from meteora_edge import HashingEncoder
from meteora_edge.errors import LocalIndexError
from meteora_edge.index.corpus import SourceDocument
from meteora_edge.index.local_index import LocalIndex
from meteora_edge.index.manifest import check_manifest

from test_index_manifest import _generation, _rewrite
from test_manifest_schema import VALID, _edited

DOCS = [SourceDocument("a", "one two three four five six seven eight"), SourceDocument("b", "nine ten eleven")]

REFUSED = [
    (_edited("created", "yesterday"), "manifest.created must be an ISO 8601 time with a UTC offset, got 'yesterday'"),
    (_edited("updated", "2025-01-02T00:00:00"), "manifest.updated must be an ISO 8601 time with a UTC offset, got "
                                                "'2025-01-02T00:00:00'"),
    (_edited("updated", "2024-12-31T23:59:59+00:00"),
     "manifest.updated (2024-12-31T23:59:59+00:00) is before manifest.created (2025-01-01T00:00:00+00:00)"),
    (_edited("last_write.chunks", 4), "manifest.last_write.chunks (4) is more than manifest.count (3)"),
    (_edited("last_write.chunks", 2), "manifest.last_write is a build of 2 chunks, but manifest.count is 3"),
]


@pytest.mark.parametrize(("manifest", "problem"), REFUSED)
def test_inconsistent_fields_are_refused_in_one_line_naming_the_file(manifest, problem):
    with pytest.raises(LocalIndexError) as info:
        check_manifest(manifest, "ix/gen/manifest.json", version=2)
    assert str(info.value) == f"ix/gen/manifest.json is corrupt: {problem}; rebuild the index"


def test_an_add_may_write_fewer_chunks_than_the_count():
    manifest = _edited("last_write.op", "add", _edited("last_write.chunks", 1))
    assert check_manifest(copy.deepcopy(manifest), "m", version=2) == manifest


EDITS = {
    "chunk-size-lowered": (lambda m: m["chunking"].update(chunk_size=3, overlap=0), "chunk_size is 3, but chunk 0"),
    "created-garbled": (lambda m: m.update(created="not a time"), "manifest.created must be an ISO 8601 time"),
    "build-count-off": (lambda m: m["last_write"].update(chunks=m["count"] - 1), "manifest.last_write is a build"),
    "updated-before-created": (lambda m: m.update(updated="2000-01-01T00:00:00+00:00"), "is before manifest.created"),
}


@pytest.mark.parametrize("name", sorted(EDITS))
def test_an_edited_generation_manifest_is_refused_when_opened(tmp_path, name):
    LocalIndex.build(tmp_path / "ix", DOCS, HashingEncoder(), chunk_size=5, overlap=1)
    gen = _generation(tmp_path / "ix")
    change, needle = EDITS[name]
    _rewrite(gen, change)
    for verify in (True, False):
        with pytest.raises(LocalIndexError) as info:
            LocalIndex.load(tmp_path / "ix", verify=verify)
        message = str(info.value)
        assert message.startswith(f"{gen / 'manifest.json'} is corrupt: ") and needle in message, message
        assert "\n" not in message


def test_a_manifest_that_tells_the_truth_still_opens(tmp_path):
    LocalIndex.build(tmp_path / "ix", DOCS, HashingEncoder(), chunk_size=5, overlap=1)
    _rewrite(_generation(tmp_path / "ix"))
    assert len(LocalIndex.load(tmp_path / "ix")) == 3
    assert VALID["count"] == 3
