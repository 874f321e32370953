#!/usr/bin/env bash
# The one test command: set up .venv (idempotent), then run the whole suite offline.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-dev.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
exec .venv/bin/pytest -q "$@"
