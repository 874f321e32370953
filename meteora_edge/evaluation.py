"""Evidence-quality evaluation on HotpotQA-format data.

Per question the candidates are its context sentences (each prefixed by its paragraph
title) or its paragraphs; gold are the supporting sentences or the paragraphs that hold
them. Each method selects candidate positions; metrics are macro-averaged over questions.

Method specs: the baselines ``topk-cosine:K``, ``bm25:K`` and ``topk-hybrid:K`` (the fused
query score); ``ecse`` (METEORA: the query as the rationale, cosine, window 0) with ECSE
settings, e.g. ``ecse:scoring=hybrid,rationales=auto``; ``ecse-window:W``; ``meve`` (MeVe's
phases, ECSE off) and ``pipeline`` (all phases with their defaults) take pipeline settings,
e.g. ``pipeline:scoring=dense,n_min=3``.

Every method that uses the GGUF model has ``llm`` in its name and takes pipeline settings:
``ecse-llm`` (ECSE on the model's rationales; METEORA's dense scoring unless set, e.g.
``ecse-llm:scoring=hybrid,rationales=llm+auto``), ``ecse-llm-verify`` (plus the model as
verifier: one chunk per prompt, or batched with ``verification_batch=N``), and
``pipeline-llm`` (the pipeline's defaults plus the LLM rerank of ECSE's best candidates;
``rationales=llm+auto`` adds the model's rationales, ``verification=llm`` its verdicts).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .models.analyzer import analyzer_of
from .models.bm25 import BM25Index
from .pipeline.budget import TokenCounter, WhitespaceCounter
from .selection.ecse import MeteoraSelector
from .models.encoders import EncoderLike, embed, encoder_id
from .errors import ConfigError, InputError
from .fileio import atomic_path, read_json_file
from .index.memory_index import InMemoryIndex
from .pipeline.meve import MeVeConfig
from .pipeline.config import PipelineConfig
from .pipeline.engine import EvidencePipeline
from .selection.stages import cosine_matrix, fuse_scores, top_k_indices

__all__ = [
    "EvalQuestion", "CachedEncoder", "SharedLLMRoles", "load_hotpot", "build_method", "evaluate", "MethodReport",
    "LLM_METHODS", "SelectionMetrics", "precision_recall_f1",
]

LLM_METHODS = ("ecse-llm", "ecse-llm-verify", "pipeline-llm")
_YES_NO = {"yes", "no"}


@dataclass(frozen=True)
class SelectionMetrics:
    """Precision, recall and F1 of one selection against gold ids (METEORA's metrics)."""

    precision: float
    recall: float
    f1: float
    correct_chunk_found: bool

    def to_dict(self) -> dict[str, Any]:
        return {"precision": self.precision, "recall": self.recall, "f1": self.f1,
                "correct_chunk_found": self.correct_chunk_found}


def precision_recall_f1(selected: Iterable[Hashable], gold: Iterable[Hashable]) -> SelectionMetrics:
    """Score the selected chunk ids against the gold ones (duplicates count once).

    Precision is 0 when nothing is selected, recall 0 when there is no gold.

    Example:
        >>> m = precision_recall_f1([1, 2, 3, 4], [2, 9])
        >>> (m.precision, m.recall, round(m.f1, 4), m.correct_chunk_found)
        (0.25, 0.5, 0.3333, True)
    """
    chosen, wanted = set(selected), set(gold)
    hits = len(chosen & wanted)
    precision = hits / len(chosen) if chosen else 0.0
    recall = hits / len(wanted) if wanted else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return SelectionMetrics(precision, recall, f1, hits > 0)


@dataclass(frozen=True)
class EvalQuestion:
    qid: str
    question: str
    answer: str
    candidates: list[str]
    gold: frozenset[int]


def _fail(position: int, item: object, problem: str) -> InputError:
    question = item.get("question") if isinstance(item, dict) else None
    label = f"question {position}" + (f" ({str(question)[:60]!r})" if isinstance(question, str) else "")
    return InputError(f"{label}: {problem}")


def load_hotpot(path: str, *, level: str = "sentence", limit: int | None = None) -> list[EvalQuestion]:
    """Read HotpotQA-format questions (Hugging Face ``datasets`` layout) as evaluation items.

    Raises:
        InputError: the file is unreadable, or a question lacks keys, has mismatched lists,
            or points its gold evidence outside its own context (naming the question).
    """
    if level not in ("sentence", "paragraph"):
        raise ConfigError(f"level must be 'sentence' or 'paragraph', got {level!r}")
    data = read_json_file(path)
    if isinstance(data, dict) and isinstance(data.get("data"), list):
        data = data["data"]
    if not isinstance(data, list) or not data:
        raise InputError(f"{path} must hold a non-empty list of questions")
    if limit is not None:
        data = data[:limit]
    return [_question(position, item, level) for position, item in enumerate(data)]


def _question(position: int, item: object, level: str) -> EvalQuestion:
    if not isinstance(item, dict):
        raise _fail(position, item, f"is a {type(item).__name__}, not an object")
    for key in ("question", "answer", "context", "supporting_facts"):
        if key not in item:
            raise _fail(position, item, f"missing key {key!r}")
    context, support = item["context"], item["supporting_facts"]
    if not isinstance(item["question"], str) or not item["question"].strip():
        raise _fail(position, item, "'question' must be a non-empty string")
    if not isinstance(item["answer"], str):
        raise _fail(position, item, "'answer' must be a string")
    if not isinstance(context, dict) or not isinstance(context.get("title"), list) or not isinstance(context.get("sentences"), list):
        raise _fail(position, item, "'context' must hold lists 'title' and 'sentences'")
    if len(context["title"]) != len(context["sentences"]):
        raise _fail(position, item, f"context has {len(context['title'])} titles but {len(context['sentences'])} sentence lists")
    if not isinstance(support, dict) or not isinstance(support.get("title"), list) or not isinstance(support.get("sent_id"), list):
        raise _fail(position, item, "'supporting_facts' must hold lists 'title' and 'sent_id'")
    if len(support["title"]) != len(support["sent_id"]) or not support["title"]:
        raise _fail(position, item, "supporting_facts 'title' and 'sent_id' must be non-empty lists of equal length")
    candidates: list[str] = []
    where: dict[tuple[str, int], int] = {}
    paragraph_of: dict[str, int] = {}
    for p, (title, sentences) in enumerate(zip(context["title"], context["sentences"])):
        if not isinstance(title, str) or not isinstance(sentences, list) or not all(isinstance(s, str) for s in sentences):
            raise _fail(position, item, f"context paragraph {p} must be a title and a list of sentence strings")
        paragraph_of.setdefault(title, p)
        if level == "paragraph":
            candidates.append(f"{title}: {' '.join(s.strip() for s in sentences)}")
        else:
            for s, sentence in enumerate(sentences):
                where[(title, s)] = len(candidates)
                candidates.append(f"{title}: {sentence.strip()}")
    gold: set[int] = set()
    for title, sent_id in zip(support["title"], support["sent_id"]):
        if title not in paragraph_of:
            raise _fail(position, item, f"supporting fact title {title!r} is not in its context")
        if not isinstance(sent_id, int) or not 0 <= sent_id < len(context["sentences"][paragraph_of[title]]):
            raise _fail(position, item, f"supporting fact ({title!r}, {sent_id!r}) points outside its paragraph")
        gold.add(paragraph_of[title] if level == "paragraph" else where[(title, sent_id)])
    qid = str(item.get("id", item.get("_id", position)))
    return EvalQuestion(qid, item["question"], item["answer"], candidates, frozenset(gold))


Method = Callable[[EvalQuestion], list[int]]


def _settings(spec: str, arg: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part in filter(None, arg.split(",")):
        key, sep, value = part.partition("=")
        if not sep:
            raise ConfigError(f"method {spec!r}: setting {part!r} must look like key=value")
        try:
            out[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            out[key.strip()] = value
    return out


def build_method(
    spec: str,
    encoder: EncoderLike,
    *,
    generator: object | None = None,
    verifier: object | None = None,
    token_counter: TokenCounter | None = None,
    batch_verifier: object | None = None,
    scorer: object | None = None,
) -> Method:
    """Turn a method spec into a function ``question -> selected candidate positions``.

    Args:
        spec: the method spec (see the module doc).
        encoder: embeds questions and candidates.
        generator, verifier, batch_verifier, scorer: the GGUF model's roles (rationales,
            one-chunk verdicts, batched verdicts, relevance scores), for the ``llm`` methods.
        token_counter: counts the tokens of what a method keeps.

    Raises:
        ConfigError: unknown method, bad K or settings, or an LLM method without its model.
    """
    name, _, arg = spec.partition(":")
    if name in ("topk-cosine", "topk-hybrid", "bm25"):
        try:
            k = int(arg)
        except ValueError:
            raise ConfigError(f"method {spec!r} needs a positive K, e.g. {name}:3") from None
        if k < 1:
            raise ConfigError(f"method {spec!r} needs a positive K")
        scoring = {"topk-cosine": "dense", "topk-hybrid": "hybrid", "bm25": "lexical"}[name]

        def topk(q: EvalQuestion) -> list[int]:
            return top_k_indices(_query_scores(q, encoder, scoring), k).tolist()
        return topk
    if name in ("ecse", "ecse-window"):
        settings = _ecse_settings(spec, arg) if name == "ecse" else {}
        if name == "ecse-window":
            try:
                settings["expansion_window"] = int(arg)
            except ValueError:
                raise ConfigError(f"method {spec!r} needs a window, e.g. ecse-window:1") from None
        strategy = settings.pop("rationales", "query")
        selector = MeteoraSelector(encoder, **{"expansion_window": 0, **settings})
        if strategy == "auto":
            return lambda q: selector.select_auto(q.candidates, q.question).selected_indices
        return lambda q: selector.select(q.candidates, [q.question]).selected_indices
    if name in LLM_METHODS:
        return _llm_method(name, spec, arg, encoder, generator=generator, verifier=verifier,
                           batch_verifier=batch_verifier, scorer=scorer, token_counter=token_counter)
    if name in ("meve", "pipeline"):
        config = _override(MeVeConfig().pipeline_config() if name == "meve" else PipelineConfig(), spec, arg)
        if config.verification == "llm":
            raise ConfigError(f"method {spec!r} verifies with the GGUF model: methods that use it have 'llm' in "
                              "their name; use pipeline-llm:verification=llm")
        return _pipeline_method(config, encoder, None, None, token_counter)
    raise ConfigError(
        f"unknown method {spec!r}; use topk-cosine:K, topk-hybrid:K, bm25:K, ecse[:settings], ecse-window:W, "
        "ecse-llm[:settings], ecse-llm-verify[:settings], meve[:settings], pipeline[:settings], pipeline-llm[:settings]"
    )


_ECSE_SETTINGS = ("scoring", "rationales", "lexical_weight", "pooled_cut", "pooled_z", "elbow_z_threshold", "expansion_window")


def _ecse_settings(spec: str, arg: str) -> dict[str, Any]:
    settings = _settings(spec, arg)
    unknown = sorted(set(settings) - set(_ECSE_SETTINGS))
    if unknown:
        raise ConfigError(f"method {spec!r}: unknown ECSE setting(s) {unknown}; known: {list(_ECSE_SETTINGS)}")
    if settings.get("rationales", "query") not in ("auto", "query"):
        raise ConfigError(f"method {spec!r}: rationales must be auto or query")
    return settings


def _query_scores(q: EvalQuestion, encoder: EncoderLike, scoring: str) -> np.ndarray:
    """The question's score for every candidate: cosine, BM25 over the candidates, or both fused."""
    dense = cosine_matrix(embed(encoder, [q.question]), embed(encoder, q.candidates))
    if scoring == "dense":
        return dense[0]
    lexical = BM25Index.from_texts(q.candidates, analyzer=analyzer_of(encoder)).text_scores(q.question)[None, :]
    if scoring == "lexical":
        return lexical[0]
    return fuse_scores(dense, lexical, scoring="hybrid")[0]


def _override(config: PipelineConfig, spec: str, arg: str) -> PipelineConfig:
    return PipelineConfig.from_dict({**config.to_dict(), **_settings(spec, arg)})


def _llm_method(
    name: str,
    spec: str,
    arg: str,
    encoder: EncoderLike,
    *,
    generator: object | None,
    verifier: object | None,
    batch_verifier: object | None,
    scorer: object | None,
    token_counter: TokenCounter | None,
) -> Method:
    """``ecse-llm``, ``ecse-llm-verify`` and ``pipeline-llm`` (see the module doc)."""
    if name == "pipeline-llm":
        config = _override(PipelineConfig(), spec, arg)
    else:
        config = PipelineConfig.from_dict({
            "use_ecse": True, "verification": "llm" if name == "ecse-llm-verify" else "none", "n_min": None,
            "theta_redundancy": None, "t_max": None, "scoring": "dense", "verification_batch": 1, "llm_pool": None,
            **_settings(spec, arg),
        })
    uses_generator = name != "pipeline-llm" or config.rationales == "llm+auto"
    judge = None
    if config.verification == "llm":
        judge = batch_verifier if config.verification_batch > 1 else verifier
    missing = [role for role, needed, have in (
        ("rationale generator", uses_generator, generator), ("verifier", config.verification == "llm", judge),
        ("relevance scorer", name == "pipeline-llm" and config.llm_pool is not None, scorer)) if needed and have is None]
    if missing:
        raise ConfigError(f"method {spec!r} needs the GGUF model ({', '.join(missing)}): give --bundle with an llm component")
    return _pipeline_method(config, encoder, generator if uses_generator else None, judge, token_counter,
                            scorer=scorer if name == "pipeline-llm" else None)


def _pipeline_method(
    config: PipelineConfig,
    encoder: EncoderLike,
    generator: object | None,
    verifier: object | None,
    token_counter: TokenCounter | None,
    *,
    scorer: object | None = None,
) -> Method:
    def run(q: EvalQuestion) -> list[int]:
        index = InMemoryIndex(q.candidates, encoder)
        pipe = EvidencePipeline(config, encoder=encoder, index=index, rationale_generator=generator,
                                verifier=verifier if config.verification == "llm" else None,
                                token_counter=token_counter, relevance_scorer=scorer)  # type: ignore[arg-type]
        return [int(i) for i in pipe.run(q.question).ids]

    return run


@dataclass
class MethodReport:
    method: str
    precision: float = 0.0
    recall: float = 0.0
    f1: float = 0.0
    all_gold: float = 0.0
    items: float = 0.0
    tokens: float = 0.0
    answer_contained: float | None = None
    answer_questions: int = 0
    latency_ms_p50: float = 0.0
    latency_ms_mean: float = 0.0
    per_question: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self, *, with_questions: bool = False) -> dict[str, Any]:
        out = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in self.__dict__.items() if k != "per_question"}
        if with_questions:
            out["per_question"] = self.per_question
        return out


class SharedLLMRoles:
    """The GGUF model's roles for an evaluation, each answer computed once per input.

    Methods compared on one question ask the model the same things (the rationales for the
    question, the relevance of a passage); remembering the answers makes each cost once.
    The first method that asks pays for it, so its latency includes the model's time and
    later methods' latencies do not (``eval`` prints a note).

    Args:
        generator, verifier, batch_verifier, scorer: the roles (any may be None).
    """

    def __init__(self, *, generator: object | None = None, verifier: object | None = None,
                 batch_verifier: object | None = None, scorer: object | None = None) -> None:
        self.verifier, self.batch_verifier = verifier, batch_verifier
        self.generator = None if generator is None else _Memo(generator, "generate")
        self.scorer = None if scorer is None else _ScoreMemo(scorer)

    def as_kwargs(self) -> dict[str, object | None]:
        return {"generator": self.generator, "verifier": self.verifier, "batch_verifier": self.batch_verifier,
                "scorer": self.scorer}


class _Memo:
    def __init__(self, inner: object, method: str) -> None:
        self.inner, self.method, self._memo = inner, method, {}  # type: dict[str, object]

    def __call__(self, query: str) -> object:
        if query not in self._memo:
            call = getattr(self.inner, self.method, None) or self.inner
            self._memo[query] = call(query)  # type: ignore[operator]
        return self._memo[query]

    generate = __call__


class _ScoreMemo:
    def __init__(self, inner: object) -> None:
        self.inner, self._memo = inner, {}  # type: dict[tuple[str, str], float]

    def score(self, query: str, passages: list[str]) -> np.ndarray:
        missing = [p for p in dict.fromkeys(passages) if (query, p) not in self._memo]
        if missing:
            for passage, value in zip(missing, self.inner.score(query, missing)):  # type: ignore[attr-defined]
                self._memo[(query, passage)] = float(value)
        return np.asarray([self._memo[(query, p)] for p in passages], dtype=np.float64)


class CachedEncoder:
    """Remembers every text's vector, so methods compared on one question embed it once.

    The identity is the wrapped encoder's, so indexes and traces see the real encoder.
    """

    def __init__(self, encoder: EncoderLike) -> None:
        self.inner = encoder
        self.identity = encoder_id(encoder)
        self._memo: dict[str, np.ndarray] = {}

    def encode(self, texts: list[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self._memo))
        if missing:
            for text, row in zip(missing, embed(self.inner, missing)):
                self._memo[text] = row
        return np.stack([self._memo[t] for t in texts]) if texts else np.zeros((0, 1), dtype=np.float32)

    def warm(self, question: EvalQuestion) -> float:
        """Embed a question and its candidates now; return the milliseconds it took."""
        t0 = time.perf_counter()
        self.encode([question.question, *question.candidates])
        return (time.perf_counter() - t0) * 1000


def evaluate(
    questions: Sequence[EvalQuestion],
    methods: dict[str, Method],
    *,
    token_counter: TokenCounter | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[MethodReport]:
    """Run every method on every question (in file order) and macro-average the metrics.

    Build the methods with a warmed :class:`CachedEncoder` to keep embedding out of the
    latencies (the CLI does).
    """
    counter = token_counter or WhitespaceCounter()
    reports = []
    total = len(questions) * len(methods)
    done = 0
    for spec, method in methods.items():
        rows = []
        for q in questions:
            t0 = time.perf_counter()
            chosen = sorted(set(method(q)))
            ms = (time.perf_counter() - t0) * 1000
            metrics = precision_recall_f1(chosen, q.gold)
            text = " ".join(q.candidates[i] for i in chosen)
            answer = None if q.answer.strip().lower() in _YES_NO else q.answer.strip().lower() in text.lower()
            rows.append({
                "id": q.qid, "selected": chosen, "gold": sorted(q.gold), "precision": metrics.precision,
                "recall": metrics.recall, "f1": metrics.f1, "all_gold": q.gold <= set(chosen),
                "items": len(chosen), "tokens": sum(counter.count([q.candidates[i] for i in chosen])) if chosen else 0,
                "answer_contained": answer, "ms": ms,
            })
            done += 1
            if progress:
                progress(done, total)
        answered = [r["answer_contained"] for r in rows if r["answer_contained"] is not None]
        reports.append(MethodReport(
            method=spec,
            precision=float(np.mean([r["precision"] for r in rows])),
            recall=float(np.mean([r["recall"] for r in rows])),
            f1=float(np.mean([r["f1"] for r in rows])),
            all_gold=float(np.mean([r["all_gold"] for r in rows])),
            items=float(np.mean([r["items"] for r in rows])),
            tokens=float(np.mean([r["tokens"] for r in rows])),
            answer_contained=float(np.mean(answered)) if answered else None,
            answer_questions=len(answered),
            latency_ms_p50=float(np.median([r["ms"] for r in rows])),
            latency_ms_mean=float(np.mean([r["ms"] for r in rows])),
            per_question=rows,
        ))
    return reports


def report_table(reports: Sequence[MethodReport], *, skipped_yes_no: int) -> str:
    """The terminal table of a run."""
    head = f"{'method':<28} {'P':>6} {'R':>6} {'F1':>6} {'all-gold':>8} {'items':>6} {'tokens':>7} {'answer':>7} {'ms p50':>8}"
    lines = [head, "-" * len(head)]
    for r in reports:
        answer = "-" if r.answer_contained is None else f"{r.answer_contained:.3f}"
        lines.append(
            f"{r.method:<28} {r.precision:6.3f} {r.recall:6.3f} {r.f1:6.3f} {r.all_gold:8.3f} {r.items:6.2f} "
            f"{r.tokens:7.1f} {answer:>7} {r.latency_ms_p50:8.2f}"
        )
    lines.append(f"(answer containment skips {skipped_yes_no} yes/no questions)")
    return "\n".join(lines)


def require_matplotlib() -> None:
    """Check (without importing it) that the ``plot`` extra is there, before a long evaluation.

    Raises:
        MissingExtraError: matplotlib is not installed.
    """
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        from .errors import MissingExtraError

        raise MissingExtraError("matplotlib", "plot")


def plot_report(reports: Sequence[MethodReport], path: str, *, title: str) -> None:
    """F1 against mean tokens, one labelled point per method, written atomically as PNG."""
    require_matplotlib()
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        from .errors import MissingExtraError

        raise MissingExtraError("matplotlib", "plot") from None
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    for r in reports:
        ax.scatter(r.tokens, r.f1, s=40)
        ax.annotate(r.method, (r.tokens, r.f1), textcoords="offset points", xytext=(5, 4), fontsize=8)
    ax.set_xlabel("mean tokens selected per question")
    ax.set_ylabel("macro F1")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format="png", bbox_inches="tight")
    finally:
        plt.close(fig)
