"""Turn a HotpotQA-layout file (such as the two dev sets) into per-query JSONL or a BEIR folder.

    python examples/convert_eval_data.py DATA.json OUT.jsonl --layout jsonl [--level sentence|paragraph]
    python examples/convert_eval_data.py DATA.json OUT_DIR   --layout beir  [--level sentence|paragraph]

``jsonl`` writes one line per question: its candidates (``{id, text, metadata}``, the same
``title: sentence`` texts ``eval`` reads from the HotpotQA layout), the gold candidate ids,
the answer and the question's ``type`` as its group — ``eval`` gives the same numbers on
both files. ``beir`` pools every question's context into one corpus (a paragraph whose
title two questions share is written once; an empty sentence is left out), writes the
questions as queries and the supporting facts as ``qrels/test.tsv`` (score 1), for
``eval --data OUT_DIR``. Questions asked in the same words are one query over a pooled
corpus, so they are written once, with the union of their supporting facts as gold: over
ContractNLI, each hypothesis is asked once against every contract, and its gold is its
evidence in all of them.

Ids: a sentence is ``title#n`` (its position in the paragraph), a paragraph its title. This
is an example, not part of meteora-edge: the data keep their licences (HotpotQA CC BY-SA
4.0, ContractNLI CC BY 4.0), which travel with the converted files.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any


def units(item: dict[str, Any], level: str) -> list[tuple[str, str, str]]:
    """``(id, title, text)`` of every candidate of one question, in context order."""
    out = []
    for title, sentences in zip(item["context"]["title"], item["context"]["sentences"]):
        if level == "paragraph":
            out.append((title, title, " ".join(s.strip() for s in sentences)))
        else:
            out.extend((f"{title}#{n}", title, s.strip()) for n, s in enumerate(sentences))
    return out


def gold_ids(item: dict[str, Any], level: str) -> list[str]:
    """The ids of the supporting sentences (or of the paragraphs that hold them), without repeats."""
    facts = zip(item["supporting_facts"]["title"], item["supporting_facts"]["sent_id"])
    return list(dict.fromkeys(title if level == "paragraph" else f"{title}#{n}" for title, n in facts))


def query_id(item: dict[str, Any], position: int) -> str:
    return str(item.get("id", item.get("_id", position)))


def to_jsonl(items: list[dict[str, Any]], out: str, level: str) -> None:
    with open(out, "w", encoding="utf-8") as handle:
        for position, item in enumerate(items):
            line = {
                "id": query_id(item, position), "query": item["question"],
                "candidates": [{"id": cid, "text": f"{title}: {text}", "metadata": {"title": title}}
                               for cid, title, text in units(item, level)],
                "gold": gold_ids(item, level), "answer": item["answer"], "group": item.get("type"),
            }
            handle.write(json.dumps(line, ensure_ascii=False) + "\n")


def to_beir(items: list[dict[str, Any]], out: str, level: str) -> None:
    os.makedirs(os.path.join(out, "qrels"), exist_ok=True)
    seen: set[str] = set()
    with open(os.path.join(out, "corpus.jsonl"), "w", encoding="utf-8") as corpus:
        for item in items:
            for cid, title, text in units(item, level):
                if cid not in seen and text:
                    seen.add(cid)
                    corpus.write(json.dumps({"_id": cid, "title": title, "text": text}, ensure_ascii=False) + "\n")
    asked: dict[str, tuple[str, dict[str, Any], list[str]]] = {}  # question text -> (id, metadata, gold ids)
    for position, item in enumerate(items):
        qid, meta, gold = asked.setdefault(item["question"].strip(), (
            query_id(item, position), {"group": item.get("type"), "answer": item["answer"]}, []))
        gold.extend(cid for cid in gold_ids(item, level) if cid in seen and cid not in gold)  # an empty span is no gold
    with open(os.path.join(out, "queries.jsonl"), "w", encoding="utf-8") as queries, \
            open(os.path.join(out, "qrels", "test.tsv"), "w", encoding="utf-8") as qrels:
        qrels.write("query-id\tcorpus-id\tscore\n")
        for text, (qid, meta, gold) in asked.items():
            queries.write(json.dumps({"_id": qid, "text": text, "metadata": meta}, ensure_ascii=False) + "\n")
            qrels.writelines(f"{qid}\t{cid}\t1\n" for cid in gold)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", help="HotpotQA-layout JSON (a list of questions)")
    parser.add_argument("out", help="the JSONL file, or the BEIR folder, to write")
    parser.add_argument("--layout", choices=("jsonl", "beir"), required=True)
    parser.add_argument("--level", choices=("sentence", "paragraph"), default="sentence")
    parser.add_argument("--limit", type=int, default=None, help="only the first N questions")
    args = parser.parse_args(argv)
    with open(args.data, encoding="utf-8") as handle:
        items = json.load(handle)[: args.limit]
    (to_jsonl if args.layout == "jsonl" else to_beir)(items, args.out, args.level)


if __name__ == "__main__":
    main()
