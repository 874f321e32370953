"""Issue 27's server, stdio, GGUF and Milvus findings, re-run against this checkout (not a pytest file).

    PYTHONPATH=. python tests/adversarial/server_findings.py

Each row attacks one finding a few times and counts, over its trials, answers or chunks *lost*
(a good request not answered, a collection or chunk gone, an error that is not one line of
JSON), chunks *duplicated*, and *tracebacks* (in the server's log or an exception that is not
the library's one-line error). Every count should be 0. Runs in under a minute on 2 cores:
the real ``serve`` in a child process on 127.0.0.1, Milvus Lite embedded, faults injected at
the client's rename/insert calls.
"""

from __future__ import annotations

import json
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "index")]

from server_process import ROOT, ServerProcess, call, child_env, cli_command  # noqa: E402

GOOD = {"query": "Who may terminate?", "chunks": ["Either party may terminate with notice.", "Fees are due."]}
ROWS: list[tuple[str, int, int, int, int]] = []


def row(item: str, trials: int, lost: int = 0, duplicated: int = 0, tracebacks: int = 0) -> None:
    ROWS.append((item, trials, lost, duplicated, tracebacks))


def _post_head(length: int) -> bytes:
    return (f"POST /v1/select HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\n\r\n").encode()


def _good_answered(srv: ServerProcess) -> bool:
    try:
        status, answer = srv.call("POST", "/v1/select", GOOD)
    except Exception:  # noqa: BLE001 - a refused or broken answer counts as lost
        return False
    return status == 200 and bool(answer.get("passages"))


def _json_error(raw: bytes, status: int) -> bool:
    head, _, body = raw.partition(b"\r\n\r\n")
    try:
        return head.split()[1] == str(status).encode() and list(json.loads(body)) == ["error"]
    except (IndexError, ValueError):
        return False


def _recv_all(conn: socket.socket, limit: float = 5) -> bytes:
    conn.settimeout(limit)
    data = b""
    try:
        while chunk := conn.recv(65536):
            data += chunk
    except OSError:
        pass
    return data


def http_items() -> None:
    srv = ServerProcess("--header-timeout", "1", "--body-timeout", "1", "--keep-alive", "1", "--max-connections",
                        "64", "--workers", "1", "--queue", "1")
    try:
        lost = 0  # S1: 70 idle connections, then requests
        idle = [socket.create_connection((srv.host, srv.port)) for _ in range(70)]
        time.sleep(1.5)  # past --header-timeout: the idle ones are closed
        lost += sum(not _good_answered(srv) for _ in range(5))
        for conn in idle:
            conn.close()
        row("S1 70 idle connections", 5, lost)
        lost = 0  # S1: 6 clients trickling a body hold no admission slot
        slow = [socket.create_connection((srv.host, srv.port)) for _ in range(6)]
        for conn in slow:
            conn.sendall(_post_head(200) + b'{"query": ')
        lost += sum(not _good_answered(srv) for _ in range(3))
        lost += sum(not _json_error(_recv_all(conn), 408) for conn in slow)
        for conn in slow:
            conn.close()
        row("S1 6 trickled bodies", 9, lost)
        lost = 0  # M5: connections over --max-connections get a JSON 503
        held = [socket.create_connection((srv.host, srv.port)) for _ in range(64)]
        extra = [socket.create_connection((srv.host, srv.port)) for _ in range(3)]
        body = json.dumps(GOOD).encode()
        for conn in extra:
            conn.sendall(_post_head(len(body)) + body)
        lost += sum(not _json_error(_recv_all(conn), 503) for conn in extra)
        for conn in held + extra:
            conn.close()
        time.sleep(0.3)
        lost += not _good_answered(srv)
        row("M5 over --max-connections", 4, lost)
        lost = 0  # T1 and M2 over HTTP
        bad = [b'{"query": "x", "chunks": ["a"], "k_init": ' + b"7" * 5000 + b"}",
               b'{"query": "a \\ud800", "chunks": ["a"]}', b'{"query": "a", "chunks": [{"text": "a", "m": "\\udc00"}]}']
        for raw in bad:
            status, answer = call(srv.host, srv.port, "POST", "/v1/select", raw=raw)
            lost += not (status == 400 and list(answer) == ["error"] and "\n" not in answer["error"])
        row("T1+M2 HTTP bodies", len(bad), lost)
        for _ in range(5):  # T5: clients leaving mid-body
            conn = socket.create_connection((srv.host, srv.port))
            conn.sendall(_post_head(500) + b'{"query": "x", ')
            time.sleep(0.05)
            conn.close()
        time.sleep(0.3)
        lost = not _good_answered(srv)
        stalled = [socket.create_connection((srv.host, srv.port)) for _ in range(4)]  # T5: SIGTERM, stalled bodies
        for conn in stalled:
            conn.sendall(_post_head(500) + b'{"query": ')
        time.sleep(0.2)
        code = srv.signal(signal.SIGTERM, timeout=15)
        for conn in stalled:
            conn.close()
        log = srv.proc.stderr.read().decode(errors="replace")
        row("T5 disconnect + SIGTERM", 10, int(lost) + int(code != 0), 0, log.count("Traceback"))
    finally:
        srv.stop()


