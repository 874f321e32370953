"""How strongly a local GGUF model says a passage helps answer the question: one number per passage.

For each passage the model reads the question and the passage and is asked whether the
passage gives a fact the answer needs (directly, or about a person, place or thing the
answer depends on). Nothing is generated: the score is the log-probability margin of the
answer's first token, ``log P(Yes) − log P(No)``, read in one forward pass. The question and
the ask come first and stay token-identical for every passage of a query, so llama.cpp
evaluates them once; each passage then costs only its own tokens (``ask_first``, the default:
on the dev pools of the 1.5B it was 1.4–1.5× faster than asking after the passage, with the
same F1 on HotpotQA and a higher one on ContractNLI; docs/llm-rerank-speed.md).

With ``batched=True`` and a llama-cpp-python model the passages of one call are scored
together: the shared prefix is evaluated once and every passage's tokens run in one batch,
each in its own llama.cpp sequence (:class:`~meteora_edge.models.llm_branches.BranchEvaluator`),
instead of one llama.cpp call per passage. The prompts are the same; float rounding over the
other batch shapes moves the scores a little. It is off by default: on a 2-core AVX2 CPU it
was not measurably faster (docs/llm-rerank-speed.md). Other stand-ins for ``llama_cpp.Llama``
(test fakes) are always scored one passage at a time.

Rejection rules (``score(..., rules=[...])``: a rationale's flag instructions, or the user's
``reject`` rules) join the ask — "Answer No if the passage matches one of these rejection
rules" — in the shared prefix, so they cost no tokens per passage. Without rules the prompt is
exactly the one the dev-set figures were measured with.

Used by the pipeline's LLM rerank (``PipelineConfig.llm_pool``): the scores of ECSE's best
candidates join their ECSE scores (both standardised over those candidates). Judging one
passage per prompt is deliberate: measured on the dev data, small models judge passages
listed together far worse (they answer by position), see docs/what-did-not-pay.md.

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

from ..errors import ConfigError, InputError, ModelError
from ..models.llm_branches import BranchEvaluator, supports_branches
from ..models.llm_model import DEFAULT_CONTEXT_SIZE, ChatMessage, LocalLLM, as_local_llm

__all__ = ["LlamaRelevanceScorer"]

logger = logging.getLogger(__name__)

_SYSTEM = "You check evidence for a question-answering system{domain}."
_ASK = ("\n\nDoes this passage give a fact needed to answer the question, either directly or about a person, place "
        "or thing the answer depends on?")
_ASK_FIRST = ("Does the passage below give a fact needed to answer the question, either directly or about a person, "
              "place or thing the answer depends on?")
_RULES = " Answer No if the passage matches one of these rejection rules: {rules}"
_ANSWER = " Answer Yes or No."
_YES, _NO = "Yes", "No"


class LlamaRelevanceScorer:
    """Score passages for a question with a local GGUF model (see the module doc).

    Args:
        model: a :class:`LocalLLM` (shared with a generator or verifier; load it with the
            threads and context you want) or the path of a ``.gguf`` file (loaded with the defaults).
        domain: optional subject named in the system prompt.
        max_passage_chars: a longer passage is cut to this many characters before it is judged.
        batched: score a call's passages in shared llama.cpp batches (see the module doc);
            ``False`` (the default) makes one llama.cpp call per passage.
        ask_first: ask the question about the passage *before* it (the default), so that the
            ask joins the question in the prefix every passage shares and each passage costs
            only its own tokens; ``False``: the ask follows the passage (the earlier layout).

    Raises:
        ConfigError: an option out of range.
    """

    #: :meth:`score` takes rejection rules (the pipeline's rerank passes the rationales' flag instructions)
    reads_rules = True

    def __init__(
        self,
        model: LocalLLM | str | os.PathLike[str],
        *,
        domain: str | None = None,
        max_passage_chars: int = 2000,
        batched: bool = False,
        ask_first: bool = True,
    ) -> None:
        if not isinstance(max_passage_chars, int) or isinstance(max_passage_chars, bool) or max_passage_chars < 1:
            raise ConfigError(f"max_passage_chars must be a positive integer, got {max_passage_chars!r}")
        for name, flag in (("batched", batched), ("ask_first", ask_first)):
            if not isinstance(flag, bool):
                raise ConfigError(f"{name} must be True or False, got {flag!r}")
        self.model = as_local_llm(model, threads=1, context_size=DEFAULT_CONTEXT_SIZE, seed=0, chat_format=None)
        self.domain = domain
        self.max_passage_chars = max_passage_chars
        self.batched = batched
        self.ask_first = ask_first
        self.last_seconds = 0.0
        self.last_evaluations = 0  # llama.cpp evaluations (batched) or calls (one per passage) of the last score
        self._answer_ids: tuple[int, int] | None = None
        self._evaluator: BranchEvaluator | None = None

    def messages(self, query: str, passage: str, rules: Sequence[str] = ()) -> list[ChatMessage]:
        """The prompt for one passage: the question first (the shared prefix), the passage, the question asked
        (with ``ask_first`` the ask comes before the passage, inside the shared prefix). ``rules`` (rejection
        rules, e.g. rationales' flag instructions) join the ask: a passage that matches one must get a No."""
        domain = f" in {self.domain}" if self.domain else ""
        question = f"Question: {' '.join(query.split())}\n\n"
        numbered = " ".join(f"({i}) {_sentence(r)}" for i, r in enumerate(rules, start=1))
        listed = _RULES.format(rules=numbered) if rules else ""
        parts = ((f"{question}{_ASK_FIRST}{listed}{_ANSWER}\n\nPassage: ", passage) if self.ask_first
                 else (f"{question}Passage: ", passage, f"{_ASK}{listed}{_ANSWER}"))
        return [ChatMessage("system", (_SYSTEM.format(domain=domain),)), ChatMessage("user", parts)]

    def _answers(self) -> tuple[int, int]:
        if self._answer_ids is None:
            yes, no = self.model.tokenize(_YES), self.model.tokenize(_NO)
            if not yes or not no or yes[0] == no[0]:
                raise ConfigError(f"{self.model.source or 'the model'}'s vocabulary cannot tell 'Yes' from 'No' by one token")
            self._answer_ids = (yes[0], no[0])
        return self._answer_ids

    def _clip(self, passage: str) -> str:
        return " ".join(passage.split())[: self.max_passage_chars]

    def score(self, query: str, passages: Sequence[str], *, rules: Sequence[str] = ()) -> np.ndarray:
        """``log P(Yes) − log P(No)`` for each passage (higher: more useful to answer ``query``).

        ``rules``: rejection rules in plain words (a rationale's flag instructions, or the user's); the model
        is told to answer No for a passage that matches one. They are part of the prefix every passage shares.

        Raises:
            InputError: an empty query, or a rule that is not a non-empty string.
            ModelError: a prompt does not fit the context, or llama.cpp failed.
        """
        if not isinstance(query, str) or not query.strip():
            raise InputError("the relevance scorer needs a non-empty query")
        if not isinstance(rules, (list, tuple)) or any(not isinstance(r, str) or not r.strip() for r in rules):
            raise InputError("rules must be a list of non-empty strings")
        yes, no = self._answers()
        started = time.perf_counter()
        rules = tuple(rules)
        prompts = [self.model.chat_tokens(self.messages(query, self._clip(str(p)), rules)) for p in passages]
        evaluator = self._branch_evaluator() if prompts else None
        if evaluator is None:
            rows = [self.model.next_token_logprobs(tokens, (yes, no)) for tokens in prompts]
            self.last_evaluations = len(prompts)
        else:
            shared = _shared_prefix(prompts)
            logits = evaluator.logits(prompts[0][:shared], [tokens[shared:] for tokens in prompts])
            rows = _log_softmax_at(logits, (yes, no)).tolist()
            self.last_evaluations = evaluator.evaluations
        out = np.asarray([row[0] - row[1] for row in rows], dtype=np.float64).reshape(len(prompts))
        if not np.isfinite(out).all():
            raise ModelError(f"{self.model.source or 'the language model'} gave non-finite Yes/No log-probabilities "
                             "(a broken or mis-converted GGUF); re-convert or re-download the model")
        self.last_seconds = time.perf_counter() - started
        logger.debug("scored %d passages in %.0f ms (%d llama.cpp evaluations)", len(passages),
                     self.last_seconds * 1000, self.last_evaluations)
        return out

    def _branch_evaluator(self) -> BranchEvaluator | None:
        """The batched evaluator on the model's weights (made once), or None: not batched, or a stand-in model."""
        if not self.batched or not supports_branches(self.model.llama):
            return None
        if self._evaluator is None:
            self._evaluator = BranchEvaluator(self.model.llama, context_size=self.model.context_size)
        return self._evaluator

    def __repr__(self) -> str:
        return f"LlamaRelevanceScorer(model={self.model!r})"


def _sentence(rule: str) -> str:
    """A rule as one sentence: whitespace folded, a final full stop added when it has none."""
    text = " ".join(rule.split())
    return text if text[-1] in ".!?" else f"{text}."


def _shared_prefix(prompts: Sequence[Sequence[int]]) -> int:
    """Tokens every prompt starts with, leaving each prompt at least one token of its own."""
    shortest = min(len(p) for p in prompts)
    first = prompts[0]
    n = 0
    while n < shortest - 1 and all(p[n] == first[n] for p in prompts):
        n += 1
    return n


def _log_softmax_at(logits: np.ndarray, token_ids: Sequence[int]) -> np.ndarray:
    """``log softmax(logits)`` of each row at ``token_ids`` (rows: prompts; columns: the vocabulary)."""
    top = logits.max(axis=1, keepdims=True)
    with np.errstate(over="ignore", invalid="ignore"):
        log_total = top + np.log(np.exp(logits - top).sum(axis=1, keepdims=True))
    return logits[:, list(token_ids)] - log_total
