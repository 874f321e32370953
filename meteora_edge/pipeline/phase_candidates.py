"""Phase 1, ``candidates``: the caller's passages, or a local index's best chunks for the query.

From an index: kNN (``k_init``), and with hybrid or lexical scoring also BM25's ``k_init``
best, ranked by the fused score (:mod:`.retrieval`). Every candidate gets its retrieval,
dense and lexical scores; the retrieval score is its priority until selection gives another.
:func:`retrieve_for` adds an index's chunks for one rule-written rationale (the selection
phase calls it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..documents import document_texts
from ..errors import InputError
from ..index.corpus_index import CorpusIndex
from ..models.encoders import embed
from .retrieval import cosines, fused, index_candidates, lexical_search
from .run_state import RunState, Step

__all__ = ["candidates", "retrieve_for"]


def candidates(run: RunState, passages: Sequence[object] | None) -> Step:
    """Fill ``run`` with the candidates and their scores.

    Raises:
        InputError: too many or too long passages, or no passages and no index.
    """
    cfg, pipe = run.cfg, run.pipe
    run.query_vector = embed(pipe.encoder, [run.query], check=run.checker)[0]
    if passages is not None:
        texts = document_texts(passages)
        if len(texts) > cfg.max_candidates:
            raise InputError(f"{len(texts)} passages, over max_candidates={cfg.max_candidates}; raise the limit or pre-filter")
        long = next((i for i, t in enumerate(texts) if len(t) > cfg.max_chunk_chars), None)
        if long is not None:
            raise InputError(f"passage {long} has {len(texts[long])} characters, over max_chunk_chars={cfg.max_chunk_chars}")
        vectors = (embed(pipe.encoder, texts, check=run.checker) if texts
                   else np.zeros((0, run.query_vector.shape[0])))
        dense = cosines(vectors, run.query_vector)
        for i, text in enumerate(texts):
            run.add(text, passages[i], i, i, None)
        lexical = run.candidate_lexical().text_scores(run.query) if cfg.scoring != "dense" and texts else None
        run.vectors = np.asarray(vectors, dtype=np.float32)
        source = "passages"
    elif pipe.index is not None:
        ids, dense, lexical = _index_candidates(run, pipe.index)
        records = pipe.index.records(ids)
        for chunk_id, record in zip(ids, records):
            run.add(record["text"], record, int(chunk_id), record.get("id", chunk_id), None)
        run.vectors = np.asarray(pipe.index.vectors_for(ids), dtype=np.float32) if ids else np.zeros(
            (0, run.query_vector.shape[0]), dtype=np.float32)
        source = "knn" if cfg.scoring == "dense" else f"knn+{pipe.lexical_scorer}"
    else:
        raise InputError("no candidates: pass passages=… or build the pipeline with an index")
    retrieval = _fuse(run, dense, lexical)
    for i, record in enumerate(run.records):
        record.retrieval_score = float(retrieval[i])
        record.dense_score = float(dense[i])
        record.lexical_score = None if lexical is None else float(lexical[i])
        run.priority[i] = (record.retrieval_score, "retrieval")
    run.order = list(range(len(run.texts)))
    return Step(f"{len(run.texts)} candidates from {source} ({cfg.scoring} scores)",
                {"source": source, "k_init": cfg.k_init if source != "passages" else None, "scoring": cfg.scoring})


def _index_candidates(run: RunState, index: CorpusIndex) -> tuple[list[int], np.ndarray, np.ndarray | None]:
    """kNN's best (and BM25's best unless scoring is dense), ranked by the fused score, best first."""
    return index_candidates(index, run.query, run.query_vector, run.cfg.k_init, scoring=run.cfg.scoring,
                            lexical_weight=run.cfg.lexical_weight, lexical_scorer=run.pipe.lexical_scorer,
                            sparse_encoder=run.pipe.sparse_encoder)


def _fuse(run: RunState, dense: np.ndarray, lexical: np.ndarray | None) -> np.ndarray:
    return fused(dense, lexical, scoring=run.cfg.scoring, lexical_weight=run.cfg.lexical_weight)


def retrieve_for(run: RunState, index: CorpusIndex, rationale: Any) -> None:
    """Fetch the index's best chunks for one rule-written rationale into the candidates.

    A compared name's evidence or a second hop's bridge evidence shares little with the
    question as a whole, so kNN for the question often misses it; such a rationale
    retrieves for itself (kNN and, unless scoring is dense, BM25; ``k_init`` each). ECSE, which
    runs next over all the candidates, gives the fetched ones their priority.
    """
    text = rationale.text
    vector = embed(run.pipe.encoder, [text], check=run.checker)[0]
    found = [int(c) for c in index.search(vector, run.cfg.k_init)[0]]
    if run.cfg.scoring != "dense":
        found += [int(c) for c in lexical_search(index, text, run.cfg.k_init, run.pipe.lexical_scorer,
                                                 run.pipe.sparse_encoder)[0]]
    have = set(run.ids)
    new_ids = [c for c in dict.fromkeys(found) if c not in have]
    if not new_ids:
        return
    records = index.records(new_ids)
    run.vectors = np.concatenate([run.vectors, np.asarray(index.vectors_for(new_ids), dtype=np.float32)])
    dense = cosines(run.vectors[-len(new_ids):], run.query_vector)
    for c, record, cosine in zip(new_ids, records, dense):
        position = run.add(record["text"], record, c, record.get("id", c), None)
        run.records[position].dense_score = float(cosine)
        run.records[position].retrieved_for = f"rationale {rationale.index} ({rationale.label})"
