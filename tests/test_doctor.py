import json

from click.testing import CliRunner

from meteora_edge.cli.main import main
from meteora_edge.doctor import collect_report


def test_report_has_every_section():
    report = collect_report()
    assert report["ok"] is True
    assert report["versions"]["meteora-edge"]
    assert report["cpu"]["cores"] >= 1
    assert report["probe"]["hashing_encode_64_ms"] > 0
    assert set(report["llm_extra"]) >= {"ok"}
    if report["llm_extra"]["ok"]:
        assert report["llm_extra"]["cpu_backend"]["dispatch"] in ("runtime", "built-in")
    assert "int8_dot_product" in report["cpu"] and report["cpu"]["flags_source"]
    assert report["cache"]["path"].endswith("embeddings.sqlite3") and report["cache"]["state"] == "not created yet"


def test_cli_json_and_broken_bundle(tmp_path):
    ok = CliRunner().invoke(main, ["doctor", "--json", "--no-probe"])
    assert ok.exit_code == 0 and "probe" not in json.loads(ok.output)
    (tmp_path / "manifest.json").write_text("{not json")
    broken = CliRunner().invoke(main, ["doctor", "--bundle", str(tmp_path), "--no-probe"])
    assert broken.exit_code == 1 and "BROKEN" in broken.output and "Traceback" not in broken.output


def test_doctor_names_a_cpu_level_it_never_loads(monkeypatch):
    import pytest

    pytest.importorskip("llama_cpp")
    from meteora_edge.models import llm_backend

    monkeypatch.setattr(llm_backend, "cpu_backend", lambda: {
        "dispatch": "runtime", "variant": "icelake", "variants": ["haswell", "icelake", "sapphirerapids"],
        "skipped": {"sapphirerapids": llm_backend.UNSAFE_VARIANTS["sapphirerapids"]}})
    out = CliRunner().invoke(main, ["doctor", "--no-probe"])
    assert out.exit_code == 0, out.output
    line = next(row for row in out.output.splitlines() if row.startswith("llm extra"))
    assert "loaded icelake of 3 variants; never loads sapphirerapids: its AMX kernels stop the process" in line


def test_doctor_lists_the_lexical_scorer_of_a_bundle_and_an_index(tmp_path):
    import sys
    from pathlib import Path

    from click.testing import CliRunner

    from meteora_edge.cli.main import main
    from meteora_edge.index.corpus import SourceDocument
    from meteora_edge.index.local_index import LocalIndex
    from meteora_edge.models.bundle import Component, add_component, file_entry

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from sparse_fakes import encoder_with_sparse

    LocalIndex.build(tmp_path / "ix", [SourceDocument("a", "Either party may cancel.")], encoder_with_sparse(),
                     lexical_scorer="sparse")
    bundle = tmp_path / "bundle"
    (bundle / "sparse").mkdir(parents=True)
    for name in ("model.onnx", "tokenizer.json"):
        (bundle / "sparse" / name).write_bytes(b"placeholder")
    add_component(bundle, "sparse_encoder", Component(kind="sparse_encoder", source="splade-tiny", files={
        "fp32": file_entry(bundle, "sparse/model.onnx"), "tokenizer": file_entry(bundle, "sparse/tokenizer.json")}))
    out = CliRunner().invoke(main, ["doctor", "--no-probe", "--bundle", str(bundle), "--index", str(tmp_path / "ix")])
    assert out.exit_code == 0, out.output
    assert "lexical     bm25 and sparse (sparse_encoder: splade-tiny, variants fp32)" in out.output
    assert "1 chunks, lexical scorer sparse by sparse:fake" in out.output
    broken = CliRunner().invoke(main, ["doctor", "--no-probe", "--index", str(tmp_path / "missing")])
    assert broken.exit_code == 1 and "index       BROKEN:" in broken.output
