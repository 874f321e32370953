"""What a verifier is: the request it receives (whose text is the prompt), the verdict it
gives, and the two protocols (one chunk per call, or a batch).

The request, verdict and protocol are described in :mod:`~meteora_edge.selection.verification`,
which re-exports everything here; :mod:`~meteora_edge.selection.verdict_readers` reads
answers into verdicts and :mod:`~meteora_edge.selection.verifier_calls` runs verifiers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, Union, runtime_checkable

from .rationales import Rationale, format_rationales

__all__ = [
    "Verdict", "VerificationRequest", "Verifier", "BatchVerifier", "VerifierLike", "render_verifier_prompt",
    "PARSE_ERROR", "CONTEXT_OVERFLOW", "VERDICT_ERRORS", "MAX_REASON_CHARS", "MAX_RAW_CHARS",
]

PARSE_ERROR = "PARSE_ERROR"
CONTEXT_OVERFLOW = "CONTEXT_OVERFLOW"
# flag types that say the verifier could not judge the chunk, not that its content is bad
VERDICT_ERRORS = frozenset({PARSE_ERROR, CONTEXT_OVERFLOW})
MAX_REASON_CHARS = 500
MAX_RAW_CHARS = 2000

_PROMPT = """You verify one retrieved passage before it reaches an answer model.

Query: {query}

Rationales (the evidence to look for; a passage that matches a rationale's Flag Instructions must be flagged):
{rationales}

Evidence accepted so far:
{evidence}

Passage {index}:
{chunk}

Answer with one JSON object and nothing else:
{{"relevant": true or false, "flagged": true or false, "reason": "one short sentence", "flag_types": ["..."] or [], "confidence": a number from 0 to 1}}"""


def render_verifier_prompt(
    query: str, chunk: str, chunk_index: int, rationales: Sequence[Rationale], accepted_evidence: Sequence[str]
) -> str:
    """The plain-text verifier prompt for one chunk (what a text-model verifier receives)."""
    evidence = "\n".join(f"[{n}] {' '.join(e.split())}" for n, e in enumerate(accepted_evidence, start=1))
    return _PROMPT.format(
        query=" ".join(query.split()),
        rationales=format_rationales(rationales) or "(none)",
        evidence=evidence or "(none)",
        index=chunk_index,
        chunk=chunk.strip(),
    )


class VerificationRequest(str):
    """Everything a verifier sees for one chunk; as a string, the verifier prompt built from it.

    Args:
        query: the question.
        chunk: the passage to judge.
        chunk_index: its position among the candidates.
        rationales: the rationales with their flag instructions.
        accepted_evidence: the passages accepted so far, in order.
    """

    query: str
    chunk: str
    chunk_index: int
    rationales: tuple[Rationale, ...]
    accepted_evidence: tuple[str, ...]

    def __new__(
        cls,
        query: str,
        chunk: str,
        chunk_index: int,
        rationales: Sequence[Rationale],
        accepted_evidence: Sequence[str] = (),
    ) -> VerificationRequest:
        rationales, accepted_evidence = tuple(rationales), tuple(accepted_evidence)
        self = super().__new__(cls, render_verifier_prompt(query, chunk, chunk_index, rationales, accepted_evidence))
        self.__dict__.update(query=query, chunk=chunk, chunk_index=chunk_index, rationales=rationales,
                             accepted_evidence=accepted_evidence)
        return self

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("VerificationRequest is immutable")

    @property
    def prompt(self) -> str:
        """The prompt as a plain ``str``."""
        return str.__str__(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (VerificationRequest, (self.query, self.chunk, self.chunk_index, self.rationales, self.accepted_evidence))

    def __repr__(self) -> str:
        return (f"VerificationRequest(query={self.query!r}, chunk_index={self.chunk_index}, "
                f"rationales={len(self.rationales)}, accepted_evidence={len(self.accepted_evidence)})")


@dataclass(frozen=True)
class Verdict:
    """One verifier decision; ``accepted`` is ``relevant and not flagged``.

    ``confidence`` is the verifier's own (when it gave one); ``raw`` is the model's answer text
    (cut to 2000 characters; ``None`` when the verifier returned a mapping).
    """

    relevant: bool
    flagged: bool
    reason: str = ""
    flag_types: tuple[str, ...] = ()
    chunk_index: int = -1
    confidence: float | None = None
    raw: str | None = None

    @property
    def accepted(self) -> bool:
        return self.relevant and not self.flagged

    @property
    def parse_error(self) -> bool:
        return PARSE_ERROR in self.flag_types

    @property
    def is_error(self) -> bool:
        """The verifier gave no usable judgement (unparseable answer, prompt too long): a rejection, not a flag."""
        return bool(self.flag_types) and set(self.flag_types) <= VERDICT_ERRORS

    def to_dict(self) -> dict[str, Any]:
        return {
            "chunk_index": self.chunk_index,
            "accepted": self.accepted,
            "relevant": self.relevant,
            "flagged": self.flagged,
            "reason": self.reason,
            "flag_types": list(self.flag_types),
            "confidence": self.confidence,
            "raw": self.raw,
        }


@runtime_checkable
class Verifier(Protocol):
    def verify(self, request: VerificationRequest) -> Mapping[str, Any] | str | Verdict: ...


@runtime_checkable
class BatchVerifier(Protocol):
    """Judges several chunks of one query at once; the requests share query, rationales and evidence."""

    def verify_batch(self, requests: Sequence[VerificationRequest]) -> Sequence[Mapping[str, Any]] | str: ...


VerifierLike = Union[Verifier, Callable[[VerificationRequest], object], Any]