def stdio_items() -> None:
    lines = [b'{"query": "x", "chunks": ["a"], "k_init": ' + b"9" * 5000 + b"}",
             b'{"query": "x", "chunks": [{"text": "a b", "tag": "\\ud800"}]}', json.dumps(GOOD).encode()]
    proc = subprocess.run(cli_command("serve", "--stdio"), input=b"\n".join(lines) + b"\n", capture_output=True,
                          cwd=ROOT, env=child_env(), timeout=60)
    answers = [json.loads(line) for line in proc.stdout.splitlines()]
    lost = sum(list(a) != ["error"] for a in answers[:2]) + (len(answers) != 3 or not answers[2].get("passages"))
    row("T1+M2 stdio lines", 3, lost, 0, proc.stderr.count(b"Traceback"))


def gguf_items(tmp: Path) -> None:
    from click.testing import CliRunner

    from llm_fakes import write_gguf
    from meteora_edge.cli.main import main

    plain = write_gguf(tmp / "plain.gguf", {"general.architecture": "llama"}).read_bytes()
    end = 24 + 8 + 20 + 4 + 8 + 5
    key = b"tokenizer.nested"
    nested = struct.pack("<Q", len(key)) + key + struct.pack("<I", 9) + struct.pack("<IQ", 9, 1) * 4999
    header = plain[:16] + struct.pack("<Q", 2) + plain[24:end] + nested + struct.pack("<IQ", 4, 0) + plain[end:end + 34]
    model = tmp / "deep.gguf"
    model.write_bytes(header + b"\0" * (-len(header) % 32) + b"\0" * 32)
    from meteora_edge.models.bundle import MANIFEST_NAME, file_entry

    bundle = tmp / "bundle"  # a good export, then the deep file in its place with its hash recomputed
    assert CliRunner().invoke(main, ["export", "llm", "--gguf", str(tmp / "plain.gguf"), "--out", str(bundle)]).exit_code == 0
    inside = next((bundle / "llm").glob("*.gguf"))
    inside.write_bytes(model.read_bytes())
    manifest = json.loads((bundle / MANIFEST_NAME).read_text())
    manifest["components"]["llm"]["files"]["model"] = file_entry(bundle, f"llm/{inside.name}").to_dict()
    (bundle / MANIFEST_NAME).write_text(json.dumps(manifest))
    runs = [["export", "llm", "--gguf", str(model), "--out", str(tmp / "out")],
            ["models", "verify", str(bundle), "--hashes-only"], ["doctor", "--bundle", str(bundle), "--no-probe"]]
    lost = tracebacks = 0
    for args in runs:
        result = CliRunner().invoke(main, args)
        tracebacks += result.exception is not None and not isinstance(result.exception, SystemExit)
        tracebacks += "Traceback" in result.output or "RecursionError" in result.output
        lost += result.exit_code == 0 or "nested more than 8 deep" not in result.output
    row("T3 GGUF 5000-deep arrays", len(runs), lost, 0, tracebacks)


