#!/usr/bin/env bash
# Write the tables behind docs/evaluation.md (python scripts/eval_tables.py then copies them into the
# page): every baseline (topk-cosine:K, bm25:K, topk-hybrid:K, K = 1..5; with a bundle that holds the
# learned sparse model also topk-sparse:K, topk-hybrid-sparse:K and the sparse variants) beside every variant, on
# both dev sets — HotpotQA (sentence and paragraph level) and ContractNLI (sentence level: each
# item is one contract) — with the ONNX bundle and without any model, each with its F1 per number
# of gold items (--by gold-count); and a view of both in which gold is a larger share of the
# candidates (docs/eval/dense-gold.txt); and both at corpus level, every candidate pooled into one
# index (docs/eval/corpus-*.txt).
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
# with a bundle that holds the learned sparse model (models install splade-tiny): its baselines and variants too
sparse_rows() {
  grep -q '"kind": "sparse_encoder"' "$bundle/manifest.json" 2>/dev/null || return 0
  for k in 1 2 3 4 5; do echo "--method topk-sparse:$k --method topk-hybrid-sparse:$k"; done
  echo "--method ecse:scoring=hybrid,lexical_scorer=sparse --method pipeline:lexical_scorer=sparse"
  echo "--method pipeline:lexical_scorer=sparse,lexical_weight=0.5 --method pipeline:lexical_scorer=sparse,lexical_weight=2.0"
}
previous="pipeline:scoring=dense,rationales=query,k_init=20,n_min=3,cover_z=null,token_cover=null"  # the first default (its τ is today's)
before="pipeline:cover_z=null,tau_relevance=0.4,token_cover=null"  # no term or token cover, cosine rung at 0.4
untokened="pipeline:token_cover=null"  # no token cover
unspared="pipeline:spare_new_words=false"  # every near-duplicate dropped by cosine alone
variants=(ecse "ecse:scoring=hybrid" "ecse:scoring=hybrid,rationales=auto" meve pipeline "$unspared"
  "pipeline:theta_redundancy=null" "$untokened"
  "pipeline:token_cover=0.04" "pipeline:token_cover=0.06" "pipeline:cover_z=null" "$before"
  "pipeline:rationales=query" "pipeline:pooled_z=99" "pipeline:pooled_gap=0" "pipeline:pooled_cut=elbow"
  "pipeline:pooled_cut=robust" "pipeline:pooled_cut=robust,pairing_band=2.5" "pipeline:scoring=dense"
  "pipeline:scoring=lexical" "pipeline:verification=none" "pipeline:n_min=3" "pipeline:k_init=20"
  "pipeline:t_max=40" "$previous")
args=()
for v in "${variants[@]}"; do args+=(--method "$v"); done
run() {  # run NAME DATA LEVEL [eval options...]
  local name=$1 data=$2 level=$3
  shift 3
  "$me" eval --data "$data" ${level:+--level "$level"} "$@" --by gold-count -o "$out/$name.json" | tee "$out/$name.txt"
}
# shellcheck disable=SC2046
run sentence "$hotpot" sentence --bundle "$bundle" $(baselines) "${args[@]}" $(sparse_rows) --plot "$out/sentence.png"
# shellcheck disable=SC2046
run paragraph "$hotpot" paragraph --bundle "$bundle" $(baselines) \
  --method ecse --method "ecse:scoring=hybrid,rationales=auto" --method pipeline --method "$unspared" \
  --method "pipeline:theta_redundancy=null" --method "$untokened" \
  --method "pipeline:token_cover=0.04" --method "pipeline:token_cover=0.06" --method "pipeline:cover_z=null" \
  --method "$before" --method "pipeline:pooled_cut=robust" \
  --method "pipeline:pooled_cut=robust,pairing_band=2.5" --method "$previous" $(sparse_rows) --plot "$out/paragraph.png"
