"""METEORA: rationales, ECSE selection and verification (imports only ``models``).

``stages`` holds ECSE's stages as pure numpy functions (cosine matrix, pairing, pooled
scores, the z-score elbow, expansion, top-k); ``ecse`` composes them into the selector;
``rationales`` parses, formats and resolves rationales (given, generated or the query);
``reranker`` is METEORA's reranker facade; ``verification`` is the verifier's public home,
gathering ``verifier_protocol`` (request, prompt, verdict, protocols), ``verdict_readers``
(answers read into verdicts, one chunk or a batch) and ``verifier_calls`` (the drivers);
the LLM roles sit next to the method that uses them: ``llm_generator`` (METEORA's
rationale prompt) and ``llm_hops`` (rationales per hop), ``llm_verifier`` (one chunk per
prompt) and ``llm_batch_verifier`` (several), ``llm_scorer`` (relevance for the rerank).
"""