def milvus_items(tmp: Path) -> None:
    from test_milvus_faults import FaultyClient, Killed  # the tests' fault injection

    from meteora_edge import HashingEncoder
    from meteora_edge.errors import MeteoraError
    from meteora_edge.index import milvus_collection, milvus_index
    from meteora_edge.index.corpus import SourceDocument
    from meteora_edge.index.milvus_location import connect, milvus_location
    from meteora_edge.index.milvus_index import MilvusIndex

    enc = HashingEncoder()
    docs = [SourceDocument(f"doc{i}", " ".join(f"w{i}x{j}" for j in range(90)), {}) for i in range(4)]
    real_connect, real_batch = milvus_index.connect, milvus_collection.INSERT_BATCH

    def texts(location) -> list[str]:
        with MilvusIndex.open(location) as index:
            return [r["text"] for r in index.records(range(len(index)))]

    def attempt(method: str, at: int, error: BaseException, write) -> int:
        milvus_index.connect = lambda loc: FaultyClient(real_connect(loc), method, at, error)
        try:
            write()
        except MeteoraError:
            pass  # the library's one-line error
        except Killed:
            pass  # the simulated kill
        except Exception:  # noqa: BLE001 - anything else is a traceback for the user
            return 1
        finally:
            milvus_index.connect = real_connect
        return 0

    lost = tracebacks = 0  # D1: rebuild --overwrite with a fault or a kill at either rename
    for trial, (at, error) in enumerate([(1, None), (2, None), (1, Killed()), (2, Killed())]):
        from pymilvus.exceptions import MilvusException

        location = milvus_location(str(tmp / f"d1-{trial}.db"), "docs")
        MilvusIndex.build(location, docs[:2], enc, chunk_size=40).close()
        before = texts(location)
        tracebacks += attempt("rename_collection", at, error or MilvusException(message="injected"),
                              lambda: MilvusIndex.build(location, docs, enc, chunk_size=40, overwrite=True))
        lost += texts(location) != before
    row("D1 Milvus rebuild at rename", 4, lost, 0, tracebacks)

    lost = duplicated = tracebacks = 0  # D3: index add killed mid-insert, then re-run
    milvus_collection.INSERT_BATCH = 3
    try:
        for trial, at in enumerate([2, 3, 4]):
            location = milvus_location(str(tmp / f"d3-{trial}.db"), "docs")
            MilvusIndex.build(location, docs[:1], enc, chunk_size=40).close()

            def add() -> None:
                with MilvusIndex.open(location) as index:
                    index.add(docs[1:], enc)

            tracebacks += attempt("insert", at, Killed(), add)
            with MilvusIndex.open(location) as index:
                index.add(docs[1:], enc)
            with MilvusIndex.open(location) as index:
                index.add(docs[1:], enc)
            with tempfile.TemporaryDirectory() as fresh:
                want = Counter(texts(MilvusIndex.build(milvus_location(f"{fresh}/w.db", "docs"), docs, enc,
                                                       chunk_size=40).location))
            got = Counter(texts(location))
            lost += sum((want - got).values())
            duplicated += sum((got - want).values())
    finally:
        milvus_collection.INSERT_BATCH = real_batch
    row("D3 Milvus add killed mid-insert", 3, lost, duplicated, tracebacks)

    left = tracebacks = 0  # H2: killed builds' temporary collections, then one write
    location = milvus_location(str(tmp / "h2.db"), "docs")
    MilvusIndex.build(location, docs[:1], enc, chunk_size=40).close()
    for _ in range(2):
        tracebacks += attempt("flush", 1, Killed(),
                              lambda: MilvusIndex.build(location, docs, enc, chunk_size=40, overwrite=True))
    with MilvusIndex.open(location) as index:
        index.add(docs[1:2], enc)
        left = len([n for n in index.client.list_collections() if n != "docs"])
    row("H2 Milvus killed builds", 2, left, 0, tracebacks)


def main() -> int:
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        http_items()
        stdio_items()
        gguf_items(Path(tmp))
        milvus_items(Path(tmp))
    width = max(len(r[0]) for r in ROWS)
    print(f"{'item':<{width}}  trials  lost  duplicated  tracebacks")
    for item, trials, lost, duplicated, tracebacks in ROWS:
        print(f"{item:<{width}}  {trials:>6}  {lost:>4}  {duplicated:>10}  {tracebacks:>10}")
    print(f"({time.monotonic() - started:.1f} s)")
    return int(any(any(r[2:]) for r in ROWS))


if __name__ == "__main__":
    raise SystemExit(main())
