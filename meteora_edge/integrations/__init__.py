"""Using meteora-edge from other programs: a local server and adapters for RAG frameworks.

The last stage; it imports every earlier one and nothing imports it (``import meteora_edge``
never loads it). ``select_request`` reads a ``/v1/select`` body, ``service`` holds the models
loaded once and answers it with ``select``'s JSON, ``http_server`` serves that over HTTP
(extra ``[serve]``: Starlette + uvicorn; ``api_page`` its ``/docs`` page, ``rerank_api`` its rerank
routes, described by ``rerank_schema``) and ``stdio`` over JSON lines; ``embedded`` runs the
pipeline over a framework's documents and ``adapter_model`` holds the fields and the per-call work
shared by ``langchain_compressor`` (extra ``[langchain]``), ``llamaindex_postprocessor`` (extra
``[llamaindex]``) and ``haystack_ranker`` (extra ``[haystack]``). ``langchain_embeddings`` and ``llamaindex_embedding`` offer the ONNX encoder as
each framework's embedding model (over ``encoder_embeddings``).
"""
