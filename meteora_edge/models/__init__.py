"""Model runtimes and model files: the first stage, imported by every later one.

``bundle`` reads and checks bundle folders (manifest, hashes); ``encoders`` holds the
encoder protocol and the model-free hashing encoder; ``onnx_session`` builds the one kind
of onnxruntime session; ``onnx_encoder`` / ``onnx_cross_encoder`` run the exported
encoders; ``llm_file`` checks GGUF files and ``llm_model`` runs them through llama.cpp.
Nothing here knows about rationales, indexes or the pipeline.
"""
