"""The lexical half of the hybrid score by a learned sparse model: its dot products replace BM25 in the
candidates' scores, ECSE and the eval baselines; "auto" follows the index; every misuse is one line."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from meteora_edge import HashingEncoder
from meteora_edge.cli.main import main
from meteora_edge.errors import ConfigError, InputError, LocalIndexError
from meteora_edge.evaluation.datasets import EvalQuestion
from meteora_edge.evaluation.methods import CachedEncoder, build_method
from meteora_edge.index.memory_index import InMemoryIndex
from meteora_edge.models.sparse_index import SparseVector
from meteora_edge.models.sparse_index import SparseIndex
from meteora_edge.pipeline.config import PipelineConfig
from meteora_edge.pipeline.engine import EvidencePipeline
from meteora_edge.pipeline.retrieval import resolve_lexical_scorer
from meteora_edge.selection.ecse import MeteoraSelector
from meteora_edge.selection.stages import fuse_scores


sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sparse_fakes import FakeSparse, encoder_with_sparse  # noqa: E402


def _encoder() -> HashingEncoder:
    return encoder_with_sparse()


PASSAGES = ["Fees are due monthly.", "The supplier ships goods weekly.", "Either party may cancel this agreement.",
            "Notices are sent by post.", "Payment is made in euros."]
QUERY = "terminate how?"  # shares no word with the clause that answers it (2)


def test_sparse_postings_score_the_dot_product_and_round_trip(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    vectors = []
    for _ in range(30):
        ids = np.sort(rng.choice(200, size=rng.integers(1, 20), replace=False)).astype(np.int32)
        vectors.append(SparseVector(ids, rng.random(ids.size).astype(np.float32) + 0.01))
    index = SparseIndex(vectors[:20]).extend(vectors[20:])
    query = vectors[3]
    brute = np.array([query.dot(v) for v in vectors])
    assert np.allclose(index.vector_scores(query), brute)
    index.save(tmp_path)
    loaded = SparseIndex.load(tmp_path, n_docs=30)
    assert np.allclose(loaded.vector_scores(query), brute) and loaded.n_postings == index.n_postings
    with pytest.raises(LocalIndexError, match="outside 0..9") as info:
        SparseIndex.load(tmp_path, n_docs=10)  # postings that name documents the index does not hold
    assert "\n" not in str(info.value)


def test_the_sparse_scorer_is_the_lexical_half_of_the_candidates_score() -> None:
    config = PipelineConfig(lexical_scorer="sparse", verification="none", n_min=None, theta_redundancy=None, t_max=None)
    result = EvidencePipeline(config, encoder=_encoder()).run(QUERY, passages=PASSAGES)
    records = sorted(result.trace.candidates, key=lambda c: c.candidate)
    sparse = FakeSparse()
    query, *docs = sparse.encode_sparse([QUERY, *PASSAGES])
    lexical = np.array([query.dot(d) for d in docs])
    assert [r.lexical_score for r in records] == pytest.approx(lexical.tolist())
    assert lexical[2] > 0 and np.count_nonzero(lexical) == 1  # "cancel" implies "terminate"
    dense = np.array([r.dense_score for r in records])
    fused = fuse_scores(dense[None, :], lexical[None, :], scoring="hybrid")[0]
    assert [r.retrieval_score for r in records] == pytest.approx(fused.tolist())
    assert result.ids[0] == 2 and result.trace.config["lexical"] == "sparse:fake"
    bm25 = EvidencePipeline(PipelineConfig(lexical_scorer="bm25", verification="none"), encoder=_encoder())
    plain = bm25.run(QUERY, passages=PASSAGES).trace.candidates
    assert sorted(plain, key=lambda c: c.candidate)[2].lexical_score == 0.0  # BM25 gives the clause nothing


def test_auto_follows_the_index_and_stays_bm25_for_passages() -> None:
    encoder = _encoder()
    sparse_index = InMemoryIndex(PASSAGES, encoder, sparse_encoder=encoder.sparse_encoder)
    assert EvidencePipeline(PipelineConfig(), encoder=encoder, index=sparse_index).lexical_scorer == "sparse"
    assert EvidencePipeline(PipelineConfig(), encoder=encoder).lexical_scorer == "bm25"
    assert EvidencePipeline(PipelineConfig(), encoder=encoder, index=InMemoryIndex(PASSAGES, encoder)).lexical_scorer == "bm25"
    run = EvidencePipeline(PipelineConfig(verification="none"), encoder=encoder, index=sparse_index).run(QUERY)
    assert run.trace.phases[0].details["source"] == "knn+sparse" and 2 in run.ids


@pytest.mark.parametrize("setting, sparse, index, needle", [
    ("sparse", False, None, "needs a learned sparse model"),
    ("sparse", True, "bm25", "built without sparse postings"),
    ("auto", False, "sparse", "was built with the learned sparse model"),
])
def test_a_scorer_that_cannot_run_is_refused_in_one_line(setting: str, sparse: bool, index: str | None,
                                                         needle: str) -> None:
    built = None if index is None else type("Index", (), {"lexical_scorer": index})()
    with pytest.raises(ConfigError, match=needle) as info:
        resolve_lexical_scorer(setting, sparse_encoder=FakeSparse() if sparse else None, index=built)
    assert "\n" not in str(info.value)
    with pytest.raises(ConfigError, match="lexical_scorer must be one of auto, bm25, sparse"):
        PipelineConfig(lexical_scorer="splade")


def test_ecse_scores_rationales_by_the_sparse_model_and_checks_its_index() -> None:
    encoder = _encoder()
    selector = MeteoraSelector(encoder, scoring="lexical", expansion_window=0, sparse_encoder=encoder.sparse_encoder)
    result = selector.select(PASSAGES, ["the right to end the contract"])
    assert result.selected_indices == [2] and result.lexical_scores[2] > 0
    other = SparseIndex.from_texts(PASSAGES[:2], encoder=encoder.sparse_encoder)
    with pytest.raises(InputError, match="holds 2 documents but there are 5 chunks"):
        selector.select(PASSAGES, ["end"], lexical_index=other)
    with pytest.raises(InputError, match="has no sparse_encoder"):
        MeteoraSelector(encoder, scoring="hybrid").select(PASSAGES, ["end"], lexical_index=other)


def test_eval_baselines_rank_by_the_sparse_model_and_encode_each_text_once() -> None:
    encoder = CachedEncoder(_encoder())
    question = EvalQuestion(qid="q", question=QUERY, answer="", candidates=PASSAGES, gold=frozenset({2}))
    assert build_method("topk-sparse:1", encoder)(question) == [2]
    assert build_method("topk-hybrid-sparse:1", encoder)(question) == [2]
    assert build_method("bm25:1", encoder)(question) != [2]
    calls = encoder.inner.sparse_encoder.calls
    build_method("topk-sparse:2", encoder)(question)
    assert encoder.inner.sparse_encoder.calls == calls  # the memo answered
    with pytest.raises(ConfigError, match="'topk-sparse:2' needs the learned sparse model"):
        build_method("topk-sparse:2", HashingEncoder())


def test_select_refuses_sparse_without_the_model_in_one_line(tmp_path: Path) -> None:
    chunks = tmp_path / "chunks.json"
    chunks.write_text(json.dumps(PASSAGES), encoding="utf-8")
    result = CliRunner().invoke(main, ["select", "--chunks", str(chunks), "--query", QUERY, "--lexical-scorer", "sparse"])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    errors = [line for line in result.output.splitlines() if not line.startswith("note:")]
    assert len(errors) == 1 and errors[0].startswith("Error: ") and "needs a learned sparse model" in errors[0]
