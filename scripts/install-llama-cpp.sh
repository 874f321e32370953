#!/usr/bin/env bash
# Install llama-cpp-python into the active environment from a cached portable wheel,
# building (and caching) that wheel first when there is none.
#
# The wheel is portable AND uses the CPU it runs on: llama.cpp's runtime CPU dispatch
# (GGML_BACKEND_DL=ON, GGML_CPU_ALL_VARIANTS=ON, GGML_NATIVE=OFF) compiles one CPU backend
# per instruction-set level as libggml-cpu-*.so next to libggml.so in llama_cpp/lib;
# meteora_edge.models.llm_backend loads the best one the CPU supports before the first model
# loads. A cached wheel never carries -march=native code.
#
# Which levels (LLAMA_CPU_VARIANTS):
#   unset (the default): any cached wheel of this version that carries THIS CPU's level is
#        reused, whichever list it was built with (scripts/demo.sh and scripts/setup-dev.sh share
#        it, so a fresh machine compiles llama.cpp once); with none, the sse42 baseline and this
#        CPU's own level are built (about 5 minutes on 2 cores), which run here as fast as any
#        list. A level is a named instruction set, never -march=native: the wheel still runs on
#        any x86-64-v2 (or ARMv8.0) CPU, at the baseline's speed.
#   all: every level that changes speed, for a wheel to copy to other machines (about 15
#        minutes on 2 cores; all 13 of llama.cpp's x86 levels took ~43 minutes):
#        x86: sse42 (x86-64-v2), haswell (v3, AVX2), skylakex (v4, AVX-512), icelake (AVX512-VNNI),
#             alderlake (AVX-VNNI)
#        ARM Linux: armv8.0_1, armv8.2_1 (dot product), armv8.2_2 (+fp16), armv8.6_1 (+i8mm)
#   a list of level names: exactly those (only a wheel built with that list is used).
# sapphirerapids (AMX) is never built: in 0.3.36 its AMX kernels stop the process with an illegal
# instruction on AMX Xeons (llama.cpp pull request #26954), and meteora_edge.models.llm_backend
# never loads it (UNSAFE_VARIANTS), so an AMX CPU runs icelake.
# The kept list is applied to a temporary copy of the sdist's ggml/src/CMakeLists.txt; a CPU
# between two levels runs the highest level it supports (e.g. a Zen 4 runs icelake).
#
# The wheel's folder is named after the version and the kept list, so a wheel built with
# another list is only taken by the default's reuse, which checks that it has this CPU's level.
set -euo pipefail
version=0.3.36
all="sse42 haswell skylakex icelake alderlake armv8.0_1 armv8.2_1 armv8.2_2 armv8.6_1"
host=$(python3 - <<'PY'
flags = set()
try:
    for line in open("/proc/cpuinfo", encoding="utf-8", errors="replace"):
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            flags.update(value.lower().split())
except OSError:
    pass
if "avx512_vnni" in flags and "avx512vbmi" in flags:
    level = "icelake"
elif "avx512f" in flags:
    level = "skylakex"
elif "avx_vnni" in flags:
    level = "alderlake"
elif "avx2" in flags:
    level = "haswell"
elif "i8mm" in flags:
    level = "armv8.6_1"
elif "asimddp" in flags:
    level = "armv8.2_1"
elif "asimd" in flags or "fp" in flags:
    level = "armv8.0_1"
else:
    level = ""
print(("armv8.0_1 " + level if level.startswith("armv") else "sse42 " + level).strip())
PY
)
level=${host##* }   # this CPU's own level: the last of the host list
requested=${LLAMA_CPU_VARIANTS:-}
case "$requested" in
  ""|host) variants=$host ;;
  all) variants=$all ;;
  *) variants=$requested ;;
esac
cache=${METEORA_EDGE_WHEEL_CACHE:-$HOME/.cache/meteora-edge/wheels}
key=$(printf '%s' "$variants" | tr -s ' ' '\n' | sort | sha256sum | cut -c1-10)
folder="$cache/cpu-variants-$version-$key"
mkdir -p "$folder"
wheel=$(ls "$folder"/llama_cpp_python-"$version"-*.whl 2>/dev/null | head -n 1 || true)
if [ -z "$wheel" ] && [ -z "$requested" ]; then
  # the default: a wheel built with any list will do if it carries this CPU's level
  for candidate in "$cache"/cpu-variants-"$version"-*/llama_cpp_python-"$version"-*.whl; do
    [ -f "$candidate" ] || continue
    if unzip -l "$candidate" | grep "llama_cpp/lib/libggml-cpu-$level\.so" >/dev/null; then
      wheel=$candidate
      folder=$(dirname "$candidate")
      echo "reusing the cached $(basename "$folder") wheel, which has this CPU's level ($level)" >&2
      break
    fi
  done
