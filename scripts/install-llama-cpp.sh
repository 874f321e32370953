#!/usr/bin/env bash
# Install llama-cpp-python into the active environment from a cached portable wheel,
# building (and caching) that wheel first when there is none (~6-8 min on 2 cores).
# The build is portable (GGML_NATIVE=OFF): a cached wheel never carries -march=native code.
set -euo pipefail
version=0.3.36
cache=${METEORA_EDGE_WHEEL_CACHE:-$HOME/.cache/meteora-edge/wheels}
mkdir -p "$cache"
wheel=$(ls "$cache"/llama_cpp_python-"$version"-*.whl 2>/dev/null | head -n 1 || true)
if [ -z "$wheel" ]; then
  echo "building a portable llama-cpp-python $version wheel into $cache (takes several minutes)" >&2
  tmp=$(mktemp -d)
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
    pip wheel --no-deps --no-cache-dir -w "$tmp" "llama-cpp-python==$version" >&2
  mv "$tmp"/llama_cpp_python-"$version"-*.whl "$cache"/
  rm -rf "$tmp"
  wheel=$(ls "$cache"/llama_cpp_python-"$version"-*.whl | head -n 1)
fi
pip install -q "$wheel" "diskcache>=5.6.1" "jinja2>=2.11.3" "typing-extensions>=4.5.0"
