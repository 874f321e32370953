#!/usr/bin/env bash
# The adversarial lists as one run (outside the test suite; about three minutes): the local-index
# and file-system findings, the HTTP/stdio, GGUF and Milvus findings, then a new user's first day
# (links, same-size edits, duplicate keys, SIGTERM under load, Milvus Lite's one process). Each
# prints a table of trials, lost, duplicated (stale) and tracebacks per item, all of which must be
# zero; the exit code is non-zero when any is not.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
status=0
"$python" tests/adversarial/index_findings.py || status=1
"$python" tests/adversarial/server_findings.py || status=1
"$python" tests/adversarial/stop_findings.py || status=1
exit "$status"
