"""Preference data for DPO training of the rationale generator (no torch).

A *record* is one query with its preferences, in one of two forms:

* explicit: ``{"query": …, "preferred": C, "rejected": C}`` where ``C`` is one completion
  (a rationale text in any form :func:`~meteora_edge.selection.rationales.parse_rationales` reads) or a
  list of completions (each a text or a list of rationale strings);
* labelled candidates: ``{"query": …, "candidates": [{"rationales": …, "selected": [ids]}, …],
  "gold": [ids]}`` — each candidate is a rationale set and the chunk ids ECSE selected with it.

METEORA's own record shapes and key names (``preferred_rationales``, ``rationale_candidates``
with ``correct_chunks``, ``question``, …) are read too: see :mod:`meteora_edge.training.dpo_records`.

Labelling rule for candidates (score = F1 of ``selected`` against ``gold``):
preferred are the candidates with the best score, provided it is above 0 (ties all kept,
in input order); rejected are the candidates with no gold hit at all, or whose score is at
least ``min_margin`` below the best (worst first, ties in input order).

Pairing rule (both forms): with preferred ``P`` and rejected ``R`` in that order, pair ``k``
is ``(P[k mod |P|], R[k mod |R|])`` for ``k < min(max(|P|, |R|), max_pairs)``, so every
completion is used before any repeats; pairs whose two completions read the same are dropped.

The prompt of every pair is the rationale generator's own few-shot chat
(:meth:`LlamaRationaleGenerator.messages`), optionally preceded by oracle evidence;
completions are written in the canonical ``<rationale_N>…</rationale_N>`` form the
generator parses. Rows follow TRL's conversational preference layout; reading records and
writing the splits live in :mod:`meteora_edge.training.dpo_files`.

Example:
    >>> from meteora_edge.training.dpo_data import PreparedData, prepare_preferences
    >>> records = [{"query": "Who may terminate?", "preferred": "[Termination] Find who may end it.",
    ...             "rejected": "[Fees] Find the fees."}]
    >>> data = prepare_preferences(records, train_ratio=1.0, validation_ratio=0.0, test_ratio=0.0)
    >>> len(data.splits["train"]), data.splits["train"][0]["chosen"][0]["content"]
    (1, '<rationale_1>[Termination] Find who may end it.</rationale_1>')
"""

from __future__ import annotations

import json
import logging
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError, InputError
from ..evaluation import precision_recall_f1
from .dpo_records import meteora_record
from ..selection.llm_generator import LlamaRationaleGenerator, load_sample_shots
from ..models.llm_model import DEFAULT_CONTEXT_SIZE, LocalLLM
from ..selection.rationales import Rationale, as_rationales, format_rationales

__all__ = ["SPLITS", "SPLIT_FILES", "PreparedData", "prompt_messages", "label_candidates", "prepare_preferences"]

logger = logging.getLogger(__name__)

SPLITS = ("train", "validation", "test")
SPLIT_FILES = {name: f"{name}.jsonl" for name in SPLITS}
Messages = list[dict[str, str]]


# -- prompts -----------------------------------------------------------------------------


class _PromptOnly:
    """A stand-in for a loaded GGUF model: enough for the generator to build its prompt."""

    metadata = None  # no GGUF metadata, so no chat template: only the messages are wanted

    def n_ctx(self) -> int:
        return DEFAULT_CONTEXT_SIZE


def _prompt_generator(
    sample_shots: Sequence[Mapping[str, Any]], *, num_rationales: int, domain: str | None, include_flag_instructions: bool
) -> LlamaRationaleGenerator:
    """The runtime generator itself (it checks shots and options), without a model behind it."""
    return LlamaRationaleGenerator(
        LocalLLM(_PromptOnly(), source="prompt only"),
        sample_shots=sample_shots,
        domain=domain,
        num_rationales=num_rationales,
        include_flag_instructions=include_flag_instructions,
    )


def prompt_messages(
    generator: LlamaRationaleGenerator, query: str, *, evidence: Sequence[str] = ()
) -> Messages:
    """The generator's chat for ``query`` as ``[{"role", "content"}, …]``; oracle ``evidence``
    (if any) is listed before the query in the last user turn."""
    messages = [{"role": m.role, "content": "".join(m.parts)} for m in generator.messages(query)]
    if evidence:
        listed = "\n".join(f"- {' '.join(e.split())}" for e in evidence)
        messages[-1]["content"] = f"Evidence:\n{listed}\n\n{messages[-1]['content']}"
    return messages


