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
