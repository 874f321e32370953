"""Next-token logits of many prompts that share a prefix, in as few llama.cpp evaluations as possible.

A question's relevance prompts differ only after the question: ``prefix + branch_i``. Scored
one after another, each branch is its own small llama.cpp evaluation (and llama-cpp-python's
per-call overhead). :class:`BranchEvaluator` instead evaluates the prefix once in sequence 0
of its own KV cache, copies it to one sequence per branch (a copy in a unified cache only
tags the prefix's cells with another sequence id; nothing is recomputed) and then evaluates
the tokens of all branches together, packed into batches of ``n_batch`` tokens, each in its
own sequence. Attention is masked by sequence, so branch ``i`` sees the prefix and itself
only: the logits are the ones the branch would get alone (up to float rounding, since the
matrix products run over a different batch).

The evaluator owns a second llama.cpp context on the *same* loaded weights (no second copy
of the model; only a KV cache of ``context_size`` tokens), so the model's main context — and
the prompt prefix a generator or verifier keeps in it — is left untouched.

Example:
    >>> evaluator = BranchEvaluator(llm)                                    # doctest: +SKIP
    >>> evaluator.logits(prefix_tokens, [branch_a, branch_b]).shape         # doctest: +SKIP
    (2, 151936)
"""

from __future__ import annotations

import ctypes
import logging
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ConfigError, ModelError

__all__ = ["BranchEvaluator", "supports_branches"]

logger = logging.getLogger(__name__)

DEFAULT_SEQUENCES = 16


def supports_branches(llama: Any) -> bool:
    """Whether ``llama`` is a real ``llama_cpp.Llama`` (its weights can back a second context)."""
    return hasattr(llama, "_model") and hasattr(llama, "context_params") and hasattr(llama, "n_vocab")


