"""The ANN settings and structure at their edges: AnnConfig's exact bounds and messages, the
manifest entry's list count and probe at the clamps, the quantiser trained on every vector of a
small index, and the one-line errors when ann.faiss is unreadable or holds another structure."""

import numpy as np
import pytest

from meteora_edge.errors import ConfigError, LocalIndexError
from meteora_edge.index.ann_index import AnnConfig, AnnIndex, ann_entry, build_ann

faiss = pytest.importorskip("faiss")

MAX_PROBE = 1 << 20  # 1_048_576


# -- AnnConfig -------------------------------------------------------------------------------------

def test_an_unknown_kind_is_refused_listing_the_kinds():
    with pytest.raises(ConfigError) as info:
        AnnConfig(kind="lsh")
    assert str(info.value) == "ann kind must be one of ivf, hnsw, got 'lsh'"


@pytest.mark.parametrize("probe", [None, 1, 2, MAX_PROBE])
def test_probe_accepts_one_up_to_two_to_the_twentieth(probe):
    assert AnnConfig(kind="hnsw", probe=probe).probe == probe


@pytest.mark.parametrize("probe,shown", [(0, "0"), (-3, "-3"), (MAX_PROBE + 1, "1048577"), (1 << 21, "2097152"),
                                         (True, "True"), (2.0, "2.0"), ("8", "'8'")])
def test_a_probe_out_of_range_or_not_an_integer_is_refused_stating_the_range(probe, shown):
    with pytest.raises(ConfigError) as info:
        AnnConfig(probe=probe)
    assert str(info.value) == f"ann probe must be an integer in [1, 1048576] or None, got {shown}"


# -- the manifest entry ----------------------------------------------------------------------------

@pytest.mark.parametrize("count,lists,probe", [
    (1560, 40, 8),               # count // 39 binds (4·√1560 ≈ 158); probe is at least 8 lists
    (1599, 41, 8),
    (300_000_000, 65_536, 4096),  # the list count is capped at 65 536; probe = lists / 16
])
def test_ivf_lists_follow_the_tightest_clamp_and_probe_at_least_eight(count, lists, probe):
    assert ann_entry(AnnConfig(), count) == {"kind": "ivf", "factory": f"IVF{lists},SQ8", "probe": probe}


# -- build_ann -------------------------------------------------------------------------------------

