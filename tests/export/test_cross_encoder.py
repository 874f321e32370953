"""The ONNX cross-encoder: a tiny random BERT sequence classifier built here, exported and scored."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

pytest.importorskip("torch")
pytest.importorskip("optimum.exporters.onnx")
pytest.importorskip("onnxruntime")

from tiny_onnx import VOCAB, write_tokenizer  # noqa: E402

from meteora_edge.models.bundle import Bundle  # noqa: E402
from meteora_edge.cli.main import main  # noqa: E402
from meteora_edge.errors import BundleError, ConfigError  # noqa: E402
from meteora_edge.export.cross_encoder import export_cross_encoder  # noqa: E402
from meteora_edge.models.onnx_cross_encoder import OnnxCrossEncoder, relevance  # noqa: E402
from meteora_edge.pipeline.engine import EvidencePipeline, PipelineConfig  # noqa: E402

PASSAGES = ["either party may terminate", "fees are due monthly", "the supplier shall deliver the goods",
            "notice " * 80]


@pytest.fixture(scope="module")
def tiny_classifier(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch
    from tokenizers import Tokenizer
    from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

    folder = tmp_path_factory.mktemp("tiny-ce")
    torch.manual_seed(1)
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, num_labels=1)
    BertForSequenceClassification(config).eval().save_pretrained(folder)
    raw = Tokenizer.from_file(str(write_tokenizer(folder / "raw.json")))
    PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                            sep_token="[SEP]").save_pretrained(folder)
    (folder / "raw.json").unlink()
    return folder


@pytest.fixture(scope="module")
def ce_bundle(tiny_classifier: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ce-bundle") / "bundle"
    export_cross_encoder(str(tiny_classifier), out, quantize="int8")
    return out


def _torch_scores(folder: Path, query: str, passages: list[str]) -> np.ndarray:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModelForSequenceClassification.from_pretrained(str(folder)).eval()
    with torch.inference_mode():
        batch = tok([query] * len(passages), passages, truncation=True, max_length=64, padding=True, return_tensors="pt")
        return torch.sigmoid(model(**batch).logits[:, 0]).numpy()


def test_export_writes_a_checked_component_with_parity(ce_bundle):
    bundle = Bundle.load(ce_bundle)
    assert bundle.verify()["cross_encoder"] == {"fp32": "ok", "int8": "ok", "tokenizer": "ok"}
    comp = bundle.component("cross_encoder")
    assert comp.kind == "cross_encoder" and comp.settings["max_length"] == 64
    assert comp.report["fp32"]["max_abs_diff"] <= 1e-3 and comp.report["pairs"] == 36


def test_scores_match_torch_in_input_order(ce_bundle, tiny_classifier):
    ce = OnnxCrossEncoder.from_bundle(ce_bundle, precision="fp32", batch_size=2)
    got = ce.score("who may terminate", PASSAGES)
    np.testing.assert_allclose(got, _torch_scores(tiny_classifier, "who may terminate", PASSAGES), atol=1e-4)
    assert ce.identity.endswith(":fp32") and ce.score("q", []).shape == (0,)
    int8 = OnnxCrossEncoder.from_bundle(ce_bundle, precision="int8").score("who may terminate", PASSAGES)
    assert int8.shape == (4,) and np.all((int8 >= 0) & (int8 <= 1))


def test_plugs_into_the_cross_encoder_rung(ce_bundle):
    ce = OnnxCrossEncoder.from_bundle(ce_bundle)
    pipeline = EvidencePipeline(PipelineConfig(verification="cross-encoder", tau_relevance=0.0), cross_encoder=ce)
    result = pipeline.run("who may terminate", passages=PASSAGES[:3])
    details = result.trace.phase("verify").details
    assert details["rung"] == "cross-encoder" and details["tau"] == 0.0 and details["accepted"]
    strict = EvidencePipeline(PipelineConfig(verification="cross-encoder", tau_relevance=1.0), cross_encoder=ce)
    assert strict.run("who may terminate", passages=PASSAGES[:3]).trace.phase("verify").details["accepted"] == []
    with pytest.raises(ConfigError, match="tau_relevance must be a number in"):  # outside the score's range
        PipelineConfig(verification="cross-encoder", tau_relevance=1.01)


def test_relevance_and_bad_input():
    np.testing.assert_allclose(relevance(np.array([[0.0], [100.0]])), [0.5, 1.0])
    np.testing.assert_allclose(relevance(np.array([[0.0, 0.0], [0.0, 50.0]])), [0.5, 1.0])
    with pytest.raises(ConfigError, match=r"passages\[0\] is int"):
        OnnxCrossEncoder.__new__(OnnxCrossEncoder).score("q", [1])  # type: ignore[list-item]


def test_bundle_refusals(tmp_path):
    from tiny_onnx import make_bundle

    encoder_only = make_bundle(tmp_path / "enc")
    with pytest.raises(BundleError, match="has no 'cross_encoder' component"):
        OnnxCrossEncoder.from_bundle(encoder_only)
    with pytest.raises(BundleError, match="is a 'encoder', not a cross_encoder"):
        OnnxCrossEncoder.from_bundle(encoder_only, component="encoder")


def test_cli_export_cross_encoder(tiny_classifier, tmp_path):
    out = tmp_path / "b"
    result = CliRunner().invoke(main, ["export", "cross-encoder", str(tiny_classifier), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "parity fp32 vs torch over 36 pairs" in result.output
    assert json.loads((out / "manifest.json").read_text())["components"]["cross_encoder"]["kind"] == "cross_encoder"


def test_select_uses_the_bundles_cross_encoder_rung(ce_bundle, tmp_path):
    chunks = tmp_path / "chunks.json"
    chunks.write_text(json.dumps(["either party may terminate", "fees are due monthly", "governing law"]))
    base = ["select", "--chunks", str(chunks), "-q", "who may terminate", "--bundle", str(ce_bundle), "--compact",
            "--trace"]
    auto = CliRunner().invoke(main, [*base, "--tau", "0.0"])
    assert auto.exit_code == 0, auto.output
    data = json.loads(auto.stdout)
    assert data["trace"]["config"]["rung"] == "cross-encoder"
    assert all(c.get("relevance") is not None for c in data["trace"]["candidates"] if c.get("verified") is not None)
    explicit = CliRunner().invoke(main, [*base, "--verification", "cross-encoder"])
    assert explicit.exit_code == 0, explicit.output
    missing = CliRunner().invoke(main, ["select", "--chunks", str(chunks), "-q", "x", "--verification", "cross-encoder"])
    assert missing.exit_code == 1 and "needs a cross-encoder" in missing.output
