"""The optional ANN structure of the local index: recall against exact search, exact scores,
equality on tiny indexes, index add, and refusal of a tampered or mismatched ann.faiss."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from meteora_edge import HashingEncoder
from meteora_edge.cli.main import main
from meteora_edge.errors import InputError, LocalIndexError, MissingExtraError
from meteora_edge.index.ann_index import AnnConfig, ann_entry
from meteora_edge.index.corpus import SourceDocument
from meteora_edge.index.local_index import LocalIndex

from test_index_manifest import _generation, _rewrite  # recompute every hash, as an attacker would

pytest.importorskip("faiss")

ENC = HashingEncoder()
KINDS = ["ivf", "hnsw"]


def _corpus(n: int, seed: int = 3) -> list[SourceDocument]:
    """Documents of 12 words from a Zipf-like vocabulary of 600 words (overlapping, like real text)."""
    rng = np.random.default_rng(seed)
    probs = 1.0 / np.arange(1, 601) ** 1.05
    probs /= probs.sum()
    return [SourceDocument(str(i), " ".join(f"w{w}" for w in rng.choice(600, size=12, p=probs)), {})
            for i in range(n)]


def _queries(n: int) -> list[np.ndarray]:
    return [ENC.encode([d.text.rsplit(" ", 7)[0]])[0] for d in _corpus(n, seed=99)]


@pytest.fixture(scope="module", params=KINDS)
def built(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"ann-{request.param}") / "ix"
    return LocalIndex.build(root, _corpus(3000), ENC, chunk_size=64, overlap=0, ann=AnnConfig(kind=request.param))


def test_ann_recall_against_exact_search_on_a_random_corpus(built):
    recalls = []
    for q in _queries(40):
        ids, scores = built.search(q, 10, exact=False)
        exact_ids, exact_scores = built.search(q, 10, exact=True)
        assert len(ids) == 10 and list(scores) == sorted(scores, reverse=True)
        # the ANN proposes, exact cosines decide: the scores are the true cosines of those chunks
        np.testing.assert_allclose(scores, np.asarray(built.vectors[ids]) @ (q / np.linalg.norm(q)), rtol=1e-5)
        recalls.append(np.mean(scores >= exact_scores[-1] - 1e-6))  # ties at the k-th score count as hits
    assert np.mean(recalls) >= 0.8, np.mean(recalls)


def test_small_indexes_search_exactly_even_with_an_ann(built):
    q = _queries(1)[0]
    for a, b in zip(built.search(q, 10), built.search(q, 10, exact=True)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("kind", KINDS)
def test_on_a_tiny_index_ann_and_exact_return_the_same(tmp_path, kind):
    index = LocalIndex.build(tmp_path / "ix", _corpus(50), ENC, chunk_size=64, overlap=0, ann=AnnConfig(kind=kind))
    for q in _queries(10):
        ann_ids, ann_scores = index.search(q, 5, exact=False)
        exact_ids, exact_scores = index.search(q, 5, exact=True)
        np.testing.assert_array_equal(ann_ids, exact_ids)
        np.testing.assert_allclose(ann_scores, exact_scores, rtol=1e-6)


@pytest.mark.parametrize("kind", KINDS)
def test_index_add_searches_the_new_chunks_beside_the_ann(tmp_path, kind):
    """An add writes a delta segment: the ANN structure keeps covering the base segment, the delta
    is searched exactly, and a compaction builds the structure over everything again."""
    index = LocalIndex.build(tmp_path / "ix", _corpus(200), ENC, chunk_size=64, overlap=0, ann=AnnConfig(kind=kind))
    grown = index.add([SourceDocument("new", "zebra quartz xylophone", {})], ENC)
    assert len(grown) == 201 and len(grown.ann) == 200 and grown.manifest["ann"] == index.manifest["ann"]
    assert len(grown.compact().ann) == 201
    ids, _ = grown.search(ENC.encode(["zebra quartz"])[0], 1, exact=False)
    assert grown.records(ids)[0]["source"] == "new"
    assert LocalIndex.load(tmp_path / "ix").info()["ann"]["kind"] == kind


def test_exact_false_without_an_ann_is_refused(tmp_path):
    index = LocalIndex.build(tmp_path / "ix", _corpus(20), ENC, chunk_size=64, overlap=0)
    assert index.ann is None and index.info()["ann"] is None
    with pytest.raises(InputError, match="no ANN structure"):
        index.search(_queries(1)[0], 3, exact=False)


@pytest.mark.parametrize("config,count,factory,probe", [
    (AnnConfig(kind="ivf"), 1_000_000, "IVF4000,SQ8", 250),
    (AnnConfig(kind="ivf"), 100_000, "IVF1265,SQ8", 80),
    (AnnConfig(kind="ivf"), 50, "IVF1,SQ8", 1),
    (AnnConfig(kind="ivf", probe=7), 100_000, "IVF1265,SQ8", 7),
    (AnnConfig(kind="hnsw"), 10, "HNSW32,SQ8", 256),
])
def test_ann_sizes_follow_the_corpus(config, count, factory, probe):
    assert ann_entry(config, count) == {"kind": config.kind, "factory": factory, "probe": probe}


@pytest.mark.parametrize("kwargs", [{"kind": "lsh"}, {"probe": 0}, {"probe": True}, {"probe": 1.5}])
def test_bad_ann_settings_are_refused(kwargs):
    with pytest.raises(ValueError):
        AnnConfig(**kwargs)


# -- a tampered ann.faiss or manifest entry is refused in one line ---------------------------------

def _other_ann(tmp_path: Path, kind: str, n: int) -> bytes:
    other = LocalIndex.build(tmp_path / f"other-{kind}-{n}", _corpus(n, seed=5), ENC, chunk_size=64, overlap=0,
                             ann=AnnConfig(kind=kind))
    return (_generation(other.root) / "ann.faiss").read_bytes()


TAMPERING = {
    "flipped-byte-hash-kept": (lambda g, t: _flip(g / "ann.faiss"), False, "sha256"),
    "garbage-rehashed": (lambda g, t: (g / "ann.faiss").write_bytes(b"\0" * 4096), True, "not a readable faiss"),
    "truncated-rehashed": (lambda g, t: (g / "ann.faiss").write_bytes((g / "ann.faiss").read_bytes()[:999]), True,
                           "not a readable faiss"),
    "other-size-rehashed": (lambda g, t: (g / "ann.faiss").write_bytes(_other_ann(t, "ivf", 90)), True, "expected"),
    "other-kind-rehashed": (lambda g, t: (g / "ann.faiss").write_bytes(_other_ann(t, "hnsw", 120)), True, "expected"),
    "file-removed": (lambda g, t: (g / "ann.faiss").unlink(), False, "missing"),
}


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("name", sorted(TAMPERING))
def test_a_tampered_ann_file_is_refused(tmp_path, name):
    LocalIndex.build(tmp_path / "ix", _corpus(120), ENC, chunk_size=64, overlap=0, ann=AnnConfig(kind="ivf"))
    gen = _generation(tmp_path / "ix")
    change, rehash, expected = TAMPERING[name]
    change(gen, tmp_path)
    if rehash:
        _rewrite(gen)
    with pytest.raises(LocalIndexError) as info:
        LocalIndex.load(tmp_path / "ix")
    assert expected in str(info.value) and "\n" not in str(info.value), str(info.value)


MANIFEST_EDITS = {
    "ann-entry-dropped": lambda m: m.pop("ann"),
    "ann-file-unlisted": lambda m: m["files"].pop("ann.faiss"),
    "kind-unknown": lambda m: m["ann"].update(kind="lsh"),
    "factory-not-ours": lambda m: m["ann"].update(factory="IVF100,PQ8"),
    "factory-of-another-kind": lambda m: m["ann"].update(factory="HNSW32,SQ8"),
    "probe-zero": lambda m: m["ann"].update(probe=0),
    "extra-key": lambda m: m["ann"].update(path="/tmp/x"),
}


@pytest.mark.parametrize("name", sorted(MANIFEST_EDITS))
def test_ann_manifest_entries_off_the_schema_are_refused(tmp_path, name):
    LocalIndex.build(tmp_path / "ix", _corpus(120), ENC, chunk_size=64, overlap=0, ann=AnnConfig(kind="ivf"))
    _rewrite(_generation(tmp_path / "ix"), MANIFEST_EDITS[name])
    with pytest.raises(LocalIndexError, match="corrupt"):
        LocalIndex.load(tmp_path / "ix")


# -- the command line -------------------------------------------------------------------------------

def _docs_file(tmp_path: Path) -> Path:
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps({"text": d.text}) + "\n" for d in _corpus(80)))
    return path


def test_cli_builds_an_ann_index_and_selects_over_it(tmp_path):
    runner = CliRunner()
    docs = _docs_file(tmp_path)
    built = runner.invoke(main, ["index", "build", str(docs), "--out", str(tmp_path / "ix"), "--ann", "hnsw",
                                 "--ann-probe", "40"])
    assert built.exit_code == 0, built.output
    info = json.loads(runner.invoke(main, ["index", "info", str(tmp_path / "ix")]).output)
    assert info["ann"] == {"factory": "HNSW32,SQ8", "kind": "hnsw", "probe": 40} and info["chunks"] == 80
    out = runner.invoke(main, ["select", "--index", str(tmp_path / "ix"), "-q", "w1 w2 w3", "--compact"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output.splitlines()[-1])["passages"]


def test_cli_ann_probe_needs_ann(tmp_path):
    result = CliRunner().invoke(main, ["index", "build", str(_docs_file(tmp_path)), "--out", str(tmp_path / "ix"),
                                       "--ann-probe", "4"])
    assert result.exit_code == 1 and result.output.count("\n") == 1 and "add --ann" in result.output


def test_without_faiss_ann_is_one_line_naming_the_extra(tmp_path, monkeypatch):
    LocalIndex.build(tmp_path / "ann", _corpus(60), ENC, chunk_size=64, overlap=0, ann=AnnConfig(kind="ivf"))
    monkeypatch.setitem(sys.modules, "faiss", None)
    result = CliRunner().invoke(main, ["index", "build", str(_docs_file(tmp_path)), "--out", str(tmp_path / "ix"),
                                       "--ann", "ivf"])
    assert result.exit_code == 1 and result.output.count("\n") == 1
    assert 'pip install "meteora-edge[ann]"' in result.output and not (tmp_path / "ix").exists()
    with pytest.raises(MissingExtraError, match=r"meteora-edge\[ann\]"):
        LocalIndex.load(tmp_path / "ann")
