"""The embedding cache and `--precision auto` from the command line: select --chunks, index
build, eval and doctor use the cache; --no-cache and METEORA_EDGE_CACHE=off leave no file."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")

from tiny_onnx import make_bundle  # noqa: E402

from meteora_edge.cli.main import main  # noqa: E402
from meteora_edge.models import precision  # noqa: E402
from meteora_edge.models.cpu_features import CpuInfo  # noqa: E402
from meteora_edge.models.embedding_cache import CACHE_FILE  # noqa: E402

CHUNKS = ["either party may terminate the agreement", "fees are due monthly", "the supplier shall deliver the goods",
          "written notice days", "data ends after the agreement ends"]
HOTPOT = [{
    "question": "who may terminate the agreement", "answer": "either party", "type": "bridge", "level": "easy",
    "context": {"title": ["Terms", "Money"], "sentences": [["either party may terminate the agreement", " notice days"],
                                                           ["fees are due monthly"]]},
    "supporting_facts": {"title": ["Terms"], "sent_id": [0]},
}]


def run(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def vectors_in(folder: Path) -> int:
    with sqlite3.connect(folder / CACHE_FILE) as conn:
        return conn.execute("SELECT count(*) FROM vectors_v1").fetchone()[0]


def selection(output: str) -> dict:
    data = json.loads(output)  # the --trace record
    return {k: data[k] for k in ("selected_indices", "passages", "encoder", "details")}


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    return make_bundle(tmp_path / "bundle", dot=True)


@pytest.fixture
def chunks_file(tmp_path: Path) -> Path:
    path = tmp_path / "chunks.json"
    path.write_text(json.dumps(CHUNKS))
    return path


def test_select_uses_the_cache_and_no_cache_selects_the_same(tmp_path, bundle, chunks_file):
    cache = tmp_path / "cache"
    env = {"METEORA_EDGE_CACHE": str(cache)}
    args = ("select", "--chunks", str(chunks_file), "-q", "who may terminate", "--bundle", str(bundle), "--trace")
    cold = run(*args, env=env)
    assert cold.exit_code == 0, cold.output
    assert vectors_in(cache) == len(CHUNKS) + 1  # the chunks and the query (the rationale)
    warm = run(*args, env=env)
    uncached = run(*args, "--no-cache", env={"METEORA_EDGE_CACHE": str(tmp_path / "unused")})
    assert selection(cold.stdout) == selection(warm.stdout) == selection(uncached.stdout)
    assert not (tmp_path / "unused").exists()
    off = run(*args, env={"METEORA_EDGE_CACHE": "off"})
    assert off.exit_code == 0 and selection(off.stdout) == selection(cold.stdout)
    assert not (Path.home() / ".cache" / "meteora-edge").exists()


def test_index_build_and_eval_fill_the_cache(tmp_path, bundle):
    cache = tmp_path / "cache"
    env = {"METEORA_EDGE_CACHE": str(cache)}
    doc = tmp_path / "doc.txt"
    doc.write_text(" ".join(CHUNKS * 3))
    built = run("index", "build", str(doc), "--out", str(tmp_path / "idx"), "--chunk-size", "6",
                "--bundle", str(bundle), env=env)
    assert built.exit_code == 0, built.output
    after_index = vectors_in(cache)
    assert after_index >= 3
    data = tmp_path / "hotpot.json"
    data.write_text(json.dumps(HOTPOT))
    evaluated = run("eval", "--data", str(data), "--method", "ecse", "--bundle", str(bundle), env=env)
    assert evaluated.exit_code == 0, evaluated.output
    assert vectors_in(cache) > after_index


def test_auto_precision_follows_the_cpu_and_an_index_keeps_its_variant(tmp_path, bundle, chunks_file, monkeypatch):
    vnni = CpuInfo(model="test", machine="x86_64", flags=frozenset({"avx2", "avx512_vnni"}), source="test")
    plain = CpuInfo(model="test", machine="x86_64", flags=frozenset({"sse4_2", "avx"}), source="test")  # no AVX2
    monkeypatch.setattr(precision, "cpu_info", lambda: vnni)
    out = run("select", "--chunks", str(chunks_file), "-q", "fees", "--bundle", str(bundle), "--trace")
    data = json.loads(out.stdout)
    assert data["encoder"].endswith(":int8-dot")
    choice = data["trace"]["config"]["encoder_precision"]
    assert choice["requested"] == "auto" and choice["precision"] == "int8-dot" and "avx512_vnni" in choice["reason"]
    monkeypatch.setattr(precision, "cpu_info", lambda: plain)
    doc = tmp_path / "doc.txt"
    doc.write_text(" ".join(CHUNKS * 3))
    assert run("index", "build", str(doc), "--out", str(tmp_path / "idx"), "--chunk-size", "6",
               "--bundle", str(bundle)).exit_code == 0  # built with fp32 on a CPU without VNNI or AVX2
    monkeypatch.setattr(precision, "cpu_info", lambda: vnni)  # ... and queried on one with it
    out = run("select", "--index", str(tmp_path / "idx"), "-q", "fees", "--bundle", str(bundle), "--trace")
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["encoder"].endswith(":fp32")
    assert "was built with it" in data["trace"]["config"]["encoder_precision"]["reason"]


def test_doctor_states_the_cache_and_the_chosen_precision(tmp_path, bundle, monkeypatch):
    monkeypatch.setattr(precision, "cpu_info",
                        lambda: CpuInfo(model="t", machine="x86_64", flags=frozenset({"sse4_2"}), source="test"))
    cache = tmp_path / "cache"
    result = run("doctor", "--bundle", str(bundle), "--no-probe", env={"METEORA_EDGE_CACHE": str(cache)})
    assert result.exit_code == 0, result.output
    assert f"cache       {cache / CACHE_FILE} (not created yet" in result.output
    assert "encoder     fp32 (--precision auto: the CPU has no int8 dot-product instructions" in result.output
    assert not cache.exists()  # doctor only looks
    report = json.loads(run("doctor", "--json", "--no-probe", "--no-cache").output)
    assert report["cache"] == {"state": "off (--no-cache)"}
    report = json.loads(run("doctor", "--json", "--no-probe", env={"METEORA_EDGE_CACHE": "off"}).output)
    assert report["cache"]["state"].startswith("off (METEORA_EDGE_CACHE=off")


def test_cache_info_and_clear_show_and_empty_the_default_cache(tmp_path, bundle, chunks_file):
    home_cache = Path.home() / ".cache" / "meteora-edge"
    empty = run("cache", "info")
    assert empty.exit_code == 0 and str(home_cache / CACHE_FILE) in empty.output and "not created yet" in empty.output
    assert run("cache", "clear").output.strip() == f"cache {home_cache / CACHE_FILE} is empty: nothing to clear"
    # the command line caches by default (the library only when asked)
    assert run("select", "--chunks", str(chunks_file), "-q", "who may terminate", "--bundle", str(bundle)).exit_code == 0
    stored = vectors_in(home_cache)
    assert stored == len(CHUNKS) + 1
    info = json.loads(run("cache", "info", "--json").output)
    assert info["entries"] == stored and info["permissions"] == {"meteora-edge": "0700", CACHE_FILE: "0600",
                                                                 CACHE_FILE + "-wal": "0600", CACHE_FILE + "-shm": "0600"}
    text = run("cache", "info").output
    assert "permissions meteora-edge 0700, embeddings.sqlite3 0600" in text and f"holds       {stored} vectors" in text
    cleared = run("cache", "clear")
    assert cleared.exit_code == 0 and cleared.output.strip() == f"cleared {stored} vectors from {home_cache / CACHE_FILE}"
    assert vectors_in(home_cache) == 0
    off = run("cache", "info", env={"METEORA_EDGE_CACHE": "off"})
    assert off.exit_code == 0 and off.output.startswith("cache       off (METEORA_EDGE_CACHE='off'")
