"""How strongly a local GGUF model says a passage helps answer the question: one number per passage.

For each passage the model reads the question and the passage and is asked whether the
passage gives a fact the answer needs (directly, or about a person, place or thing the
answer depends on). Nothing is generated: the score is the log-probability margin of the
answer's first token, ``log P(Yes) − log P(No)``, read in one forward pass. The question
comes first and stays token-identical for every passage of a query, so llama.cpp evaluates
it once; each passage then costs only its own tokens and the short question after it.

Used by the pipeline's LLM rerank (``PipelineConfig.llm_pool``): the scores of ECSE's best
candidates join their ECSE scores (both standardised over those candidates). Judging one
passage per prompt is deliberate: measured on the dev data, small models judge passages
listed together far worse (they answer by position), see docs/evaluation.md.

Example:
    >>> scorer = LlamaRelevanceScorer("qwen2.5-coder-1.5b-instruct.Q4_K_M.gguf")       # doctest: +SKIP
    >>> scorer.score("Who directed Big Stone Gap?", ["Big Stone Gap is a film by Adriana Trigiani."])  # doctest: +SKIP
    array([2.31])
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence

import numpy as np

from ..errors import ConfigError, InputError
from ..models.llm_model import DEFAULT_CONTEXT_SIZE, ChatMessage, LocalLLM, as_local_llm

__all__ = ["LlamaRelevanceScorer"]

logger = logging.getLogger(__name__)

_SYSTEM = "You check evidence for a question-answering system{domain}."
_ASK = ("\n\nDoes this passage give a fact needed to answer the question, either directly or about a person, place "
        "or thing the answer depends on? Answer Yes or No.")
_YES, _NO = "Yes", "No"


class LlamaRelevanceScorer:
    """Score passages for a question with a local GGUF model (see the module doc).

    Args:
        model: a :class:`LocalLLM` (shared with a generator or verifier; load it with the
            threads and context you want) or the path of a ``.gguf`` file (loaded with the defaults).
        domain: optional subject named in the system prompt.
        max_passage_chars: a longer passage is cut to this many characters before it is judged.

    Raises:
        ConfigError: an option out of range.
    """

    def __init__(
        self,
        model: LocalLLM | str | os.PathLike[str],
        *,
        domain: str | None = None,
        max_passage_chars: int = 2000,
    ) -> None:
        if not isinstance(max_passage_chars, int) or isinstance(max_passage_chars, bool) or max_passage_chars < 1:
            raise ConfigError(f"max_passage_chars must be a positive integer, got {max_passage_chars!r}")
        self.model = as_local_llm(model, threads=1, context_size=DEFAULT_CONTEXT_SIZE, seed=0, chat_format=None)
        self.domain = domain
        self.max_passage_chars = max_passage_chars
        self.last_seconds = 0.0
        self._answer_ids: tuple[int, int] | None = None

    def messages(self, query: str, passage: str) -> list[ChatMessage]:
        """The prompt for one passage: the question first (the shared prefix), the passage, the question asked."""
        domain = f" in {self.domain}" if self.domain else ""
        return [ChatMessage("system", (_SYSTEM.format(domain=domain),)),
                ChatMessage("user", (f"Question: {' '.join(query.split())}\n\nPassage: ", passage, _ASK))]

    def _answers(self) -> tuple[int, int]:
        if self._answer_ids is None:
            yes, no = self.model.tokenize(_YES), self.model.tokenize(_NO)
            if not yes or not no or yes[0] == no[0]:
                raise ConfigError(f"{self.model.source or 'the model'}'s vocabulary cannot tell 'Yes' from 'No' by one token")
            self._answer_ids = (yes[0], no[0])
        return self._answer_ids

    def _clip(self, passage: str) -> str:
        return " ".join(passage.split())[: self.max_passage_chars]

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """``log P(Yes) − log P(No)`` for each passage (higher: more useful to answer ``query``).

        Raises:
            InputError: an empty query.
            ModelError: a prompt does not fit the context, or llama.cpp failed.
        """
        if not isinstance(query, str) or not query.strip():
            raise InputError("the relevance scorer needs a non-empty query")
        yes, no = self._answers()
        started = time.perf_counter()
        out = np.zeros(len(passages), dtype=np.float64)
        for i, passage in enumerate(passages):
            tokens = self.model.chat_tokens(self.messages(query, self._clip(str(passage))))
            logprob_yes, logprob_no = self.model.next_token_logprobs(tokens, (yes, no))
            out[i] = logprob_yes - logprob_no
        self.last_seconds = time.perf_counter() - started
        logger.debug("scored %d passages in %.0f ms", len(passages), self.last_seconds * 1000)
        return out

    def __repr__(self) -> str:
        return f"LlamaRelevanceScorer(model={self.model!r})"
