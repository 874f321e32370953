"""An ann.faiss whose stored ids leave the index (hashes recomputed) is one LocalIndexError in a search (T4)."""

from __future__ import annotations

import numpy as np
import pytest

from meteora_edge import HashingEncoder
from meteora_edge.errors import LocalIndexError
from meteora_edge.index.ann_index import AnnConfig
from meteora_edge.index.local_index import LocalIndex

from test_ann_index import _corpus
from test_index_manifest import _generation, _rewrite

faiss = pytest.importorskip("faiss")
ENC = HashingEncoder()


@pytest.mark.parametrize("shift", [1000, -50])
def test_candidate_ids_outside_the_index_are_refused_in_one_line(tmp_path, shift):
    index = LocalIndex.build(tmp_path / "ix", _corpus(120), ENC, chunk_size=64, overlap=0, ann=AnnConfig(kind="ivf"))
    vectors = np.asarray(index.vectors)
    forged = faiss.index_factory(vectors.shape[1], index.manifest["ann"]["factory"], faiss.METRIC_INNER_PRODUCT)
    forged.train(vectors)
    forged.add_with_ids(vectors, np.arange(len(vectors), dtype=np.int64) + shift)  # same size, kind and dimension
    gen = _generation(tmp_path / "ix")
    (gen / "ann.faiss").write_bytes(bytes(faiss.serialize_index(forged)))
    _rewrite(gen)
    reopened = LocalIndex.load(tmp_path / "ix")
    with pytest.raises(LocalIndexError) as info:
        reopened.search(ENC.encode([_corpus(120)[0].text])[0], 5, exact=False)
    message = str(info.value)
    assert "ann.faiss proposes chunk id" in message and "outside the index (0..119)" in message, message
    assert "\n" not in message


def test_in_range_candidates_still_search(tmp_path):
    index = LocalIndex.build(tmp_path / "ix", _corpus(120), ENC, chunk_size=64, overlap=0, ann=AnnConfig(kind="ivf"))
    ids, _ = index.search(ENC.encode([_corpus(120)[7].text])[0], 3, exact=False)
    assert ids[0] == 7
