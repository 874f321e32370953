#!/usr/bin/env bash
# Run the real pipeline on the bundled demo, on a fresh machine.
# The runtime environment (.venv-runtime) never contains torch.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
if [ ! -x .venv-runtime/bin/meteora-edge ]; then
  python3 -m venv .venv-runtime
  .venv-runtime/bin/pip install -q -c requirements/constraints.txt .
fi
.venv-runtime/bin/meteora-edge select \
  --chunks examples/contract_clauses.json \
  --rationales examples/contract_rationales.txt \
  --query "How can the agreement be terminated, and what happens then?"
