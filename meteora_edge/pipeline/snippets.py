"""The sentence of a passage that matches the query: what a result list shows, as a search engine does.

A passage (a 200-word chunk of an index) often opens with text that has nothing to do with the
question; its first words say little about why it was chosen. :func:`snippet` picks the
sentence (by the chunker's breaks: sentences, list items, headings) that holds the most of the
query's terms — the analyser's terms, stemmed and without stop words, each weighing more the
fewer sentences of the passage hold it — and shows it with the next ones while they fit.

Example:
    >>> text = "5. Late Payment. Interest is one percent a month. 6. Termination. Either party may end it on 90 days notice."
    >>> snippet(text, "How much notice ends it?", width=60)
    '… Either party may end it on 90 days notice.'
"""

from __future__ import annotations

import math

from ..index.chunking import sentence_spans
from ..models.analyzer import DEFAULT_ANALYZER, Analyzer

__all__ = ["snippet"]

ELLIPSIS = "…"


def snippet(text: str, query: str, *, width: int, analyzer: Analyzer = DEFAULT_ANALYZER) -> str:
    """At most ``width`` characters of ``text`` around its sentence that best matches ``query``, on one line.

    The best sentence holds the largest weight of query terms (a term weighs
    ``log(1 + sentences / sentences holding it)``; ties go to the earlier sentence). It is
    followed by the next sentences while they fit; ``…`` marks text left out before or after.
    With no query term in the passage, the passage's first words are shown.

    Args:
        text: the passage.
        query: the question (or keywords).
        width: the most characters to return (at least 2).
        analyzer: turns text into terms (the index's or the pipeline's).
    """
    spans = sentence_spans(text)
    if not spans:
        return ""
    terms = set(analyzer.tokens(query))
    held = [set(analyzer.tokens(text[a:b])) & terms for a, b in spans]
    holders = {t: sum(t in h for h in held) for t in terms}
    weight = {t: math.log(1 + len(spans) / n) for t, n in holders.items() if n}
    scores = [sum(weight[t] for t in h) for h in held]
    best = max(range(len(spans)), key=lambda i: (scores[i], -i)) if any(scores) else 0
    start = spans[best][0]
    head = ELLIPSIS + " " if best > 0 else ""
    shown = head + " ".join(text[start:].split())
    if len(shown) <= width:
        return shown
    cut = shown[: max(1, width - 1)]
    space = cut.rfind(" ")
    if shown[len(cut)] != " " and space > len(head) + width // 2:  # end at a word when that keeps most of the room
        cut = cut[:space]
    return cut.rstrip() + ELLIPSIS
