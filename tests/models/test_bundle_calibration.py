"""A bundle's encoder may record its cosine threshold and lexical analyser; bad records are refused."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")

from tiny_onnx import make_bundle  # noqa: E402

from meteora_edge import EvidencePipeline, PipelineConfig  # noqa: E402
from meteora_edge.errors import BundleError  # noqa: E402
from meteora_edge.models.analyzer import ENGLISH, UNICODE_WORDS  # noqa: E402
from meteora_edge.models.onnx_encoder import OnnxEncoder  # noqa: E402


def test_a_bundle_without_calibration_gets_0_35_and_the_english_analyser(tmp_path):
    encoder = OnnxEncoder.from_bundle(make_bundle(tmp_path / "b"), cache=False)
    assert encoder.cosine_tau == 0.35 and encoder.analyzer is ENGLISH


def test_a_bundle_s_recorded_threshold_and_analyser_reach_the_pipeline(tmp_path):
    bundle = make_bundle(tmp_path / "b", settings={"cosine_tau": 0.25, "analyzer": UNICODE_WORDS.record()})
    encoder = OnnxEncoder.from_bundle(bundle, cache=False)
    assert encoder.cosine_tau == 0.25 and encoder.analyzer is UNICODE_WORDS
    pipe = EvidencePipeline(PipelineConfig(verification="cosine"), encoder=encoder)
    assert pipe.cosine_tau == 0.25 and pipe.analyzer is UNICODE_WORDS
    result = pipe.run("who may terminate", passages=["Either party may terminate.", "Fees are monthly."])
    assert result.trace.phase("verify").details["tau"] == 0.25
    assert result.trace.config["analyzer"] == "unicode-words:1"


@pytest.mark.parametrize(("settings", "message"), [
    ({"cosine_tau": 1.5}, "cosine_tau must be a number in [-1, 1]"),
    ({"cosine_tau": True}, "cosine_tau must be a number in [-1, 1]"),
    ({"analyzer": "english"}, "analyzer must be an analyser record"),
    ({"analyzer": {**ENGLISH.record(), "version": 7}}, "was built with the lexical analyser"),
])
def test_a_bad_calibration_is_refused_in_one_line(tmp_path, settings, message):
    bundle = make_bundle(tmp_path / "b")
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["components"]["encoder"]["settings"].update(settings)  # as an editor of the manifest would
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BundleError) as info:
        OnnxEncoder.from_bundle(bundle, cache=False)
    assert message in str(info.value) and "\n" not in str(info.value)
