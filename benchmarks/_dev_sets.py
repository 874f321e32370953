"""The one data loader of the benchmarks: both dev files, their dense-gold view, HotpotQA sentence pools."""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
HOTPOTQA = DATA / "hotpotqa_distractor_dev50.json"
CONTRACTNLI = DATA / "contractnli_dev.json"
SETS = (("hotpotqa", HOTPOTQA), ("contractnli", CONTRACTNLI))


def sentence_pools(path: Path | str = HOTPOTQA, per_query: int = 40, limit: int | None = None) -> list[tuple[str, list[str]]]:
    """(question, ``per_query`` candidate sentences) for the first ``limit`` questions of a HotpotQA-layout
    file: each question's own context sentences, topped up from the following questions' when it has fewer."""
    items = json.loads(Path(path).read_text(encoding="utf-8"))
    pools = [[s.strip() for group in item["context"]["sentences"] for s in group if s.strip()] for item in items]
    out = []
    for i, item in enumerate(items[:limit]):
        candidates = list(pools[i])
        following = (s for pool in pools[i + 1:] + pools[:i] for s in pool)
        while len(candidates) < per_query:
            candidates.append(next(following))
        out.append((item["question"], candidates[:per_query]))
    return out


def question_sets(limit: int | None, *, paragraphs: bool = False, data: Sequence[str] = ()) -> Iterator[tuple[str, list]]:
    """(name, the first ``limit`` questions) of each dev set (sentence level; with ``paragraphs`` also
    HotpotQA's paragraph level, as ``hotpotqa-para``), then of their dense-gold view
    (``scripts/dense_gold_view.py`` as ``scripts/evaluate.sh`` runs it: 3 or more gold, 25 candidates).

    With ``data`` files (``--data``) instead: each file (named by its stem), and with ``paragraphs`` a HotpotQA-layout
    file's paragraph level too (``<stem>-para``); no dense-gold view.
    """
    from meteora_edge.errors import ConfigError
    from meteora_edge.evaluation.datasets import load_questions

    for path in data:
        name = Path(path).stem
        yield name, load_questions(path, limit=limit)
        if paragraphs:
            try:
                yield f"{name}-para", load_questions(path, level="paragraph", limit=limit)
            except ConfigError:  # per-query JSONL: its candidates are given, there is no other level
                pass
    if data:
        return
    sys.path.insert(0, str(ROOT / "scripts"))
    from dense_gold_view import view

    for name, path in SETS:
        yield name, load_questions(str(path), level="sentence", limit=limit)
        if paragraphs and name == "hotpotqa":
            yield "hotpotqa-para", load_questions(str(path), level="paragraph", limit=limit)
    rows = [row for _, path in SETS for row in view(str(path), level=None, min_gold=3, candidates=25, seed=0)]
    with tempfile.TemporaryDirectory() as folder:  # the view of the dev files, removed when read
        path = Path(folder) / "dense-gold.jsonl"
        path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
        questions = load_questions(str(path), limit=limit)
    yield "dense-gold", questions


def f1_and_words(runtime, encoder, questions, settings=None) -> tuple[list[float], list[int]]:
    """Per question: the pipeline's F1 against gold and the whitespace words it kept, run with ``settings``."""
    from meteora_edge.evaluation.metrics import precision_recall_f1
    from meteora_edge.index.memory_index import InMemoryIndex
    from meteora_edge.pipeline.request import SelectRequest

    f1, words = [], []
    for q in questions:
        result = runtime.result(SelectRequest(query=q.question, index=InMemoryIndex(q.candidates, encoder),
                                              settings=settings or {}))
        kept = [int(i) for i in result.ids]
        f1.append(precision_recall_f1(kept, q.gold).f1)
        words.append(sum(len(q.candidates[i].split()) for i in kept))
    return f1, words


def cached_runtime(parser, bundle: str, *, precision: str = "auto", onnx: bool = False):
    """(the loaded runtime, its encoder cached in memory, a runtime over that encoder) for ``bundle``;
    a bundle that does not load, or with ``onnx`` one without an ONNX encoder, ends in ``parser.error``."""
    from meteora_edge.errors import MeteoraError
    from meteora_edge.evaluation.methods import CachedEncoder
    from meteora_edge.pipeline.runtime import SelectRuntime, load_bundle

    try:
        loaded = SelectRuntime.load(load_bundle(bundle), precision=precision)
    except MeteoraError as exc:
        parser.error(str(exc))
    if onnx and not hasattr(loaded.encoder, "_session"):
        parser.error(f"{bundle} has no ONNX encoder; token states need one")
    encoder = CachedEncoder(loaded.encoder)
    return loaded, encoder, SelectRuntime(encoder=encoder, token_counter=loaded.token_counter)


def dev_arguments(parser):
    """Add ``--bundle``, ``--limit`` and ``--data`` to ``parser``, parse the command line, refuse a limit
    below 1. Files given with ``--data`` (``args.data``) replace the dev sets in :func:`question_sets`."""
    parser.add_argument("--bundle", default=str(ROOT / "models" / "bundles" / "default"))
    parser.add_argument("--limit", type=int, help="only the first N questions of each set")
    parser.add_argument("--data", action="append", default=[], metavar="FILE",
                        help="an evaluation file (HotpotQA layout or per-query JSONL, as `meteora-edge eval` "
                             "reads) to run instead of the dev sets; repeatable")
    args = parser.parse_args()
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be at least 1")
    return args


def reported(parser, report, *args) -> None:
    """Run ``report(*args)``; a dev file missing or unreadable ends in ``parser.error``."""
    from meteora_edge.errors import MeteoraError

    try:
        report(*args)
    except MeteoraError as exc:
        parser.error(str(exc))