# -- labelling and pairing ---------------------------------------------------------------


@dataclass(frozen=True)
class _Completion:
    text: str
    name: str
    score: float | None = None


def _is_id(value: object) -> bool:
    return isinstance(value, (int, str)) and not isinstance(value, bool)


def _ids(label: str, value: object) -> list[int | str]:
    if not isinstance(value, list) or not all(_is_id(v) for v in value):
        raise InputError(f"{label} must be a list of chunk ids (integers or strings), got {json.dumps(value)[:80]}")
    return value


def _f1(selected: Sequence[int | str], gold: set[int | str]) -> float:
    return precision_recall_f1(selected, gold).f1


def label_candidates(
    candidates: Sequence[Mapping[str, Any]], gold: Sequence[int | str], *, min_margin: float = 0.2
) -> tuple[list[int], list[int], list[float]]:
    """Split candidates into preferred and rejected by their gold-hit F1 (rule in the module doc).

    Returns:
        (preferred positions, rejected positions worst first, every candidate's F1).
    """
    gold_set = set(gold)
    scores = [_f1(c["selected"], gold_set) for c in candidates]
    best = max(scores, default=0.0)
    if best <= 0.0:
        return [], [], scores
    preferred = [i for i, s in enumerate(scores) if s == best]
    rejected = [i for i, s in enumerate(scores) if s == 0.0 or s <= best - min_margin]
    rejected.sort(key=lambda i: (scores[i], i))
    return preferred, rejected, scores


def _pairs(preferred: list[_Completion], rejected: list[_Completion], max_pairs: int) -> list[tuple[_Completion, _Completion]]:
    count = min(max(len(preferred), len(rejected)), max_pairs) if preferred and rejected else 0
    pairs = [(preferred[k % len(preferred)], rejected[k % len(rejected)]) for k in range(count)]
    return [(c, r) for c, r in pairs if c.text != r.text]


# -- one record --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Options:
    generator: LlamaRationaleGenerator
    num_rationales: int
    include_flag_instructions: bool
    oracle_evidence: bool
    min_margin: float
    max_pairs: int


def _completion_text(label: str, value: object, options: _Options) -> str:
    try:
        rationales = as_rationales(value)
    except InputError as exc:
        raise InputError(f"{label}: {exc}") from None
    if not rationales:
        raise InputError(f"{label} holds no rationale; give a rationale text or a non-empty list")
    if len(rationales) > options.num_rationales:
        raise InputError(
            f"{label} has {len(rationales)} rationales, more than num_rationales={options.num_rationales}; "
            "raise --num-rationales or give fewer"
        )
    flags = options.include_flag_instructions
    return format_rationales(
        [Rationale(r.text, i, r.label, r.flag_instructions if flags else None) for i, r in enumerate(rationales, start=1)]
    )


def _explicit(label: str, record: Mapping[str, Any], options: _Options) -> list[tuple[_Completion, _Completion]]:
    sides: dict[str, list[_Completion]] = {}
    for key in ("preferred", "rejected"):
        if key not in record:
            raise InputError(f"{label}: missing key {key!r}; give both 'preferred' and 'rejected'")
        value = record[key]
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not items:
            raise InputError(f"{label}: {key!r} is empty; give a rationale text or a non-empty list of them")
        sides[key] = [_Completion(_completion_text(f"{label}: {key}[{i}]", v, options), f"{key}[{i}]") for i, v in enumerate(items)]
    return _pairs(sides["preferred"], sides["rejected"], options.max_pairs)


def _labelled(label: str, record: Mapping[str, Any], options: _Options) -> list[tuple[_Completion, _Completion]]:
    if "gold" not in record:
        raise InputError(f"{label}: missing key 'gold'; records with 'candidates' need the gold chunk ids")
    gold = _ids(f"{label}: 'gold'", record["gold"])
    if not gold:
        raise InputError(f"{label}: 'gold' is empty; give at least one gold chunk id")
    candidates = record["candidates"]
    if not isinstance(candidates, list) or not candidates:
        raise InputError(f"{label}: 'candidates' must be a non-empty list of {{'rationales': …, 'selected': [ids]}}")
    completions = []
    for i, candidate in enumerate(candidates):
        where = f"{label}: candidate {i}"
        if not isinstance(candidate, dict) or "rationales" not in candidate or "selected" not in candidate:
            raise InputError(f"{where} needs keys 'rationales' and 'selected'")
        _ids(f"{where} 'selected'", candidate["selected"])
        name = candidate.get("name") if isinstance(candidate.get("name"), str) else f"candidate[{i}]"
        completions.append(_Completion(_completion_text(where, candidate["rationales"], options), name))
    preferred, rejected, scores = label_candidates(candidates, gold, min_margin=options.min_margin)
    scored = [_Completion(c.text, c.name, round(s, 6)) for c, s in zip(completions, scores)]
    return _pairs([scored[i] for i in preferred], [scored[i] for i in rejected], options.max_pairs)


