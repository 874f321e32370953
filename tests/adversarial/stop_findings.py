"""Issue 48's findings (a new user's first day), re-run against this checkout (not a pytest file).

    PYTHONPATH=. python tests/adversarial/stop_findings.py

Each row attacks one finding a few times through the CLI, the library or the real server in a
child process, and counts over its trials: documents, answers or questions *lost* (a good input
not indexed, answered or run; an answer that is not one line of JSON), chunks *duplicated*,
*stale* text still found after the change that replaced it, and *tracebacks*. Every count must
be 0. The SIGTERM row also prints the exit time, which must be within the shutdown timeout + 2 s
(a late exit counts as lost). About a minute and a half on 2 cores, hashing encoder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT), str(HERE.parent)]

COLUMNS = ("trials", "lost", "duplicated", "stale", "tracebacks")
ROWS: list[tuple[str, dict[str, int]]] = []
NOTES: list[str] = []


def row(item: str, trials: int, **counts: int) -> None:
    ROWS.append((item, {"trials": trials, **{c: counts.get(c, 0) for c in COLUMNS[1:]}}))


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "meteora_edge", *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, **(env or {})}, timeout=timeout)


def _notes(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "terms.md").write_text("Either party may terminate the agreement on ninety (90) days notice.")
    (folder / "fees.md").write_text("Fees are payable monthly within thirty days of the invoice.")
    return folder


def _json(text: str | bytes) -> dict:
    """One JSON object, or {} for anything else (what the row counts as lost)."""
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _texts(index: str) -> list[str]:
    found = cli("index", "search", index, "-q", "terminate notice fees invoice days", "-k", "50", "--json")
    return [h["text"] for h in _json(found.stdout[found.stdout.find("{"):]).get("hits", [])]


def links(tmp: Path) -> None:
    """Item 2: sync through a link to the indexed folder (local and Milvus Lite)."""
    for backend in ("local", "milvus"):
        work = tmp / f"links-{backend}"
        notes = _notes(work / "real" / "notes")
        link = work / "link"
        link.symlink_to(notes, target_is_directory=True)
        index = str(work / "ix") if backend == "local" else f"milvus://{work / 'notes.db'}"
        target = ["--out", str(work / "ix")] if backend == "local" else ["--backend", "milvus", "--uri",
                                                                          str(work / "notes.db")]
        built = cli("index", "build", str(notes), *target, "--chunk-size", "6", "--overlap", "0")
        before = sorted(_texts(index))
        runs = [cli("index", "sync", index, str(link))]
        duplicated = len(_texts(index)) - len(before)
        (link / "terms.md").write_text("Either party may terminate the agreement on fourteen days notice.")
        runs.append(cli("index", "sync", index, str(link)))
        after = _texts(index)
        stale = sum("ninety" in t for t in after)
        lost = int(not any("fourteen" in t for t in after)) + sum(r.returncode != 0 for r in [built, *runs])
        tracebacks = sum(r.stderr.count("Traceback") for r in [built, *runs])
        row(f"2 sync via a link ({backend})", 2, lost=lost, duplicated=max(0, len(after) - len(before)) + duplicated,
            stale=stale, tracebacks=tracebacks)


def checksum(tmp: Path) -> None:
    """Item 3: an edit that keeps size and mtime, found by sync --checksum (local and Milvus Lite)."""
    for backend in ("local", "milvus"):
        work = tmp / f"checksum-{backend}"
        notes = _notes(work / "notes")
        index = str(work / "ix") if backend == "local" else f"milvus://{work / 'notes.db'}"
        target = ["--out", str(work / "ix")] if backend == "local" else ["--backend", "milvus", "--uri",
                                                                          str(work / "notes.db")]
        runs = [cli("index", "build", str(notes), *target, "--chunk-size", "6", "--overlap", "0")]
        terms = notes / "terms.md"
        info = terms.stat()
        terms.write_text("Either party may terminate the agreement on ninety (80) days notice.")
        os.utime(terms, ns=(info.st_atime_ns, info.st_mtime_ns))
        runs.append(cli("index", "sync", index, str(notes), "--checksum"))
        texts = _texts(index)
        row(f"3 same-size edit, --checksum ({backend})", 1, lost=int(not any("(80)" in t for t in texts))
            + sum(r.returncode != 0 for r in runs), stale=sum("(90)" in t for t in texts),
            tracebacks=sum(r.stderr.count("Traceback") for r in runs))


def duplicate_keys(tmp: Path) -> None:
    """Item 4: duplicate JSON keys refused in one line (chunk file, JSONL line, stdio body)."""
    work = tmp / "dup"
    work.mkdir()
    (work / "c.json").write_text('[{"text": "Either party may terminate.", "text": "Fees are due."}]')
    (work / "c.jsonl").write_text('{"text": "a"}\n{"text": "b", "id": 1, "id": 2}\n')
    runs = [cli("select", "--chunks", str(work / name), "-q", "who may terminate?") for name in ("c.json", "c.jsonl")]
    accepted = sum(r.returncode == 0 or "appears twice" not in r.stderr for r in runs)
    stdio = subprocess.run([sys.executable, "-m", "meteora_edge", "serve", "--stdio"], cwd=ROOT, capture_output=True,
                           timeout=120, input=b'{"query": "x", "chunks": ["a"], "query": "y"}\n')
    answer = _json(stdio.stdout)
    accepted += "appears twice" not in answer.get("error", "")
    row("4 duplicate JSON keys", 3, lost=accepted,
        tracebacks=sum(r.stderr.count("Traceback") for r in runs) + stdio.stderr.count(b"Traceback"))


def empty_candidate(tmp: Path) -> None:
    """Item 4: an eval question with an empty candidate runs with the rest."""
    work = tmp / "eval"
    work.mkdir()
    lines = [{"query": "Who may terminate?", "candidates": ["Either party may terminate.", "Fees."], "gold": [0]},
             {"query": "When are fees due?", "candidates": ["Fees are due monthly.", "", "Notice."], "gold": [0]}]
    (work / "q.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    ran = cli("eval", "--data", str(work / "q.jsonl"), "--method", "bm25:1", "-o", str(work / "r.json"))
    questions = json.loads((work / "r.json").read_text())["meta"]["questions"] if ran.returncode == 0 else 0
    row("4 eval: an empty candidate", 2, lost=2 - questions, tracebacks=ran.stderr.count("Traceback"))


def sigterm() -> None:
    """Item 5: SIGTERM while three 1,500-chunk requests run."""
    from server_process import sigterm_under_load

    timeout = 3
    # 1,000 words a chunk: each request needs well over the timeout, so the stop has work to end
    measured = sigterm_under_load(requests=3, chunks=1500, words=1000, shutdown_timeout=timeout, after=1.5)
    late = measured["exit_s"] > timeout + 2
    lost = sum(not ok for _, ok in measured["answers"]) + (3 - len(measured["answers"])) + int(late)
    NOTES.append(f"5: SIGTERM with --shutdown-timeout {timeout}: exit {measured['exit_s']:.1f} s after the signal "
                 f"(code {measured['code']}), clients got {[s for s, _ in measured['answers']]}, "
                 f"{len(measured['stopped'])} 'stopped' log lines")
    row("5 SIGTERM, 3 x 1,500 chunks", 3, lost=lost, tracebacks=measured["tracebacks"])


def line_separators() -> None:
    """Item 6: U+2028/U+2029 never raw in a JSON line (serve --stdio)."""
    body = json.dumps({"query": "who may terminate?", "chunks": ["Either party\u2028may terminate.\u2029", "Fees."]},
                      ensure_ascii=False)
    proc = subprocess.run([sys.executable, "-m", "meteora_edge", "serve", "--stdio"], cwd=ROOT, capture_output=True,
                          timeout=120, input=(body + "\n" + body + "\n").encode())
    lines = proc.stdout.decode().splitlines()  # splits at U+2028 too, as some clients do
    good = sum(1 for line in lines if line.strip() and _json(line).get("passages"))
    row("6 U+2028 in stdio answers", 2, lost=2 - good + (len(lines) - 2), tracebacks=proc.stderr.count(b"Traceback"))


def milvus_lite(tmp: Path) -> None:
    """Item 7: Milvus Lite is one process: select while a sync runs, and sync while serve holds it."""
    work = tmp / "lite"
    notes = work / "notes"
    notes.mkdir(parents=True)
    for i in range(400):
        (notes / f"n{i:03}.md").write_text(f"Note {i}: either party may terminate on {i} days notice. " * 20)
    db = work / "notes.db"
    built = cli("index", "build", str(notes), "--backend", "milvus", "--uri", str(db))
    for i in range(400):
        (notes / f"n{i:03}.md").write_text(f"Note {i}: the supplier delivers within {i} days. " * 20)
    index = f"milvus://{db}"
    sync = subprocess.Popen([sys.executable, "-m", "meteora_edge", "index", "sync", index, str(notes)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    until = time.monotonic() + 60
    from meteora_edge.index.milvus_location import lite_in_use

    while not lite_in_use(db) and sync.poll() is None and time.monotonic() < until:
        time.sleep(0.05)  # the selects start once the sync holds the database
    selects: list[subprocess.CompletedProcess[str]] = []
    for _ in range(2):  # two waves of five at once: each takes its turn with the sync and the others
        wave = [threading.Thread(target=lambda: selects.append(
            cli("select", "--index", index, "-q", "when does the supplier deliver?"))) for _ in range(5)]
        for thread in wave:
            thread.start()
        for thread in wave:
            thread.join()
    _, sync_err = sync.communicate(timeout=600)
    failed = sum(r.returncode != 0 for r in selects) + (sync.returncode != 0) + (built.returncode != 0)
    waited = sum("waiting up to" in r.stderr for r in selects)
    NOTES.append(f"7: 10 selects (two waves of 5 at once) while a sync of 400 files ran: "
                 f"{10 - sum(r.returncode != 0 for r in selects)} answered, {waited} waited for the database first; "
                 f"sync exit {sync.returncode}")
    row("7 select x10 during a Lite sync", 11, lost=failed,
        tracebacks=sum(r.stderr.count("Traceback") for r in selects) + sync_err.count("Traceback"))

    from server_process import ServerProcess

    srv = ServerProcess("--index", index)
    try:
        started = time.monotonic()
        refused = cli("index", "sync", index, str(notes), env={"METEORA_EDGE_LOCK_TIMEOUT": "3"})
        refused_s = time.monotonic() - started
        (notes / "n000.md").write_text("Note 0: payment is due within ninety days. " * 20)
        waiting = subprocess.Popen([sys.executable, "-m", "meteora_edge", "index", "sync", index, str(notes)], cwd=ROOT,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        said: list[str] = []
        reader = threading.Thread(target=lambda: said.extend(waiting.stderr), daemon=True)
        reader.start()
        until = time.monotonic() + 60
        while waiting.poll() is None and not any("waiting up to" in line for line in said) and time.monotonic() < until:
            time.sleep(0.1)
        srv.proc.terminate()  # the server lets the database go: a sync waiting for it goes on
        srv.proc.wait(timeout=30)
        waiting.wait(timeout=600)
        reader.join(timeout=10)
        waiting_err = "".join(said)
    finally:
        srv.stop()
    one_line = refused.returncode == 1 and refused.stderr.strip().splitlines()[-1].startswith(
        "Error: another process has kept the Milvus Lite database")
    NOTES.append(f"7: sync while serve holds the database (METEORA_EDGE_LOCK_TIMEOUT=3): exit {refused.returncode} "
                 f"after {refused_s:.1f} s: {refused.stderr.strip().splitlines()[-1][:110]}…; a sync waiting when the "
                 f"server stopped: exit {waiting.returncode}")
    texts = _texts(index)
    row("7 sync while serve holds Lite", 2, lost=int(not one_line) + (waiting.returncode != 0),
        stale=int(not any("payment" in t for t in texts)), tracebacks=refused.stderr.count("Traceback")
        + waiting_err.count("Traceback"))


def main() -> int:
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        links(tmp)
        checksum(tmp)
        duplicate_keys(tmp)
        empty_candidate(tmp)
        sigterm()
        line_separators()
        milvus_lite(tmp)
    width = max(len(name) for name, _ in ROWS)
    print(f"{'item':<{width}}" + "".join(f"{c:>12}" for c in COLUMNS))
    for name, counts in ROWS:
        print(f"{name:<{width}}" + "".join(f"{counts[c]:>12}" for c in COLUMNS))
    print(f"{'total':<{width}}" + "".join(f"{sum(r[c] for _, r in ROWS):>12}" for c in COLUMNS))
    for note in NOTES:
        print(note)
    print(f"({time.monotonic() - started:.1f} s)")
    return int(any(counts[c] for _, counts in ROWS for c in COLUMNS[1:]))


if __name__ == "__main__":
    raise SystemExit(main())
