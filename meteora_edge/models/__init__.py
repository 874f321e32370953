"""Model runtimes and model files: the first stage, imported by every later one.

``bundle`` reads and checks bundle folders (manifest, hashes); ``encoders`` holds the
encoder protocol and the model-free hashing encoder; ``cpu_features`` reads the CPU's
flags and ``precision`` picks the encoder variant they call for; ``onnx_session`` builds
the one kind of onnxruntime session; ``onnx_encoder`` / ``onnx_cross_encoder`` run the
exported encoders, with ``embedding_cache`` keeping vectors between calls and processes;
``llm_file`` checks GGUF files, ``llm_backend`` imports llama.cpp and loads its CPU kernels,
and ``llm_model`` runs them.
Nothing here knows about rationales, indexes or the pipeline.
"""
