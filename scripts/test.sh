#!/usr/bin/env bash
# The one test command: set up .venv (idempotent; it also caches llama.cpp's converter), then
# run the whole suite offline: the doctests of meteora_edge (pyproject's --doctest-modules)
# and the fuzz tier at 1500 cases per test (over 10k in total). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-dev.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export METEORA_EDGE_OFFLINE_TESTS=1                                  # a test that would download fails instead
export METEORA_EDGE_FUZZ_EXAMPLES=${METEORA_EDGE_FUZZ_EXAMPLES:-1500}
exec .venv/bin/pytest -q "$@"
