"""Running verifiers: ask one about a chunk, wrap a text model as one, and judge a query's
chunks in order, one per call or in batches, each seeing the evidence accepted before it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..errors import ConfigError, InputError
from .rationales import Rationale
from .verdict_readers import parse_batch_verdicts, parse_verdict
from .verifier_protocol import BatchVerifier, Verdict, VerificationRequest, VerifierLike

__all__ = ["call_verifier", "MeteoraVerifier", "verify_chunks", "verify_chunks_batched"]

_MODEL_METHODS = ("generate", "complete", "invoke")


def call_verifier(verifier: VerifierLike, request: VerificationRequest) -> object:
    """Ask ``verifier`` about one chunk: ``.verify(request)``, ``verifier(request)``, or a text
    model's ``.generate``/``.complete``/``.invoke`` with the request (which is the prompt text).

    Raises:
        ConfigError: ``verifier`` is none of these.
    """
    if hasattr(verifier, "verify"):
        return verifier.verify(request)
    if callable(verifier):
        return verifier(request)
    for name in _MODEL_METHODS:
        method = getattr(verifier, name, None)
        if callable(method):
            return method(request)
    raise ConfigError(
        f"verifier of type {type(verifier).__name__} has no .verify(), .generate(), .complete() or .invoke() "
        "and is not callable"
    )


class MeteoraVerifier:
    """A verifier around any text model, read strictly or (``fail_closed=False``) as METEORA reads.

    Args:
        model: a callable taking the prompt text, an object with ``.generate``, ``.complete`` or
            ``.invoke`` returning text or a message with ``.content``, or any verifier this
            module accepts.
        fail_closed: reject answers that are not clean JSON booleans (default); ``False`` reads
            leniently and accepts unreadable answers (see :func:`parse_verdict`).

    Example:
        >>> v = MeteoraVerifier(lambda prompt: "relevant: yes, flagged: no", fail_closed=False)
        >>> v.verify(VerificationRequest("q?", "a passage", 0, ())).accepted
        True
    """

    def __init__(self, model: VerifierLike, *, fail_closed: bool = True) -> None:
        if not (hasattr(model, "verify") or callable(model) or any(callable(getattr(model, m, None)) for m in _MODEL_METHODS)):
            raise ConfigError(
                f"verifier model of type {type(model).__name__} is not callable and has no .generate(), "
                ".complete() or .invoke()"
            )
        if not isinstance(fail_closed, bool):
            raise ConfigError(f"fail_closed must be True or False, got {fail_closed!r}")
        self.model = model
        self.fail_closed = fail_closed

    def verify(self, request: VerificationRequest) -> Verdict:
        """Judge one chunk; model errors propagate."""
        return parse_verdict(call_verifier(self.model, request), chunk_index=request.chunk_index,
                             fail_closed=self.fail_closed)

    def __repr__(self) -> str:
        return f"MeteoraVerifier(model={type(self.model).__name__}, fail_closed={self.fail_closed})"


def verify_chunks(
    verifier: VerifierLike,
    query: str,
    texts: Sequence[str],
    order: Sequence[int],
    rationales: Sequence[Rationale],
    *,
    check: Callable[[], None] | None = None,
) -> list[Verdict]:
    """Judge ``texts[i]`` for each ``i`` in ``order``, passing the evidence accepted so far.

    ``check`` is called before each model call; what it raises stops the judging there.

    Returns:
        One verdict per judged chunk, in judging order.
    """
    accepted: list[str] = []
    verdicts: list[Verdict] = []
    for index in order:
        if check is not None:
            check()
        request = VerificationRequest(query, texts[index], int(index), tuple(rationales), tuple(accepted))
        verdict = parse_verdict(call_verifier(verifier, request), chunk_index=int(index))
        verdicts.append(verdict)
        if verdict.accepted:
            accepted.append(texts[index])
    return verdicts


def verify_chunks_batched(
    verifier: BatchVerifier,
    query: str,
    texts: Sequence[str],
    order: Sequence[int],
    rationales: Sequence[Rationale],
    *,
    batch_size: int,
    check: Callable[[], None] | None = None,
) -> list[Verdict]:
    """Judge ``texts[i]`` for ``i`` in ``order`` in batches of ``batch_size`` chunks.

    Each batch sees the evidence accepted in the batches before it (chunks of one batch are
    judged together, so they do not see each other's verdicts). ``check`` is called before each batch.

    Returns:
        One verdict per judged chunk, in judging order.
    """
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise InputError(f"batch_size must be a positive integer, got {batch_size!r}")
    accepted: list[str] = []
    verdicts: list[Verdict] = []
    for start in range(0, len(order), batch_size):
        if check is not None:
            check()
        batch = [int(i) for i in order[start : start + batch_size]]
        requests = [
            VerificationRequest(query=query, chunk=texts[i], chunk_index=i, rationales=tuple(rationales),
                                accepted_evidence=tuple(accepted))
            for i in batch
        ]
        judged = parse_batch_verdicts(verifier.verify_batch(requests), batch)
        verdicts += judged
        accepted += [texts[v.chunk_index] for v in judged if v.accepted]
    return verdicts
