#!/usr/bin/env bash
# Install llama-cpp-python into the active environment from a cached portable wheel,
# building (and caching) that wheel first when there is none (~10-20 min on 2 cores).
#
# The wheel is portable AND uses the CPU it runs on: llama.cpp's runtime CPU dispatch
# (GGML_BACKEND_DL=ON, GGML_CPU_ALL_VARIANTS=ON, GGML_NATIVE=OFF) compiles one CPU backend
# per x86 level (sse42, haswell/AVX2, skylakex/AVX512, icelake/VNNI, zen4, sapphirerapids/AMX,
# ...; on ARM Linux the armv8.x/armv9 dot-product/i8mm levels) as libggml-cpu-*.so next to
# libggml.so in llama_cpp/lib; meteora_edge.models.llm_model loads the best one the CPU
# supports before the first model loads. A cached wheel never carries -march=native code.
#
# The wheel lives in its own folder (cpu-dispatch-$version), so the AVX2-only wheel that
# older scripts cached as $cache/llama_cpp_python-$version-*.whl never shadows it.
set -euo pipefail
version=0.3.36
cache=${METEORA_EDGE_WHEEL_CACHE:-$HOME/.cache/meteora-edge/wheels}
folder="$cache/cpu-dispatch-$version"
mkdir -p "$folder"
wheel=$(ls "$folder"/llama_cpp_python-"$version"-*.whl 2>/dev/null | head -n 1 || true)
if [ -z "$wheel" ]; then
  echo "building a portable llama-cpp-python $version wheel with runtime CPU dispatch into $folder" \
       "(takes 10-20 minutes on 2 cores)" >&2
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  # CMAKE_INSTALL_BINDIR: the CPU backends are MODULE libraries that llama.cpp installs into
  # the "bin" folder; put them into the package's lib folder, beside libggml.so.
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON -DLLAVA_BUILD=OFF -DCMAKE_INSTALL_BINDIR=llama_cpp/lib" \
    CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
    pip wheel --no-deps --no-cache-dir -w "$tmp" "llama-cpp-python==$version" >&2
  built=$(ls "$tmp"/llama_cpp_python-"$version"-*.whl | head -n 1)
  if ! unzip -l "$built" | grep -q 'llama_cpp/lib/libggml-cpu-.*\.so'; then
    echo "Error: the built wheel has no llama_cpp/lib/libggml-cpu-*.so backends; not caching it" >&2
    exit 1
  fi
  mv "$built" "$folder"/
  wheel=$(ls "$folder"/llama_cpp_python-"$version"-*.whl | head -n 1)
fi
# Reinstall only when the installed build is not this one (same version number, other build).
site=$(python -c 'import importlib.util as u, os; s = u.find_spec("llama_cpp"); print(os.path.dirname(s.origin) if s else "")')
if [ -z "$site" ] || ! ls "$site"/lib/libggml-cpu-*.so >/dev/null 2>&1; then
  pip install -q --no-deps --force-reinstall "$wheel"
fi
pip install -q "diskcache>=5.6.1" "jinja2>=2.11.3" "typing-extensions>=4.5.0"
