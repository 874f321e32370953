"""Rationales without a language model: the question's parts, then a second hop.

METEORA asks an LLM for rationales. Without one, this module writes them by rule, so
that ECSE's pairing can still reach evidence the question alone does not describe.

**Names.** A name is a quoted phrase (``"…"`` or ``“…”``) or a run of capitalised words
(any cased script: Latin, Cyrillic, Greek …). Inside a run, a few lower-case connectors
may appear between capitalised words (``of``, ``the``, ``de``, ``von`` …, as in *Bank of
England*) and digits may follow a capitalised word (*Windows 95*). Punctuation ends a run,
except the dot of an initial (*Roger O. Egeberg*). Function words at the start of a run
are dropped (the capitalised first word of *Were Scott Derrickson …*).

**Parts of the question.** A question that compares (it holds a comparison word such as
*both*, *same*, *or*, *than*, *older* and at least two names joined by *and*, *or* or a comma,
:func:`compared_names`) becomes one rationale per compared name: the name followed by the
question's other content words (*"Ed Wood nationality"*; a name outside the comparison, such
as *Michigan* in *Are both A and B located in Michigan?*, stays in those words). Names that
are not joined are no comparison (*Receiving Party shall not disclose that the Agreement was
agreed or negotiated* is one statement, whatever its *or*). Any other question is its own
first rationale.

**The second hop.** A bridge question names only the start of its chain: the evidence for
the second step mentions an entity that only the first step's evidence reveals ("the woman
who portrayed Corliss Archer" is *Shirley Temple*). After the first rationale has found its
best chunk, :func:`plan_second_hop` looks at the names in that chunk. A name is a real
bridge only when

* none of its words is a word of the question (*Agreement* is no bridge for a question
  about "the agreement"; *Shirley Temple Black* none for one about *Shirley Temple*);
* a one-word name is capitalised somewhere other than at the start of a sentence (a
  sentence's first word — *Fees*, *Notices* — is capitalised by grammar, not because it names);
* some word of it is never written in lower case in the candidates: a phrase whose every
  capitalised word the text also writes in lower case is common words capitalised as a term
  (a contract's *Recipient* or *Confidential Information*, which every clause is about), where
  a name of a person, a place or a work (*Shirley Temple*, *Kansas*) has no lower-case use;
* it recurs in other candidates (an entity other chunks talk about is a likely bridge), but
  not in most of them: with four or more other candidates, a name that more than half of them
  share (a contract's *Receiving Party*, a manual's product) is what the whole collection is
  about and leads nowhere in particular.

The two bridges that recur most, followed by the question's content words, make the
second-hop rationale, with every word once (case-insensitively). No bridge, no second hop;
either way the plan says why, name by name. Its pairing skips the chunk it came from, so
it lands on evidence elsewhere.

English first: the function words and comparison words are English lists. In another
language nothing breaks — the question stays the first rationale and capitalised names
still feed the second hop; only the comparison split is English-only. For scripts without
case (Chinese, Japanese …) there are no names, and the question is the only rationale.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from .rationales import Rationale

__all__ = ["SECOND_HOP", "find_names", "compared_names", "content_words", "is_comparison", "question_rationales",
           "second_hop_rationale", "plan_second_hop", "SecondHop"]

SECOND_HOP = "second hop"  # the label of the rule-written second-hop rationale

_STOP = frozenset(
    """a an the of in on at to for from by with and or but nor is are was were be been being am do does did
    has have had having what which who whom whose when where why how that this these those it its as into
    than then there their they he she his her him them we you your our us i me my not no yes both either
    neither same also other another one ones any all some more most less least can could would should will
    shall may might must about after before during over under between through while whether if so such only
    own very just too until since upon out off up down each few many much s aside besides""".split()
)
# lower-case words that may sit inside a capitalised name ("Bank of England", "Ludwig van Beethoven")
_CONNECTORS = frozenset("of the de da di du von van der den del la le y to for &".split())
_AND_OR = frozenset({"and", "or"})
_COMPARISON = re.compile(
    r"\b(?:both|same|either|neither|or|than|older|younger|oldest|youngest|first|earlier|later|"
    r"more|most|fewer|less|larger|largest|higher|highest|longer|longest|bigger|taller|smaller)\b",
    re.IGNORECASE,
)
_WORD = re.compile(r"[^\W_](?:[\w'’\-./]*\w)?", re.UNICODE)
_QUOTED = re.compile(r"\"([^\"]{2,})\"|“([^”]{2,})”")
_CONTENT = re.compile(r"\w+", re.UNICODE)


def _is_capitalised(word: str) -> bool:
    return word[0].isupper()


def find_names(text: str, *, split_and_or: bool = False) -> list[str]:
    """Quoted phrases and capitalised runs of ``text``, in order of appearance, without repeats.

    Args:
        text: any text.
        split_and_or: treat ``and``/``or`` as separators (``"Laurel and Hardy"`` → two names);
            by default they may join a name (``"Kiss and Tell"``).

    Example:
        >>> find_names('Were Scott Derrickson and Ed Wood of the same nationality?', split_and_or=True)
        ['Scott Derrickson', 'Ed Wood']
    """
    found: list[tuple[int, str]] = []
    for match in _QUOTED.finditer(text):
        found.append((match.start(), (match.group(1) or match.group(2)).strip()))
    run: list[re.Match[str]] = []

    def close_run() -> None:
        while run and run[-1].group(0).lower() in _CONNECTORS | _AND_OR:
            run.pop()
        while run and run[0].group(0).lower() in _STOP:
            run.pop(0)
        if run:
            found.append((run[0].start(), text[run[0].start() : run[-1].end()]))
        run.clear()

    previous_end = 0  # before the first word the run is empty, so a gap there closes nothing
    for match in _WORD.finditer(text):
        word = match.group(0)
        gap = text[previous_end : match.start()].strip()
        previous_end = match.end()
        initial = gap == "." and run and len(run[-1].group(0)) <= 2
        if gap and not initial:
            close_run()
        lower = word.lower()
        if _is_capitalised(word) or (run and word[0].isdigit()):
            run.append(match)
        elif run and (lower in _CONNECTORS or (lower in _AND_OR and not split_and_or)):
            run.append(match)
        else:
            close_run()
    close_run()
    names: list[str] = []
    seen: set[str] = set()
    for _, name in sorted(found):
        key = name.lower()
        if key not in seen and key not in _STOP:
            seen.add(key)
            names.append(name)
    return names


def content_words(text: str, exclude: Sequence[str] = ()) -> list[str]:
    """The words of ``text`` that are not function words and not part of ``exclude``."""
    excluded = {w.lower() for phrase in exclude for w in _CONTENT.findall(phrase)}
    return [w for w in _CONTENT.findall(text) if w.lower() not in _STOP and w.lower() not in excluded]


_COORDINATORS = frozenset({"and", "or", "&", "vs", "versus", "than"})
_GAP_WORD = re.compile(r"[^\s,\"“”'‘’.:;!?()]+")


def _coordinates(gap: str) -> bool:
    """Whether the text between two names joins them: *and*/*or*/*than*/*&*/*vs* with at most two other words
    (what a name run left out: *For* of *For Against*, *888 7th* of *888 7th Avenue*), or a bare comma;
    no other punctuation."""
    if re.search(r"[.:;!?()]", gap.replace("vs.", "vs")):
        return False
    words = [w.lower() for w in _GAP_WORD.findall(gap)]
    others = sum(w not in _COORDINATORS for w in words)
    if any(w in _COORDINATORS for w in words):
        return others <= 2
    return "," in gap and others == 0


def compared_names(question: str) -> list[str]:
    """The names ``question`` coordinates (``A and B``, ``A or B``, ``A, B and C``), in order; ``[]`` if none.

    Names joined by a comma, *and*, *or*, *than*, *&*, *vs* or *versus* (with at most two other words
    between them, see :func:`_coordinates`) are compared things; names elsewhere in the question
    (*Illinois* in *Which band, Pavement or Hum, is from Illinois?*) are not.

    Example:
        >>> compared_names("Which band, Pavement or Hum, is from Illinois?")
        ['Pavement', 'Hum']
        >>> compared_names("Receiving Party shall not disclose that the Agreement was agreed or negotiated.")
        []
    """
    names = find_names(question, split_and_or=True)
    spans: list[tuple[int, int]] = []
    cursor = 0
    for name in names:
        start = question.find(name, cursor)
        if start < 0:
            return []
        spans.append((start, start + len(name)))
        cursor = start + len(name)
    best: list[str] = []
    group = [0] if names else []
    for i in range(1, len(names) + 1):
        joined = i < len(names) and _coordinates(question[spans[i - 1][1] : spans[i][0]])
        if joined:
            group.append(i)
            continue
        if len(group) >= 2 and len(group) > len(best):
            best = [names[j] for j in group]
        group = [i]
    return best


def is_comparison(question: str) -> bool:
    """Whether the question compares two or more named things: a comparison word and coordinated names."""
    return bool(_COMPARISON.search(question)) and len(compared_names(question)) >= 2


def question_rationales(question: str) -> tuple[list[Rationale], str]:
    """The first rationales for ``question`` and the kind of question.

    Returns:
        ``(rationales, "comparison")`` with one rationale per compared name, or
        ``([question], "question")``; rationales are numbered from 1.
    """
    text = " ".join(question.split())
    if is_comparison(text):
        names = compared_names(text)
        predicate = " ".join(content_words(text, names))
        parts = [" ".join(f"{name} {predicate}".split()) for name in names]
        return [Rationale(part, i, "part") for i, part in enumerate(parts, start=1)], "comparison"
    return [Rationale(text, 1, "question")], "question"


def _mentions(text: str, name: str) -> bool:
    return re.search(r"(?<!\w)" + re.escape(name.lower()) + r"(?!\w)", text.lower()) is not None


_SENTENCE_START = re.compile(r"(?:^|[.!?:;]\s+|\n\s*)[\"'“‘(\[]*$")


def _named_mid_sentence(word: str, texts: Sequence[str]) -> bool:
    """Whether ``word`` appears capitalised somewhere other than at the start of a sentence."""
    pattern = re.compile(r"(?<!\w)" + re.escape(word) + r"(?!\w)")
    return any(not _SENTENCE_START.search(text[: m.start()]) for text in texts for m in pattern.finditer(text))


def _common_words(words: Sequence[str], lower_case: set[str]) -> bool:
    """Whether every capitalised word of ``words`` is in ``lower_case`` (the words the candidates write in lower case).

    A word in capitals throughout (*NDA*, *WINNER*) is an acronym or a name set in capitals; it counts as a name.
    """
    capitalised = [w for w in words if _is_capitalised(w) and not w.isupper()]
    return bool(capitalised) and all(w.lower() in lower_case for w in capitalised)


def _unique_words(words: Sequence[str]) -> list[str]:
    """``words`` with every later repeat (case-insensitively) left out."""
    seen: set[str] = set()
    out = []
    for word in words:
        if word.lower() not in seen:
            seen.add(word.lower())
            out.append(word)
    return out


@dataclass(frozen=True)
class SecondHop:
    """What the second-hop rule decided: the rationale (or ``None``), its bridges and why.

    ``reason`` says in one line why a hop was or was not written; ``considered`` maps each
    name of the first-hop chunk to what became of it (``"bridge (3 other candidates)"``,
    ``"a word of the question"``, ``"capitalised only at a sentence start"``,
    ``"in no other candidate"``, ``"written in lower case too …"`` (common words capitalised as a
    term), ``"in most other candidates …"`` (a name that more than half of
    them share is the collection's subject, not a link to a second passage),
    ``"recurs less than the bridges kept"``).
    """

    rationale: Rationale | None
    bridges: list[str]
    reason: str
    considered: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {"written": self.rationale is not None, "reason": self.reason, "considered": dict(self.considered)}


def plan_second_hop(
    question: str,
    first_hop: str,
    others: Sequence[str],
    *,
    index: int,
    max_names: int = 2,
) -> SecondHop:
    """Decide the second hop by the module's rules (see the module notes).

    Args:
        question: the question.
        first_hop: the text of the best chunk for the question.
        others: the texts of the other candidates (where a bridge name must recur).
        index: the new rationale's number.
        max_names: how many bridge names to keep (those recurring in most candidates).

    Returns:
        A :class:`SecondHop`; its ``rationale`` is ``None`` when no real bridge name was found.

    Example:
        >>> hop = plan_second_hop("When is the Agreement terminated?", "The Agreement ends in May.",
        ...                       ["The Agreement is signed."], index=2)
        >>> hop.rationale is None, hop.considered["Agreement"]
        (True, 'a word of the question')
    """
    asked = {w.lower() for w in _CONTENT.findall(question)}
    texts = [first_hop, *others]
    considered: dict[str, str] = {}
    ranked: list[tuple[int, int, str]] = []
    lower_case: set[str] | None = None
    for order, name in enumerate(find_names(first_hop)):
        words = _CONTENT.findall(name)
        if any(w.lower() in asked for w in words):
            considered[name] = "a word of the question"
            continue
        if len(words) == 1 and not _named_mid_sentence(name, texts):
            considered[name] = "capitalised only at a sentence start"
            continue
        if lower_case is None:  # one pass over the candidates, only once a name gets this far
            lower_case = {w for text in texts for w in _CONTENT.findall(text) if w.islower()}
        if _common_words(words, lower_case):
            considered[name] = "written in lower case too: common words capitalised as a term, not a name"
            continue
        recurrences = sum(_mentions(text, name) for text in others)
        if not recurrences:
            considered[name] = "in no other candidate"
            continue
        if len(others) >= 4 and recurrences > len(others) / 2:
            considered[name] = f"in most other candidates ({recurrences} of {len(others)}): what they all share, not a bridge"
            continue
        ranked.append((-recurrences, order, name))
    ranked.sort()
    bridges = [name for _, _, name in ranked[:max_names]]
    for minus_count, _, name in ranked:
        considered[name] = (f"bridge ({-minus_count} other candidates)" if name in bridges
                            else "recurs less than the bridges kept")
    if not bridges:
        reason = ("no second hop: the best chunk names nothing" if not considered else
                  "no second hop: no name of the best chunk is a bridge (" +
                  "; ".join(f"{n}: {why}" for n, why in considered.items()) + ")")
        return SecondHop(None, [], reason, considered)
    words = _unique_words([w for phrase in bridges for w in phrase.split()] +
                          content_words(question, find_names(question)))
    rationale = Rationale(" ".join(words), index, SECOND_HOP)
    return SecondHop(rationale, bridges, f"second hop through {', '.join(bridges)}", considered)


def second_hop_rationale(
    question: str,
    first_hop: str,
    others: Sequence[str],
    *,
    index: int,
    max_names: int = 2,
) -> tuple[Rationale, list[str]] | None:
    """:func:`plan_second_hop`'s rationale and bridge names, or ``None`` when it wrote none."""
    hop = plan_second_hop(question, first_hop, others, index=index, max_names=max_names)
    return None if hop.rationale is None else (hop.rationale, hop.bridges)