class BranchEvaluator:
    """Batched next-token logits for ``prefix + branch`` prompts (see the module doc).

    Args:
        llama: a loaded ``llama_cpp.Llama``.
        context_size: KV cells of the evaluator's cache (prefix plus the branches evaluated
            together must fit; more branches are evaluated in rounds).
        sequences: branches evaluated together at most (llama.cpp's ``n_seq_max``).
        batch_size: tokens per llama.cpp evaluation.

    Raises:
        ConfigError: a non-positive option, or an object that is not a llama-cpp-python model.
        ModelError: llama.cpp could not create the context.
    """

    def __init__(self, llama: Any, *, context_size: int, sequences: int = DEFAULT_SEQUENCES,
                 batch_size: int = 512) -> None:
        for name, value in (("context_size", context_size), ("sequences", sequences), ("batch_size", batch_size)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if not supports_branches(llama):
            raise ConfigError(f"batched evaluation needs a llama_cpp.Llama, got {type(llama).__name__}")
        from llama_cpp import _internals
        from llama_cpp import llama_cpp as bindings

        self._c = bindings
        self.sequences = min(sequences, int(bindings.llama_max_parallel_sequences()))
        self.batch_size = min(batch_size, context_size)
        # the main context's settings (threads, attention, KV types, RoPE), so the logits are the ones it gives
        params = type(llama.context_params).from_buffer_copy(llama.context_params)
        params.n_ctx = context_size
        params.n_batch = params.n_ubatch = self.batch_size
        params.n_seq_max = self.sequences
        params.kv_unified = True  # one cache: the prefix's cells serve every sequence
        try:
            self._ctx = _internals.LlamaContext(model=llama._model, params=params, verbose=False)
        except ValueError as exc:
            raise ModelError(f"llama.cpp could not create a {context_size}-token batched context: {exc}") from None
        self._batch = bindings.llama_batch_init(self.batch_size, 0, 1)
        self._n_vocab = int(llama.n_vocab())
        self.context_size = int(self._ctx.n_ctx())
        self.evaluations = 0  # llama_decode calls of the last :meth:`logits`
        self._lock = threading.Lock()

    def close(self) -> None:
        """Free the batch and the context (the model stays loaded)."""
        if getattr(self, "_batch", None) is not None:
            self._c.llama_batch_free(self._batch)
            self._batch = None
        if getattr(self, "_ctx", None) is not None:
            self._ctx.close()
            self._ctx = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: the bindings may already be gone
            pass

    def _decode(self, entries: Sequence[tuple[int, int, int, bool]]) -> list[np.ndarray]:
        """Evaluate ``(token, position, sequence, wants_logits)`` entries; the logits rows asked for."""
        batch = self._batch
        batch.n_tokens = len(entries)
        for i, (token, pos, seq, wanted) in enumerate(entries):
            batch.token[i] = token
            batch.pos[i] = pos
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = seq
            batch.logits[i] = wanted
        status = self._c.llama_decode(self._ctx.ctx, batch)
        self.evaluations += 1
        if status != 0:
            raise ModelError(f"llama.cpp failed to evaluate a batch of {len(entries)} tokens (status {status})")
        rows = []
        for i, entry in enumerate(entries):
            if entry[3]:
                pointer = self._c.llama_get_logits_ith(self._ctx.ctx, i)
                rows.append(np.ctypeslib.as_array(ctypes.cast(pointer, ctypes.POINTER(ctypes.c_float)),
                                                  shape=(self._n_vocab,)).astype(np.float64))
        return rows

    def _run(self, entries: list[tuple[int, int, int, bool]]) -> list[np.ndarray]:
        rows: list[np.ndarray] = []
        for start in range(0, len(entries), self.batch_size):
            rows += self._decode(entries[start : start + self.batch_size])
        return rows

    def logits(self, prefix: Sequence[int], branches: Sequence[Sequence[int]]) -> np.ndarray:
        """The next-token logits after ``prefix + branch`` for each branch, one row per branch.

        Raises:
            ModelError: the prefix and one branch do not fit the context, a branch is empty,
                or llama.cpp failed.
        """
        if not branches:
            return np.zeros((0, self._n_vocab))
        if any(len(b) == 0 for b in branches):
            raise ModelError("a branch has no tokens: the logits after the prefix alone are not a branch's")
        longest = max(len(b) for b in branches)
        if len(prefix) + longest > self.context_size:
            raise ModelError(f"prompt of {len(prefix) + longest} tokens exceeds the model context of "
                             f"{self.context_size} tokens; raise the context size (context_size= / --context-size) "
                             "or shorten the input")
        with self._lock:
            if self._ctx is None:
                raise ModelError("the batched evaluator was closed")
            memory = self._ctx.memory
            self.evaluations = 0
            self._c.llama_memory_clear(memory, True)
            try:
                return self._rounds(memory, list(prefix), branches)
            finally:
                self._c.llama_memory_clear(memory, True)

    def _rounds(self, memory: Any, prefix: list[int], branches: Sequence[Sequence[int]]) -> np.ndarray:
        n = len(prefix)
        if prefix:
            self._run([(t, p, 0, False) for p, t in enumerate(prefix)])
        out = np.empty((len(branches), self._n_vocab))
        start = 0
        while start < len(branches):
            # as many branches as there are sequences and the cache holds beside the prefix
            group, room = [], self.context_size - n
            for i in range(start, min(len(branches), start + self.sequences)):
                if len(branches[i]) > room:
                    break
                group.append(i)
                room -= len(branches[i])
            for seq in range(1, len(group)):
                self._c.llama_memory_seq_cp(memory, 0, seq, -1, -1)
            entries = [(t, n + p, seq, p == len(branches[i]) - 1)
                       for seq, i in enumerate(group) for p, t in enumerate(branches[i])]
            for i, row in zip(group, self._run(entries)):
                out[i] = row
            for seq in range(len(group)):
                self._c.llama_memory_seq_rm(memory, seq, n if seq == 0 else -1, -1)
            start += len(group)
        return out
