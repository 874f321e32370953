#!/usr/bin/env bash
# Reproduce docs/evaluation.md: every baseline (topk-cosine:K, bm25:K, topk-hybrid:K, K = 1..5)
# beside every variant, on both dev sets — HotpotQA (sentence and paragraph level) and
# ContractNLI (sentence level: each item is one contract) — with the ONNX bundle and without any
# model, each with its F1 per number of gold items (--by gold-count).
# Usage: bash scripts/evaluate.sh [BUNDLE] [OUT]   (defaults: models/bundles/default, docs/eval).
# Tune nothing on anything but these two dev files; the CPU is printed under every table.
set -euo pipefail
cd "$(dirname "$0")/.."
bundle=${1:-models/bundles/default}
out=${2:-docs/eval}
data_dir=${METEORA_EDGE_DEV_DATA_DIR:-../shared/data}
hotpot="$data_dir/hotpotqa_distractor_dev50.json"
contract="$data_dir/contractnli_dev.json"
me=${METEORA_EDGE_BIN:-.venv/bin/meteora-edge}
mkdir -p "$out"
baselines() {
  for k in 1 2 3 4 5; do echo "--method topk-cosine:$k --method bm25:$k --method topk-hybrid:$k"; done
}
previous="pipeline:scoring=dense,rationales=query,k_init=20,n_min=3"
variants=(ecse "ecse:scoring=hybrid" "ecse:scoring=hybrid,rationales=auto" meve pipeline
  "pipeline:rationales=query" "pipeline:pooled_z=99" "pipeline:pooled_gap=0" "pipeline:pooled_cut=elbow"
  "pipeline:pooled_cut=robust" "pipeline:pooled_cut=robust,pairing_band=2.5" "pipeline:scoring=dense"
  "pipeline:scoring=lexical" "pipeline:verification=none" "pipeline:n_min=3" "pipeline:k_init=20"
  "pipeline:t_max=40" "$previous")
args=()
for v in "${variants[@]}"; do args+=(--method "$v"); done
run() {  # run NAME DATA LEVEL [eval options...]
  local name=$1 data=$2 level=$3
  shift 3
  "$me" eval --data "$data" --level "$level" "$@" --by gold-count -o "$out/$name.json" | tee "$out/$name.txt"
}
# shellcheck disable=SC2046
run sentence "$hotpot" sentence --bundle "$bundle" $(baselines) "${args[@]}" --plot "$out/sentence.png"
# shellcheck disable=SC2046
run paragraph "$hotpot" paragraph --bundle "$bundle" $(baselines) \
  --method ecse --method "ecse:scoring=hybrid,rationales=auto" --method pipeline --method "pipeline:pooled_cut=robust" \
  --method "pipeline:pooled_cut=robust,pairing_band=2.5" --method "$previous" --plot "$out/paragraph.png"
# shellcheck disable=SC2046
run contractnli "$contract" sentence --bundle "$bundle" $(baselines) "${args[@]}" --plot "$out/contractnli.png"
# shellcheck disable=SC2046
env -u METEORA_EDGE_BUNDLE "$me" eval --data "$hotpot" --level sentence $(baselines) --method pipeline --method "pipeline:pooled_cut=robust" \
  --method "$previous" --by gold-count -o "$out/hashing.json" | tee "$out/hashing.txt"
# shellcheck disable=SC2046
env -u METEORA_EDGE_BUNDLE "$me" eval --data "$contract" --level sentence $(baselines) --method pipeline --method "pipeline:pooled_cut=robust" \
  --method "$previous" --by gold-count -o "$out/contractnli-hashing.json" | tee "$out/contractnli-hashing.txt"
