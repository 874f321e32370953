"""Phase 2, ``selection``: the rationales, then ECSE over the candidates, then the LLM rerank.

Rationales are the given ones, else the generator's, else written by rule from the query
(``rationales="auto"``; with ``"llm+auto"`` the generator's join the rule-written ones). Over an
index, each rule-written rationale other than the question retrieves for itself first
(:func:`~.phase_candidates.retrieve_for`). ECSE (:class:`~meteora_edge.selection.ecse.MeteoraSelector`)
then keeps the candidates its rules choose; its term cover runs only where the token cover
(after verification) cannot. With a relevance scorer, ECSE's best candidates are re-cut by
ECSE and LLM scores together (:func:`~.rules.llm_rerank`).
"""

from __future__ import annotations

from typing import Any

from ..errors import InputError
from ..selection.auto_rationales import question_rationales
from ..selection.ecse import MeteoraSelector
from ..selection.rationales import flag_rules, resolve_rationales, with_rules
from ..selection.token_cover import NO_WORD_PIECES, has_word_pieces
from .phase_candidates import retrieve_for
from .rules import llm_rerank, token_cover_blocked
from .run_state import RunState, Step

__all__ = ["selection"]


def selection(run: RunState, rationales: object | None) -> Step:
    """Choose the rationales and run ECSE; sets ``run.order`` to the selected positions, best first.

    Raises:
        InputError: more rationales than ``max_rationales``.
    """
    pipe, cfg = run.pipe, run.cfg
    chosen, origin, auto = _rationales(run, rationales)
    if len(chosen) > cfg.max_rationales:
        raise InputError(f"{len(chosen)} rationales, over max_rationales={cfg.max_rationales}")
    if not cfg.use_ecse or not run.texts:
        if auto:
            chosen = question_rationales(run.query)[0] + list(chosen)
        run.rules = tuple(dict.fromkeys([*flag_rules(chosen), *run.reject]))
        run.rationales = with_rules(chosen, run.reject)
        return Step(f"ECSE off; {len(run.order)} candidates pass on ({origin} rationales)",
                    {"rationale_source": origin, "rationales": [r.to_dict() for r in run.rationales], "ecse": False})
    # one cover of the question's words: the token cover after verification where it can run, else ECSE's term cover
    cover_blocked = token_cover_blocked(run) or (None if has_word_pieces(pipe.encoder) else NO_WORD_PIECES)
    selector = MeteoraSelector(pipe.encoder, expansion_window=cfg.expansion_window,
                               elbow_z_threshold=cfg.elbow_z_threshold, scoring=cfg.scoring,
                               lexical_weight=cfg.lexical_weight, pooled_cut=cfg.pooled_cut, pooled_z=cfg.pooled_z,
                               pooled_gap=cfg.pooled_gap, cover_z=cfg.cover_z if cover_blocked else None,
                               cover_lead=cfg.cover_lead, robust_z=cfg.robust_z, top_band=cfg.top_band,
                               pairing_band=cfg.pairing_band, analyzer=pipe.analyzer,
                               sparse_encoder=pipe.sparse_encoder if pipe.lexical_scorer == "sparse" else None)
    if auto:
        plan = selector.plan_auto(run.texts, run.query, chunk_vectors=run.vectors, lexical_index=run.lexical_index())
        if chosen:  # llm+auto: the generated rationales join the rule-written ones
            plan = plan.extended(chosen)
        if pipe.index is not None:
            for rationale in plan.rationales:
                if rationale.label != "question":
                    retrieve_for(run, pipe.index, rationale)
        result = selector.select(run.texts, plan.rationales, chunk_vectors=run.vectors, plan=plan,
                                 lexical_index=run.lexical_index())
    else:
        result = selector.select(run.texts, chosen, chunk_vectors=run.vectors, lexical_index=run.lexical_index())
    # the rerank lists every rule apart; the verifier reads the user's merged into the first rationale's
    run.rules = tuple(dict.fromkeys([*flag_rules(result.rationales), *run.reject]))
    run.rationales, run.rationale_vectors = with_rules(result.rationales, run.reject), result.rationale_vectors
    if len(run.rationales) > cfg.max_rationales:
        raise InputError(f"{len(run.rationales)} rationales, over max_rationales={cfg.max_rationales}")
    scores = result.scores()
    chosen_by = result.chosen_by()
    for i, record in enumerate(run.records):
        record.selected = i in chosen_by
        record.chosen_by = chosen_by.get(i)
        record.ecse_score = float(scores[i])
        run.priority[i] = (float(scores[i]), "selection")
    run.order = sorted(result.selected_indices, key=lambda i: (-scores[i], i))
    term_cover = ("off" if cfg.cover_z is None else f"on: {cover_blocked}" if cover_blocked
                  else "left to the token cover, which runs after verification")
    details: dict[str, Any] = {"rationale_source": origin, "rationales": [r.to_dict() for r in run.rationales],
                               "term_cover": term_cover, "ecse": result.to_dict()["details"]}
    summary = (f"ECSE kept {len(run.order)} of {len(run.texts)} ({len(run.rationales)} {origin} rationales, "
               f"{cfg.scoring} scores)")
    if pipe.relevance_scorer is not None and cfg.llm_pool is not None:
        details["llm_rerank"] = llm_rerank(run, scores)
        summary += f"; LLM rerank of {len(details['llm_rerank']['pool'])} kept {len(run.order)}"
    return Step(summary, details)


def _rationales(run: RunState, rationales: object | None) -> tuple[list[Any], str, bool]:
    """The rationales given or generated, where they came from, and whether ECSE writes more by rule."""
    cfg, generator = run.cfg, run.pipe.rationale_generator
    combine = rationales is None and generator is not None and cfg.rationales == "llm+auto"
    auto = rationales is None and (combine or (generator is None and cfg.rationales in ("auto", "llm+auto")))
    if combine:  # the model's rationales join the rule-written ones; none written leaves the rule's alone
        chosen, source = resolve_rationales(run.query, None, generator, fallback_to_query=True, documents=run.texts)
        return (chosen if source == "generated" else []), "llm+auto", auto
    if auto:
        return [], "auto", auto
    chosen, origin = resolve_rationales(run.query, rationales, generator, fallback_to_query=True, documents=run.texts)
    return chosen, origin, auto