fi
if [ -z "$wheel" ]; then
  echo "building a portable llama-cpp-python $version wheel with CPU levels: $variants" \
       "(on 2 cores: about 5 minutes for two levels, 15 for all) into $folder" >&2
  start=$(date +%s)
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  # --no-binary names the package only: with :all:, preparing the sdist's metadata also built its
  # build requirements (cmake, ninja) from source, minutes before llama.cpp's own compile began
  pip download -q --no-deps --no-binary llama-cpp-python -d "$tmp" "llama-cpp-python==$version" >&2
  tar -xzf "$tmp"/llama_cpp_python-"$version".tar.gz -C "$tmp"
  src="$tmp/llama_cpp_python-$version"
  cmake_list="$src/vendor/llama.cpp/ggml/src/CMakeLists.txt"
  # Drop every variant line whose tag is not kept (the lines look like
  # "ggml_add_cpu_backend_variant(haswell SSE42 AVX ...)"; the function's own definition and
  # the other architectures' lists stay).
  python3 - "$cmake_list" $variants <<'PY'
import re, sys
path, keep = sys.argv[1], set(sys.argv[2:])
dropped = {"x64", "sandybridge", "ivybridge", "piledriver", "cannonlake", "cascadelake", "cooperlake",
           "zen4", "haswell", "skylakex", "icelake", "alderlake", "sapphirerapids", "sse42",
           "armv8.0_1", "armv8.2_1", "armv8.2_2", "armv8.2_3", "armv8.6_1", "armv8.6_2", "armv9.2_1", "armv9.2_2"} - keep
call = re.compile(r"^\s*ggml_add_cpu_backend_variant\(\s*([A-Za-z0-9_.]+)")
lines, removed = [], []
for line in open(path, encoding="utf-8"):
    m = call.match(line)
    if m and m.group(1) in dropped:
        removed.append(m.group(1))
        continue
    lines.append(line)
open(path, "w", encoding="utf-8").writelines(lines)
print("llama.cpp CPU levels left out:", " ".join(removed), file=sys.stderr)
PY
  # CMAKE_INSTALL_BINDIR: the CPU backends are MODULE libraries that llama.cpp installs into
  # the "bin" folder; put them into the package's lib folder, beside libggml.so.
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON -DLLAVA_BUILD=OFF -DCMAKE_INSTALL_BINDIR=llama_cpp/lib" \
    CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
    pip wheel --no-deps --no-cache-dir -w "$tmp/out" "$src" >&2
  built=$(ls "$tmp"/out/llama_cpp_python-"$version"-*.whl | head -n 1)
  # grep without -q reads the whole listing: with pipefail, -q stopping early would fail unzip by SIGPIPE
  if ! unzip -l "$built" | grep 'llama_cpp/lib/libggml-cpu-.*\.so' >/dev/null; then
    echo "Error: the built wheel has no llama_cpp/lib/libggml-cpu-*.so backends; not caching it" >&2
    exit 1
  fi
  mv "$built" "$folder"/
  wheel=$(ls "$folder"/llama_cpp_python-"$version"-*.whl | head -n 1)
  echo "built $(basename "$wheel") in $(( $(date +%s) - start )) s" >&2
fi
# Reinstall only when the installed build is not this one (same version number, other build).
site=$(python -c 'import importlib.util as u, os; s = u.find_spec("llama_cpp"); print(os.path.dirname(s.origin) if s else "")')
if [ -z "$site" ] || ! ls "$site"/lib/libggml-cpu-*.so >/dev/null 2>&1 \
   || [ "$(cat "$site"/.meteora-wheel 2>/dev/null)" != "$(basename "$folder")" ]; then
  pip install -q --no-deps --force-reinstall "$wheel"
  site=$(python -c 'import importlib.util as u, os; print(os.path.dirname(u.find_spec("llama_cpp").origin))')
  basename "$folder" > "$site"/.meteora-wheel
fi
pip install -q "diskcache>=5.6.1" "jinja2>=2.11.3" "typing-extensions>=4.5.0"
