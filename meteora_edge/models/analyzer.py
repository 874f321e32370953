"""The lexical analyser: how a text becomes BM25 terms, one object for every BM25 in the package.

Two analysers exist, each described as data (a name, a version and its settings) so that
an index or a bundle can record the one it used and a query is analysed the same way:

* ``english`` (version 1, the default): NFKC normalisation and case folding; tokens are
  ``\\w`` runs, so Cyrillic, Greek and other alphabetic scripts are words like English; a
  run of CJK characters (Han, kana, Hangul) becomes its overlapping character bigrams (a
  lone character stays itself), as search engines' CJK analysers do; English stop words
  (:data:`STOP_WORDS`) are dropped; the rest are stemmed by Snowball's English stemmer
  (PyStemmer), so "terminated" and "termination" meet "terminate".
* ``unicode-words`` (version 1): lower-cased ``\\w`` runs — the tokenisation of indexes
  built before analysers were recorded, kept so that those indexes are read as they were.

Example:
    >>> ENGLISH.tokens("How can the Agreement be terminated?")
    ['agreement', 'termin']
    >>> ENGLISH.tokens("東京都")
    ['東京', '京都']
    >>> UNICODE_WORDS.tokens("How can the Agreement be terminated?")
    ['how', 'can', 'the', 'agreement', 'be', 'terminated']
"""

from __future__ import annotations

import json
import pkgutil
import re
import threading
import unicodedata
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import ConfigError, MeteoraError

__all__ = ["Analyzer", "ENGLISH", "UNICODE_WORDS", "DEFAULT_ANALYZER", "LEGACY_ANALYZER", "STOP_WORDS",
           "ANALYZERS", "analyzer_from_record", "analyzer_of"]

# Han (with extensions and compatibility ideographs), Hiragana, Katakana and Hangul syllables.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f"
_RUNS = re.compile(rf"([{_CJK}]+)|([^\W{_CJK}]+)")
_WORD = re.compile(r"\w+")


def _load_stop_words() -> frozenset[str]:
    # pkgutil reads package data through the package's loader, without importlib.resources' readers (start-up)
    raw = pkgutil.get_data("meteora_edge", "data/stopwords_english.json")
    if raw is None:  # a loader that cannot read data: a broken install, not a user error
        raise RuntimeError("meteora_edge/data/stopwords_english.json cannot be read; reinstall meteora-edge")
    return frozenset(json.loads(raw.decode("utf-8"))["words"])


#: The English stop words of the ``english`` analyser (case-folded word runs).
STOP_WORDS: frozenset[str] = _load_stop_words()


class _Stemmers(threading.local):
    """One Snowball stemmer per thread (a PyStemmer object must not be shared between threads)."""

    def get(self, language: str) -> Any:
        stemmer = getattr(self, language, None)
        if stemmer is None:
            try:
                import Stemmer
            except ImportError:
                raise ConfigError("the english analyser needs PyStemmer, a dependency of meteora-edge; "
                                  "reinstall it or pip install PyStemmer") from None
            stemmer = Stemmer.Stemmer(language)
            setattr(self, language, stemmer)
        return stemmer


_STEMMERS = _Stemmers()


@dataclass(frozen=True)
class Analyzer:
    """A text → terms recipe, recorded as :meth:`record` wherever BM25 terms are stored.

    Args:
        name: what the recipe is called.
        version: bumped whenever the same name would produce other terms.
        normalize: ``"nfkc-casefold"`` or ``"lower"`` (Python's ``str.lower``, no normalisation).
        cjk: ``"bigrams"`` (CJK runs become overlapping character bigrams) or ``"words"``
            (a CJK run is one ``\\w`` token like any other).
        stop_words: ``"english"`` (drop :data:`STOP_WORDS`) or ``"none"``.
        stemmer: ``"snowball-english"`` or ``"none"``.
    """

    name: str
    version: int
    normalize: str
    cjk: str
    stop_words: str
    stemmer: str

    def __post_init__(self) -> None:
        for key, allowed in (("normalize", ("nfkc-casefold", "lower")), ("cjk", ("bigrams", "words")),
                             ("stop_words", ("english", "none")), ("stemmer", ("snowball-english", "none"))):
            if getattr(self, key) not in allowed:
                raise ConfigError(f"analyzer {key} must be one of {', '.join(allowed)}, got {getattr(self, key)!r}")

    def tokens(self, text: str) -> list[str]:
        """The BM25 terms of ``text``, in order (repeats kept: they are term frequencies)."""
        if self.normalize == "lower":
            folded = text.lower()
        else:
            folded = unicodedata.normalize("NFKC", text).casefold()
        if self.cjk == "words":
            words = _WORD.findall(folded)
        else:
            words = []
            for cjk_run, word in _RUNS.findall(folded):
                if word:
                    words.append(word)
                elif len(cjk_run) == 1:
                    words.append(cjk_run)
                else:
                    words.extend(cjk_run[i : i + 2] for i in range(len(cjk_run) - 1))
        if self.stop_words == "english":
            words = [w for w in words if w not in STOP_WORDS]
        if self.stemmer == "snowball-english":
            words = _STEMMERS.get("english").stemWords(words)
        return words

    def record(self) -> dict[str, Any]:
        """What an index or bundle stores: every field, so a reader can tell recipes apart."""
        return asdict(self)


ENGLISH = Analyzer("english", 1, normalize="nfkc-casefold", cjk="bigrams", stop_words="english",
                   stemmer="snowball-english")
UNICODE_WORDS = Analyzer("unicode-words", 1, normalize="lower", cjk="words", stop_words="none", stemmer="none")
#: New indexes and given passages use this one.
DEFAULT_ANALYZER = ENGLISH
#: An index that records no analyser was built with this one.
LEGACY_ANALYZER = UNICODE_WORDS
#: Every analyser this version can apply, by name.
ANALYZERS = {a.name: a for a in (ENGLISH, UNICODE_WORDS)}


def analyzer_from_record(record: Any, *, where: str, error: type[MeteoraError]) -> Analyzer:
    """The analyser a stored record names, or ``error`` saying that this version does not know it.

    Args:
        record: the stored object (see :meth:`Analyzer.record`).
        where: names the index or bundle in the message.
        error: the error class to raise (the index's or the bundle's).

    Raises:
        error: the record is not exactly one of :data:`ANALYZERS`' records.
    """
    known = ANALYZERS.get(record.get("name")) if isinstance(record, dict) and isinstance(record.get("name"), str) else None
    if known is None or known.record() != record:
        shown = json.dumps(record, sort_keys=True, default=str)[:120]
        raise error(f"{where} was built with the lexical analyser {shown}, which this version of meteora-edge "
                    f"does not know (it knows {', '.join(f'{a.name} v{a.version}' for a in ANALYZERS.values())}); "
                    "upgrade meteora-edge or rebuild it")
    return known


def analyzer_of(*sources: object) -> Analyzer:
    """The analyser of the first source that has one (an index, a bundle's encoder), else the default.

    An index's analyser comes first wherever a query meets it: its terms were made by that one.
    """
    for source in sources:
        found = getattr(source, "analyzer", None)
        if isinstance(found, Analyzer):
            return found
    return DEFAULT_ANALYZER
