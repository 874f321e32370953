"""MeVe's phases around ECSE: candidates → selection → verify → fallback → prioritise → budget.

``engine`` holds :class:`PipelineConfig` and :class:`EvidencePipeline`, which runs the
phases in order; ``rerank`` is the arithmetic of the LLM rerank of ECSE's best
candidates; ``ladder`` picks and runs the verification rung (LLM, cross-encoder,
cosine, none); ``prioritise`` orders and de-duplicates; ``budget`` counts tokens and
packs; ``trace`` records every phase; ``meve`` is MeVe's own facade over the same
phases. Imports ``models``, ``selection`` and ``index``.
"""
