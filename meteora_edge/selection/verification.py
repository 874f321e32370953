"""The verifier protocol: judge each chunk, accept only when relevant and not flagged.

A verifier is anything METEORA's verifier accepts, plus this package's own protocol:

* an object with ``.verify(request)`` (e.g. :class:`~meteora_edge.selection.llm_verifier.LlamaVerifier`);
* a callable ``f(request)``;
* an object with ``.generate``, ``.complete`` or ``.invoke`` (a text model).

The :class:`VerificationRequest` it receives *is the prompt text* (a ``str``) and carries the
parts as attributes (``query``, ``chunk``, ``chunk_index``, ``rationales``,
``accepted_evidence``), so a callable that sends its argument to a model and one that reads
``request.chunk`` both work. The answer may be a mapping, JSON text, a message object with
``.content`` or a :class:`Verdict`.

Reading is fail-closed by default: an answer without boolean ``relevant`` and ``flagged`` is
rejected with flag type ``PARSE_ERROR``. :class:`MeteoraVerifier` with ``fail_closed=False``
reads leniently as METEORA does (``"yes"``/``1``/``relevant: yes`` prose) and accepts an
answer it cannot read. Chunks are judged one at a time, best first, each with the evidence
accepted so far. Errors raised by the model itself propagate to the caller.

A *batch* verifier (``.verify_batch(requests)``, see :class:`BatchVerifier`) judges several
chunks in one answer: a JSON array (or a list of mappings) with one verdict per chunk,
keyed by ``id`` = the chunk index. :func:`parse_batch_verdicts` reads it chunk by chunk: a
chunk the answer leaves out, or whose verdict is unusable, gets a ``PARSE_ERROR`` verdict of
its own while the others stand. :func:`verify_chunks_batched` feeds the batches in judging
order, each with the evidence accepted in the batches before it.

Import these names from here; they live in three modules: ``verifier_protocol`` (request,
prompt, verdict and the two protocols), ``verdict_readers`` (the answer readers) and
``verifier_calls`` (:func:`call_verifier`, :class:`MeteoraVerifier` and the two drivers).
"""

from __future__ import annotations

from .verdict_readers import parse_batch_verdicts, parse_verdict
from .verifier_calls import MeteoraVerifier, call_verifier, verify_chunks, verify_chunks_batched
from .verifier_protocol import (
    CONTEXT_OVERFLOW,
    MAX_RAW_CHARS,
    MAX_REASON_CHARS,
    PARSE_ERROR,
    VERDICT_ERRORS,
    BatchVerifier,
    Verdict,
    VerificationRequest,
    Verifier,
    VerifierLike,
    render_verifier_prompt,
)

__all__ = [
    "Verdict",
    "VerificationRequest",
    "Verifier",
    "VerifierLike",
    "MeteoraVerifier",
    "parse_verdict",
    "verify_chunks",
    "BatchVerifier",
    "parse_batch_verdicts",
    "verify_chunks_batched",
    "PARSE_ERROR",
    "CONTEXT_OVERFLOW",
    "VERDICT_ERRORS",
]
