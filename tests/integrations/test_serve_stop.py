"""The server under a stop: a per-request deadline, and SIGTERM while large selections run.

Work is checked between pipeline phases and encoder batches; a request past its deadline ends
with a JSON 504, and after SIGTERM what still runs when the shutdown timeout is about to pass ends
with a JSON 503 (one log line each, no traceback) and the process exits within the timeout + 2 s.
"""

from __future__ import annotations

import io
import json
import threading
import time

import pytest

from server_process import ServerProcess, sigterm_under_load

from meteora_edge.errors import Cancelled
from meteora_edge.integrations.service import SelectService
from meteora_edge.integrations.stdio import serve_stdio
from meteora_edge.pipeline.deadline import Deadline


def _big_body(chunks: int = 1500, words: int = 300) -> dict:
    return {"query": "who may terminate the agreement?",
            "chunks": [" ".join(f"w{(i * 7 + j) % 3001}" for j in range(words)) for i in range(chunks)]}


def test_work_stops_at_its_deadline_between_batches():
    deadline = Deadline(timeout=0.3)
    deadline.start()
    started = time.monotonic()
    with pytest.raises(Cancelled, match="ran past its deadline of 0.3 s") as caught:
        SelectService().select(_big_body(), check=deadline)
    assert caught.value.reason == "deadline" and time.monotonic() - started < 0.8


def test_a_stop_ends_running_work_and_a_deadline_passed_in_the_queue_is_queued():
    stop = threading.Event()
    deadline = Deadline(timeout=None, stop=stop)
    threading.Timer(0.2, stop.set).start()
    with pytest.raises(Cancelled, match="shutting down") as caught:
        SelectService().select(_big_body(), check=deadline)
    assert caught.value.reason == "shutdown"
    late = Deadline(timeout=0.01)
    time.sleep(0.02)
    with pytest.raises(Cancelled, match="waited 0.01 s for a worker") as queued:
        late.start()
    assert queued.value.reason == "queued"


def test_http_answers_504_json_past_the_deadline_and_health_reports_it():
    srv = ServerProcess("--request-timeout", "0.5", "--max-body-mb", "64")
    try:
        status, health = srv.call("GET", "/v1/health")
        assert status == 200 and health["limits"]["request_timeout"] == 0.5
        started = time.monotonic()
        status, answer = srv.call("POST", "/v1/select", _big_body(words=600))
        assert status == 504 and list(answer) == ["error"] and "deadline of 0.5 s (--request-timeout)" in answer["error"]
        assert time.monotonic() - started < 10
        status, answer = srv.call("POST", "/v1/select", {"query": "who?", "chunks": ["Either party may terminate."]})
        assert status == 200 and answer["passages"]  # the worker is free again
    finally:
        srv.stop()


def test_sigterm_under_three_large_requests_exits_in_time_with_json_for_every_client():
    measured = sigterm_under_load(requests=3, chunks=1500, words=1000, shutdown_timeout=2, after=0.5)
    assert measured["code"] == 0 and measured["exit_s"] <= 2 + 2, measured["exit_s"]
    statuses = [status for status, _ in measured["answers"]]
    # every client gets JSON: its selection if it finished within the grace, else a 503 (and at least one did not)
    assert all(ok for _, ok in measured["answers"]) and len(statuses) == 3 and 503 in statuses, measured["log"]
    assert set(statuses) <= {200, 503} and len(measured["stopped"]) == statuses.count(503), measured["log"]
    assert measured["tracebacks"] == 0, measured["log"]


def test_stdio_answers_an_error_line_past_the_deadline_and_goes_on():
    lines = json.dumps({"id": 1, **_big_body()}) + "\n" + json.dumps({"id": 2, "query": "who?", "chunks": ["a b"]})
    out = io.BytesIO()
    assert serve_stdio(SelectService(), io.BytesIO(lines.encode() + b"\n"), out, request_timeout=0.2) == 2
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert first["id"] == 1 and "ran past its deadline of 0.2 s (--request-timeout)" in first["error"]
    assert second["id"] == 2 and second["passages"]


def test_the_onnx_encoder_checks_between_its_batches_and_its_vectors_do_not_change(tmp_path):
    pytest.importorskip("onnxruntime")
    from tiny_onnx import WORDS, make_bundle

    from meteora_edge.models.encoders import embed
    from meteora_edge.models.onnx_encoder import OnnxEncoder

    encoder = OnnxEncoder.from_bundle(make_bundle(tmp_path / "b"), precision="fp32", batch_size=2, cache=False)
    texts = [" ".join(WORDS[(i + j) % len(WORDS)] for j in range(1 + i % 5)) for i in range(9)]
    calls = []
    checked = embed(encoder, texts, check=lambda: calls.append(1))
    assert len(calls) == 1 + 5  # before the work, then before each of the 5 batches of 2
    assert (checked == embed(encoder, texts)).all()

    def stop_in_the_middle() -> None:
        if len(calls) >= 8:
            raise Cancelled("stop", reason="deadline")
        calls.append(1)

    with pytest.raises(Cancelled):
        embed(encoder, texts, check=stop_in_the_middle)


@pytest.mark.parametrize("path, body", [
    ("/v1/select", _big_body()),
    ("/v1/rerank", {"query": "who may terminate the agreement?", "documents": _big_body()["chunks"]}),
])
def test_every_selection_route_runs_under_the_deadline(path, body):
    from starlette.testclient import TestClient

    from meteora_edge.integrations.http_server import ServerLimits, create_app

    app = create_app(SelectService(), limits=ServerLimits(request_timeout=0.2))
    answer = TestClient(app, base_url="http://127.0.0.1").post(path, json=body)
    assert answer.status_code == 504 and "deadline of 0.2 s (--request-timeout)" in answer.json()["error"]


def test_the_llm_verifier_is_checked_before_each_call():
    from meteora_edge.pipeline.engine import EvidencePipeline
    from meteora_edge.pipeline.config import PipelineConfig
    from meteora_edge.selection.verification import Verdict

    class SlowVerifier:
        calls = 0

        def verify(self, request):
            SlowVerifier.calls += 1
            time.sleep(0.1)
            return Verdict(relevant=True, flagged=False, chunk_index=request.chunk_index)

    pipe = EvidencePipeline(PipelineConfig(verification="llm", use_ecse=False), verifier=SlowVerifier())
    deadline = Deadline(timeout=0.35)
    deadline.start()
    with pytest.raises(Cancelled):
        pipe.run("who may terminate?", passages=[f"party {i} may terminate" for i in range(40)], check=deadline)
    assert 2 <= SlowVerifier.calls <= 5  # stopped within one call of the deadline, not after all 40