# shellcheck disable=SC2046
run contractnli "$contract" sentence --bundle "$bundle" $(baselines) "${args[@]}" $(sparse_rows) --plot "$out/contractnli.png"
# Both dev sets seen with gold as a larger share of the candidates (the questions with 3 or more gold
# items: their gold and random others, 25 in all; scripts/dense_gold_view.py): a question that needs
# four or five facts out of twenty-five has this shape, and a cut that keeps too few shows it here.
view=$(mktemp -d)
trap 'rm -rf "$view"' EXIT
"${METEORA_EDGE_PYTHON:-.venv/bin/python}" scripts/dense_gold_view.py "$hotpot" "$contract" -o "$view/dense-gold.jsonl"
# shellcheck disable=SC2046
run dense-gold "$view/dense-gold.jsonl" "" --bundle "$bundle" $(baselines) --method pipeline --method "$unspared" \
  --method "pipeline:theta_redundancy=null" --method "$untokened" \
  --method "pipeline:token_cover=0.04" --method "pipeline:token_cover=0.06" --method "pipeline:cover_z=null" \
  --method "$before" --method "pipeline:verification=none" --method "pipeline:pooled_cut=robust" --method "$previous"
# Corpus level: every question's candidates pooled into one index (examples/convert_eval_data.py
# --layout beir), each question asked against all of it: the path of a user's own folder. HotpotQA
# pools the 50 questions' sentences (2,158); ContractNLI pools every contract's spans (5,039) and
# asks each hypothesis once, its gold being its evidence in every contract. Retrieval (R@10,
# R@pool, nDCG@10 of the candidate ranking) is printed beside selection.
"${METEORA_EDGE_PYTHON:-.venv/bin/python}" examples/convert_eval_data.py "$hotpot" "$view/hotpot-corpus" --layout beir
"${METEORA_EDGE_PYTHON:-.venv/bin/python}" examples/convert_eval_data.py "$contract" "$view/contract-corpus" --layout beir
# shellcheck disable=SC2046
run corpus-hotpotqa "$view/hotpot-corpus" "" --bundle "$bundle" --index "$view/hotpot.index" $(baselines) --method pipeline
# shellcheck disable=SC2046
run corpus-contractnli "$view/contract-corpus" "" --bundle "$bundle" --index "$view/contract.index" $(baselines) --method pipeline
# shellcheck disable=SC2046
env -u METEORA_EDGE_BUNDLE "$me" eval --data "$hotpot" --level sentence $(baselines) --method pipeline --method "pipeline:cover_z=null" \
  --method "pipeline:pooled_cut=robust" \
  --method "$previous" --by gold-count -o "$out/hashing.json" | tee "$out/hashing.txt"
# shellcheck disable=SC2046
env -u METEORA_EDGE_BUNDLE "$me" eval --data "$contract" --level sentence $(baselines) --method pipeline --method "pipeline:cover_z=null" \
  --method "pipeline:pooled_cut=robust" \
  --method "$previous" --by gold-count -o "$out/contractnli-hashing.json" | tee "$out/contractnli-hashing.txt"
# shellcheck disable=SC2046
env -u METEORA_EDGE_BUNDLE "$me" eval --data "$view/dense-gold.jsonl" $(baselines) --method pipeline --method "pipeline:cover_z=null" \
  --method "pipeline:verification=none" \
  --method "pipeline:pooled_cut=robust" --by gold-count -o "$out/dense-gold-hashing.json" | tee "$out/dense-gold-hashing.txt"
# Chunking, judged by character: each question's documents rebuilt from the dev file, cut both ways at
# several sizes, selected over, and scored against the gold sentences (docs/corpus.md quotes it).
{
  "${METEORA_EDGE_PYTHON:-.venv/bin/python}" scripts/chunking_eval.py "$contract" --joiner newline --bundle "$bundle" \
    --chunking words:200,text:200,words:120,text:120,words:60,text:60
  echo
  "${METEORA_EDGE_PYTHON:-.venv/bin/python}" scripts/chunking_eval.py "$hotpot" --joiner space --bundle "$bundle" \
    --chunking words:200,text:200,words:60,text:60,words:30,text:30 --method pipeline --method topk-hybrid:2
} | tee "$out/chunking.txt"
