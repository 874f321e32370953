#!/usr/bin/env bash
# Reproduce docs/evaluation.md: every baseline beside every variant, sentence and paragraph
# level, with the ONNX bundle and without any model. Usage: bash scripts/evaluate.sh [BUNDLE] [OUT]
# (defaults: models/bundles/default, docs/eval). Tune nothing on anything but this dev file.
set -euo pipefail
cd "$(dirname "$0")/.."
bundle=${1:-models/bundles/default}
out=${2:-docs/eval}
data=${METEORA_EDGE_DEV_DATA:-../shared/data/hotpotqa_distractor_dev50.json}
me=${METEORA_EDGE_BIN:-.venv/bin/meteora-edge}
mkdir -p "$out"
baselines() {
  for k in 1 2 3 4 5; do echo "--method topk-cosine:$k --method bm25:$k"; done
  for k in 1 2 3; do echo "--method topk-hybrid:$k"; done
}
previous="pipeline:scoring=dense,rationales=query,k_init=20,n_min=3"
variants=(ecse "ecse:scoring=hybrid" "ecse:scoring=hybrid,rationales=auto" meve pipeline
  "pipeline:rationales=query" "pipeline:pooled_z=99" "pipeline:pooled_cut=elbow" "pipeline:scoring=dense"
  "pipeline:scoring=lexical" "pipeline:verification=none" "pipeline:n_min=3" "pipeline:k_init=20"
  "pipeline:t_max=40" "$previous")
args=()
for v in "${variants[@]}"; do args+=(--method "$v"); done
# shellcheck disable=SC2046
"$me" eval --data "$data" --level sentence --bundle "$bundle" $(baselines) "${args[@]}" \
  -o "$out/sentence.json" --plot "$out/sentence.png" | tee "$out/sentence.txt"
# shellcheck disable=SC2046
"$me" eval --data "$data" --level paragraph --bundle "$bundle" $(baselines) \
  --method ecse --method "ecse:scoring=hybrid,rationales=auto" --method pipeline --method "$previous" \
  -o "$out/paragraph.json" --plot "$out/paragraph.png" | tee "$out/paragraph.txt"
# shellcheck disable=SC2046
env -u METEORA_EDGE_BUNDLE "$me" eval --data "$data" --level sentence $(baselines) --method pipeline --method "$previous" \
  -o "$out/hashing.json" | tee "$out/hashing.txt"