def _unit_vectors(n: int, dim: int = 8, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
def test_a_small_index_trains_its_quantiser_on_every_vector(kind):
    """Below the training-sample size every vector is in the sample (none twice, none left out),
    so the 8-bit quantiser's range covers them all: each stored vector decodes to within one
    quantisation step of itself instead of being clipped."""
    vectors = _unit_vectors(60)
    structure = faiss.deserialize_index(np.frombuffer(build_ann(vectors, ann_entry(AnnConfig(kind=kind), 60)),
                                                      dtype=np.uint8))
    if kind == "ivf":
        faiss.extract_index_ivf(structure).make_direct_map()
    decoded = structure.reconstruct_n(0, 60)
    step = (vectors.max(axis=0) - vectors.min(axis=0)) / 255
    assert structure.ntotal == 60
    assert np.all(np.abs(decoded - vectors) <= step + 1e-6)


# -- loading ann.faiss -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ivf_bytes():
    vectors = _unit_vectors(100)
    entry = ann_entry(AnnConfig(), 100)
    return build_ann(vectors, entry), entry


def test_the_built_structure_loads_with_its_count(ivf_bytes):
    data, entry = ivf_bytes
    assert len(AnnIndex(data, entry, count=100, dimension=8, where="ann.faiss")) == 100


def test_unreadable_bytes_are_refused_quoting_the_last_line_of_faiss_error_cut_to_120_characters(ivf_bytes):
    """faiss's message names a C++ function and source line; the error quotes only its last line,
    cut to 120 characters, so it stays one readable line."""
    data, entry = ivf_bytes
    truncated = data[:999]
    with pytest.raises(RuntimeError) as raw:
        faiss.deserialize_index(np.frombuffer(truncated, dtype=np.uint8))
    last = str(raw.value).strip().splitlines()[-1]
    assert len(last) > 120
    with pytest.raises(LocalIndexError) as info:
        AnnIndex(truncated, entry, count=100, dimension=8, where="gen-3/ann.faiss")
    assert str(info.value) == f"gen-3/ann.faiss is not a readable faiss structure ({last[:120]}); rebuild the index"


@pytest.mark.parametrize("error", [RuntimeError(), ValueError("  \n ")])
def test_a_faiss_failure_without_a_message_is_named_by_its_type(ivf_bytes, monkeypatch, error):
    data, entry = ivf_bytes

    def fails(_buffer):
        raise error

    monkeypatch.setattr(faiss, "deserialize_index", fails)
    with pytest.raises(LocalIndexError) as info:
        AnnIndex(data, entry, count=100, dimension=8, where="ann.faiss")
    assert str(info.value) == f"ann.faiss is not a readable faiss structure ({type(error).__name__}); rebuild the index"


def test_a_structure_of_another_dimension_is_refused_saying_what_it_holds(ivf_bytes):
    data, entry = ivf_bytes
    with pytest.raises(LocalIndexError) as info:
        AnnIndex(data, entry, count=100, dimension=16, where="ann.faiss")
    assert str(info.value) == ("ann.faiss holds a IndexIVFScalarQuantizer of 100 vectors of dimension 8, "
                               "expected ivf over 100 of dimension 16; rebuild the index")


def test_a_structure_measuring_euclidean_distance_is_refused():
    """The right kind, size and dimension is not enough: scores assume inner products."""
    vectors = _unit_vectors(100)
    structure = faiss.index_factory(8, "IVF2,SQ8", faiss.METRIC_L2)
    structure.train(vectors)
    structure.add(vectors)
    data = bytes(faiss.serialize_index(structure))
    with pytest.raises(LocalIndexError) as info:
        AnnIndex(data, ann_entry(AnnConfig(), 100), count=100, dimension=8, where="ann.faiss")
    assert str(info.value) == ("ann.faiss holds a IndexIVFScalarQuantizer of 100 vectors of dimension 8, "
                               "expected ivf over 100 of dimension 8; rebuild the index")


@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
def test_float64_or_strided_vectors_build_the_same_structure_as_contiguous_float32(kind):
    """build_ann hands faiss its vectors as they come (a memory map, a slice, another float type):
    the structure is the one built from a contiguous float32 copy."""
    vectors = _unit_vectors(60)
    entry = ann_entry(AnnConfig(kind=kind), 60)
    strided = np.repeat(vectors.astype(np.float64), 2, axis=0)[::2]
    assert strided.dtype == np.float64 and not strided.flags.c_contiguous
    assert build_ann(strided, entry) == build_ann(vectors, entry)


# -- loading from the open file: memory-mapped ------------------------------------------------------

@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
def test_a_structure_read_from_its_open_file_proposes_what_the_bytes_propose(tmp_path, kind):
    """From an open file the lists (IVF) or codes (HNSW) are mapped, not copied; the candidates are the
    same, and stay readable once the file is closed and replaced (a writer switching generations)."""
    vectors = _unit_vectors(300)
    entry = ann_entry(AnnConfig(kind=kind, probe=4), 300)
    data = build_ann(vectors, entry)
    (tmp_path / "ann.faiss").write_bytes(data)
    with open(tmp_path / "ann.faiss", "rb") as handle:
        mapped = AnnIndex(handle, entry, count=300, dimension=8, where="ann.faiss")
    (tmp_path / "ann.faiss").unlink()
    loaded = AnnIndex(data, entry, count=300, dimension=8, where="ann.faiss")
    for row in vectors[:20]:
        assert mapped.candidates(row, 10).tolist() == loaded.candidates(row, 10).tolist()


def test_a_truncated_open_file_is_refused_in_one_line(tmp_path, ivf_bytes):
    data, entry = ivf_bytes
    (tmp_path / "ann.faiss").write_bytes(data[:999])
    with open(tmp_path / "ann.faiss", "rb") as handle, pytest.raises(LocalIndexError) as info:
        AnnIndex(handle, entry, count=100, dimension=8, where="gen-3/ann.faiss")
    message = str(info.value)
    assert message.startswith("gen-3/ann.faiss is not a readable faiss structure (") and "\n" not in message
    assert message.endswith("); rebuild the index")


def test_a_written_structure_streams_the_bytes_build_ann_returns(tmp_path, monkeypatch):
    """write_ann (what a build uses: vectors read from its spool a block at a time, the serialisation
    streamed to the file) writes exactly what build_ann returns."""
    monkeypatch.setattr("meteora_edge.index.vector_spool._BLOCK_ROWS", 7)  # the training sample spans blocks
    from meteora_edge.index.ann_index import write_ann
    from meteora_edge.index.vector_spool import VectorSpool

    vectors = _unit_vectors(300)
    entry = ann_entry(AnnConfig(), 300)
    with VectorSpool(300, tmp_path) as spool:
        spool.put(np.arange(300)[::-1], vectors[::-1])
        with open(tmp_path / "ann.faiss", "wb") as out:
            write_ann(spool, entry, out)
    assert (tmp_path / "ann.faiss").read_bytes() == build_ann(vectors, entry)
