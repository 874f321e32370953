"""A loaded index reads what a query needs and no more: a few vectors through pread (not the memory
map), the source table when asked — and both keep reading the version that was opened."""

import numpy as np
import pytest

from meteora_edge import HashingEncoder
from meteora_edge.index.corpus import SourceDocument
from meteora_edge.index.local_index import LocalIndex
from meteora_edge.index.local_reads import RowReader

DOCS = [SourceDocument(f"d{i}", f"clause {i} says party {i % 7} pays fee {i * 3} late", {"n": i}) for i in range(60)]


@pytest.fixture
def index(tmp_path):
    return LocalIndex.build(tmp_path / "ix", DOCS, HashingEncoder(), chunk_size=4, overlap=0)


@pytest.mark.parametrize("most", [0, 4096])  # every read through the mapping, or through pread
def test_vectors_for_gives_the_stored_rows_in_the_asked_order(index, monkeypatch, most):
    monkeypatch.setattr(RowReader, "_MOST", most)
    ids = [7, 3, 3, len(index) - 1, 0]
    mapped = np.asarray(index.vectors)
    got = index.vectors_for(ids)
    assert got.dtype == np.float32 and got.tobytes() == mapped[ids].tobytes()


def test_vectors_and_sources_keep_reading_the_opened_version(index, tmp_path):
    """A rebuild replaces the generation (and removes the old files); the opened version reads on."""
    rows = index.vectors_for([5, 1])
    LocalIndex.build(tmp_path / "ix", DOCS[:3], HashingEncoder(), chunk_size=4, overlap=0, overwrite=True)
    assert index.vectors_for([5, 1]).tobytes() == rows.tobytes()
    assert len(index.sources) == len(DOCS)  # read only now, from the version it opened
    assert sorted(index.sources)[0].endswith("d0")