def _evidence(label: str, record: Mapping[str, Any]) -> list[str]:
    if isinstance(record.get("evidence"), list):
        texts = record["evidence"]
    elif "chunks" in record and "gold" in record:
        chunks = record["chunks"]
        lookup = dict(enumerate(chunks)) if isinstance(chunks, list) else chunks if isinstance(chunks, dict) else None
        if lookup is None:
            raise InputError(f"{label}: 'chunks' must be a list of texts or an object id -> text")
        missing = [g for g in record["gold"] if g not in lookup and str(g) not in lookup]
        if missing:
            raise InputError(f"{label}: gold id {missing[0]!r} is not in 'chunks'")
        texts = [lookup[g] if g in lookup else lookup[str(g)] for g in record["gold"]]
    else:
        raise InputError(f"{label}: oracle evidence needs 'evidence' (texts) or 'chunks' with 'gold'; drop --oracle-evidence")
    if not all(isinstance(t, str) and t.strip() for t in texts):
        raise InputError(f"{label}: oracle evidence must be non-empty texts")
    return texts


def _record_rows(position: int, record: Mapping[str, Any], options: _Options) -> list[dict[str, Any]]:
    record = meteora_record(record, position=position) if isinstance(record, Mapping) else record
    query = record.get("query") if isinstance(record, Mapping) else None
    label = f"record {position}" + (f" ({query[:60]!r})" if isinstance(query, str) else "")
    if not isinstance(query, str) or not query.strip():
        raise InputError(f"{label}: missing or empty key 'query'; every record needs a query string")
    explicit = "preferred" in record or "rejected" in record
    if explicit and "candidates" in record:
        raise InputError(f"{label}: has both 'preferred'/'rejected' and 'candidates'; give one form")
    if not explicit and "candidates" not in record:
        raise InputError(f"{label}: needs 'preferred' and 'rejected', or 'candidates' with 'gold'")
    pairs = _explicit(label, record, options) if explicit else _labelled(label, record, options)
    if explicit and not pairs:
        raise InputError(f"{label}: every preferred completion equals its rejected one; no preference pair is left")
    evidence = _evidence(label, record) if options.oracle_evidence else []
    prompt = prompt_messages(options.generator, query, evidence=evidence)
    record_id = record.get("id", position)
    rows = []
    for k, (chosen, rejected) in enumerate(pairs):
        meta: dict[str, Any] = {"record": record_id, "pair": k, "chosen": chosen.name, "rejected": rejected.name}
        if chosen.score is not None:
            meta.update(chosen_f1=chosen.score, rejected_f1=rejected.score)
        rows.append({
            "prompt": prompt,
            "chosen": [{"role": "assistant", "content": chosen.text}],
            "rejected": [{"role": "assistant", "content": rejected.text}],
            "query": " ".join(query.split()),
            "meta": meta,
        })
    return rows


# -- splitting and writing ---------------------------------------------------------------


def _check_ratios(ratios: Mapping[str, float]) -> None:
    for name, value in ratios.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0.0 <= value <= 1.0:
            raise ConfigError(f"{name} ratio must be a number in 0..1, got {value!r}")
    total = sum(ratios.values())
    if not math.isclose(total, 1.0, abs_tol=1e-6):
        shown = " + ".join(f"{v:g}" for v in ratios.values())
        raise ConfigError(f"split ratios must sum to 1, got {shown} = {total:g}; adjust --train/--validation/--test-ratio")
    if ratios["train"] <= 0.0:
        raise ConfigError("train ratio must be above 0; the train split cannot be empty")


