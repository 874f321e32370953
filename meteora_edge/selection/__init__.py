"""METEORA: rationales, ECSE selection and verification (imports only ``models``).

``stages`` holds ECSE's stages as pure numpy functions (cosine matrix, pairing, pooled
scores, the z-score elbow, expansion, top-k); ``ecse`` composes them into the selector;
``rationales`` parses and formats rationale text; ``reranker`` is METEORA's reranker
facade; ``verification`` defines verdicts and their parsing; ``llm_generator`` and
``llm_verifier`` are the two LLM roles, next to the method that uses them.
"""
