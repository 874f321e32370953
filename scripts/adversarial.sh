#!/usr/bin/env bash
# Issue 27's adversarial list as one run (outside the test suite; about a minute): the local-index
# and file-system findings, then the HTTP/stdio, GGUF and Milvus findings. Each prints a table of
# trials, lost, duplicated and tracebacks per item, all of which must be zero; the exit code is
# non-zero when any is not.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
status=0
"$python" tests/adversarial/index_findings.py || status=1
"$python" tests/adversarial/server_findings.py || status=1
exit "$status"
