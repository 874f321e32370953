"""An int8 variant is checked on the CPU it runs on: where onnxruntime's uint8×int8 kernels
saturate (AVX2 without VNNI), `auto` runs fp32 instead of a model whose embeddings are noise."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")

from tiny_onnx import expected, make_bundle, table, write_model  # noqa: E402

from meteora_edge.errors import BundleError  # noqa: E402
from meteora_edge.models import onnx_encoder, precision  # noqa: E402
from meteora_edge.models.cpu_features import CpuInfo  # noqa: E402
from meteora_edge.models.onnx_encoder import OnnxEncoder, load_encoder  # noqa: E402
from meteora_edge.models.precision import choose_precision, probe_cosine  # noqa: E402

PROBE_TEXTS = ["either party may terminate the agreement", "fees are due monthly", "written notice", "goods"]
AVX2 = CpuInfo("test AVX2", "x86_64", frozenset({"avx", "avx2", "fma"}), "test")
VNNI = CpuInfo("test VNNI", "x86_64", frozenset({"avx2", "avx512_vnni"}), "test")


def probe_record() -> dict:
    return {"texts": PROBE_TEXTS, "fp32": expected(PROBE_TEXTS).round(6).tolist()}


def bundle_with(tmp_path, *, broken: bool, probe: bool = True):
    root = make_bundle(tmp_path / "b", dot=True, settings={"probe": probe_record()} if probe else None)
    if broken:  # what saturated kernels do to a model: other vectors for the same text
        write_model(root / "encoder" / "model.int8-dot.onnx", embeddings=table(seed=9))
        manifest = json.loads((root / "manifest.json").read_text())
        from meteora_edge.models.bundle import sha256_file

        entry = manifest["components"]["encoder"]["files"]["int8-dot"]
        entry["sha256"] = sha256_file(root / "encoder" / "model.int8-dot.onnx")
        entry["size"] = (root / "encoder" / "model.int8-dot.onnx").stat().st_size
        (root / "manifest.json").write_text(json.dumps(manifest))
    return root


@pytest.fixture
def on_cpu(monkeypatch):
    def use(info: CpuInfo) -> None:
        monkeypatch.setattr(onnx_encoder, "cpu_info", lambda: info)
        monkeypatch.setattr(precision, "cpu_info", lambda: info)
    return use


def test_a_saturating_variant_falls_back_to_fp32_on_avx2(tmp_path, on_cpu):
    on_cpu(AVX2)
    encoder = OnnxEncoder.from_bundle(bundle_with(tmp_path, broken=True))
    choice = encoder.precision_choice
    assert choice["precision"] == "fp32" and encoder.identity.endswith(":fp32")
    assert ("but int8-dot on this CPU (no int8 dot-product instructions) gave embeddings too far from fp32"
            in choice["reason"])
    assert "so fp32 runs" in choice["reason"] and "< 0.95" in choice["reason"]
    np.testing.assert_allclose(encoder.encode(["fees are due"]), expected(["fees are due"]), atol=1e-6)


def test_a_sound_variant_keeps_running_on_avx2(tmp_path, on_cpu):
    on_cpu(AVX2)
    encoder = OnnxEncoder.from_bundle(bundle_with(tmp_path, broken=False))
    assert encoder.precision_choice["precision"] == "int8-dot" and "too far" not in encoder.precision_choice["reason"]
    assert encoder.probe(probe_record()) == pytest.approx(1.0, abs=1e-5)


def test_no_check_where_it_is_not_needed(tmp_path, on_cpu):
    bundle = bundle_with(tmp_path, broken=True)
    on_cpu(VNNI)  # VNNI accumulates in 32 bits: nothing saturates, the export's parity holds
    assert OnnxEncoder.from_bundle(bundle).precision_choice["precision"] == "int8-dot"
    on_cpu(AVX2)  # asked for by name: run it as asked
    assert OnnxEncoder.from_bundle(bundle, precision="int8-dot").precision_choice["reason"] == "asked for"


def test_a_bundle_without_a_probe_runs_as_before(tmp_path, on_cpu):
    on_cpu(AVX2)
    encoder = OnnxEncoder.from_bundle(bundle_with(tmp_path, broken=True, probe=False))
    assert encoder.precision_choice["precision"] == "int8-dot" and encoder.probe(None) is None


def test_an_index_built_with_a_variant_that_saturates_here_queries_with_fp32(tmp_path, on_cpu):
    on_cpu(AVX2)
    bundle = bundle_with(tmp_path, broken=True)
    encoder = load_encoder(bundle, index_encoder="onnx:tiny-test-encoder:abc:int8")  # int8 is a sound copy
    assert encoder.precision_choice == {"requested": "auto", "precision": "int8",
                                        "reason": "the index was built with it"}
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["components"]["encoder"]["files"]["int8"] = manifest["components"]["encoder"]["files"]["int8-dot"]
    (bundle / "manifest.json").write_text(json.dumps(manifest))  # now int8 names the noisy model too
    encoder = load_encoder(bundle, index_encoder="onnx:tiny-test-encoder:abc:int8")
    assert encoder.precision_choice["precision"] == "fp32"
    assert encoder.precision_choice["reason"].startswith("the index was built with int8, but int8 on this CPU")


@pytest.mark.parametrize("report, chosen, says", [
    ({"int8-dot": {"min_cosine": 0.12}}, "fp32",
     "int8-dot model was measured at export too far from fp32 (min cosine 0.120 < 0.95)"),
    ({"int8-dot": {"min_cosine": 0.97}}, "int8-dot", "AVX2 without int8 dot-product"),
    ({"int8-dot": {"min_cosine": "n/a"}}, "int8-dot", "AVX2 without int8 dot-product"),
    ({}, "int8-dot", "AVX2"),
])
def test_auto_skips_a_variant_the_export_measured_too_far(report, chosen, says):
    got, why = choose_precision(("fp32", "int8", "int8-dot"), AVX2, report=report)
    assert got == chosen and says in why


def test_every_variant_below_its_bound_still_leaves_one():
    report = {"int8": {"min_cosine": 0.1}, "int8-dot": {"min_cosine": 0.1}}
    assert choose_precision(("int8", "int8-dot"), AVX2, report=report)[0] == "int8-dot"


def test_probe_cosine_is_the_least_row_cosine():
    reference = np.eye(3, dtype=np.float32)
    record = {"texts": ["a", "b", "c"], "fp32": reference.tolist()}
    rotated = reference.copy()
    rotated[2] = [0.0, 0.6, 0.8]
    assert probe_cosine(rotated, record) == pytest.approx(0.8)
    assert probe_cosine(reference[:2], record) is None  # a record that does not fit is no verdict


@pytest.mark.parametrize("probe", [
    {"texts": ["a"], "fp32": []},
    {"texts": ["a", "b"], "fp32": [[0.1, 0.2], [0.3]]},
    {"texts": [], "fp32": []},
    {"texts": ["a"], "fp32": [["x"]]},
    {"texts": ["a"], "fp32": [[0.1]], "extra": 1},
    "probe",
])
def test_a_malformed_probe_record_is_refused(tmp_path, probe):
    with pytest.raises(BundleError, match="probe"):
        make_bundle(tmp_path / "b", settings={"probe": probe})


def test_doctor_says_when_the_check_demoted_a_variant(tmp_path, on_cpu):
    from meteora_edge.doctor import collect_report

    on_cpu(AVX2)
    report = collect_report(bundle=str(bundle_with(tmp_path, broken=True)), cache=False)
    assert report["encoder"]["precision"] == "int8-dot"  # what the flags alone pick ...
    assert report["probe"]["onnx_precision"] == "fp32"  # ... and what runs after the check
    assert "gave embeddings too far from fp32" in report["probe"]["onnx_reason"]


def test_a_repeated_check_is_a_cache_lookup(tmp_path, on_cpu):
    on_cpu(AVX2)
    bundle = bundle_with(tmp_path, broken=True)
    first = OnnxEncoder.from_bundle(bundle, cache=tmp_path / "cache")
    again = OnnxEncoder.from_bundle(bundle, cache=tmp_path / "cache")
    assert first.precision_choice == again.precision_choice and again.precision_choice["precision"] == "fp32"
    assert again._session is None  # decided from the vectors the first check stored: no session started