def _split_sizes(n: int, ratios: Mapping[str, float]) -> dict[str, int]:
    """Largest-remainder rounding: sizes sum to ``n``; ties go to the earlier split."""
    exact = {name: n * ratios[name] for name in SPLITS}
    sizes = {name: int(math.floor(v)) for name, v in exact.items()}
    order = sorted(SPLITS, key=lambda name: (-(exact[name] - sizes[name]), SPLITS.index(name)))
    for name in order[: n - sum(sizes.values())]:
        sizes[name] += 1
    return sizes


@dataclass(frozen=True)
class PreparedData:
    """Rows per split (whole records go to one split, so no query leaks across) and a summary."""

    splits: dict[str, list[dict[str, Any]]]
    summary: dict[str, Any] = field(default_factory=dict)


def prepare_preferences(
    records: Sequence[Mapping[str, Any]],
    *,
    sample_shots: Sequence[Mapping[str, Any]] | None = None,
    num_rationales: int = 3,
    domain: str | None = None,
    include_flag_instructions: bool = True,
    oracle_evidence: bool = False,
    min_margin: float = 0.2,
    max_pairs_per_query: int = 4,
    train_ratio: float = 0.8,
    validation_ratio: float = 0.1,
    test_ratio: float = 0.1,
    seed: int = 42,
) -> PreparedData:
    """Turn records into DPO rows split into train/validation/test, deterministically for ``seed``.

    Args:
        records: explicit or labelled-candidate records (see the module doc); never modified.
        sample_shots: the generator's few-shot examples (default: the shipped ones, as the CLI uses).
        num_rationales, domain, include_flag_instructions: the generator settings the prompt is built for.
        oracle_evidence: list the gold chunk texts (``evidence``, or ``chunks`` at ``gold``) in the prompt.
        min_margin: how far below the best F1 a candidate that hits gold must score to be rejected.
        max_pairs_per_query: at most this many pairs per record.
        train_ratio, validation_ratio, test_ratio: shares of the records per split; they sum to 1.
        seed: shuffles the records before splitting.

    Returns:
        The rows per split and a summary (counts, settings, the rule).

    Raises:
        ConfigError: ratios out of range or not summing to 1, bad shots or settings.
        InputError: a record misses keys or is malformed, or no record yields a preference pair.
    """
    ratios = {"train": train_ratio, "validation": validation_ratio, "test": test_ratio}
    _check_ratios(ratios)
    if not isinstance(min_margin, (int, float)) or not 0.0 < min_margin <= 1.0:
        raise ConfigError(f"min_margin must be in (0, 1], got {min_margin!r}")
    if not isinstance(max_pairs_per_query, int) or max_pairs_per_query < 1:
        raise ConfigError(f"max_pairs_per_query must be a positive integer, got {max_pairs_per_query!r}")
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ConfigError(f"seed must be an integer, got {seed!r}")
    shots = load_sample_shots() if sample_shots is None else sample_shots
    generator = _prompt_generator(
        shots, num_rationales=num_rationales, domain=domain, include_flag_instructions=include_flag_instructions
    )
    options = _Options(generator, num_rationales, include_flag_instructions, oracle_evidence, float(min_margin), max_pairs_per_query)
    if not records:
        raise InputError("no records given; give at least one")
    per_record = [_record_rows(position, record, options) for position, record in enumerate(records)]
    usable = [rows for rows in per_record if rows]
    if not usable:
        raise InputError(
            f"no preference pairs: none of the {len(records)} record(s) has both a preferred and a rejected candidate; "
            "add candidates that miss the gold chunks, or lower --min-margin"
        )
    order = list(range(len(usable)))
    random.Random(seed).shuffle(order)
    sizes = _split_sizes(len(usable), ratios)
    splits: dict[str, list[dict[str, Any]]] = {}
    start = 0
    for name in SPLITS:
        splits[name] = [row for i in order[start : start + sizes[name]] for row in usable[i]]
        start += sizes[name]
    summary = {
        "records": len(records),
        "records_with_pairs": len(usable),
        "records_without_pairs": len(records) - len(usable),
        "pairs": {name: len(rows) for name, rows in splits.items()},
        "records_per_split": sizes,
        "seed": seed,
        "ratios": ratios,
        "num_rationales": num_rationales,
        "domain": domain,
        "include_flag_instructions": include_flag_instructions,
        "oracle_evidence": oracle_evidence,
        "min_margin": min_margin,
        "max_pairs_per_query": max_pairs_per_query,
        "sample_shots": len(shots),
    }
    logger.info("DPO pairs: %s from %d of %d records", summary["pairs"], len(usable), len(records))
    return PreparedData(splits, summary)
