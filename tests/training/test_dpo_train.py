"""dpo-train: settings, how rows are rendered, one-line errors before any heavy import, and
(slow) a tiny random Llama trained for a few steps on prepared dev data, exported to GGUF
and loaded by the runtime generator — the plumbing, not the quality."""

import json
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from meteora_edge.cli.main import main
from meteora_edge.errors import ConfigError
from meteora_edge.export.dpo_train import REPORT_NAME, DPOTrainingConfig, render_pair

from repo_paths import DEV_DATA as DEV, require_dev_data
SHOTS = [{"query": "Who may terminate the lease?", "rationales": ["[Termination] Find who may end the lease and the notice."]}]
CHAT_PROMPT = [{"role": "system", "content": "Write rationales."}, {"role": "user", "content": "Query: q\nRationales:"}]
ROW = {"prompt": CHAT_PROMPT, "chosen": [{"role": "assistant", "content": "<rationale_1>good</rationale_1>"}],
       "rejected": [{"role": "assistant", "content": "<rationale_1>bad</rationale_1>"}]}


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


# -- settings ----------------------------------------------------------------------------


def test_defaults_are_the_papers():
    config = DPOTrainingConfig()
    assert (config.beta, config.epochs, config.learning_rate, config.batch_size, config.gradient_accumulation) == (
        0.05, 3.0, 3e-5, 1, 2)
    assert config.max_steps is None and config.lora is False
    assert DPOTrainingConfig(**config.to_dict()) == config


@pytest.mark.parametrize(
    "field, value",
    [("beta", 0), ("epochs", -1), ("learning_rate", 0.0), ("batch_size", 0), ("gradient_accumulation", 1.5),
     ("max_steps", 0), ("max_length", -5), ("threads", 0), ("lora_r", 0), ("lora_dropout", 1.0), ("seed", "1")],
)
def test_bad_settings_raise(field, value):
    with pytest.raises(ConfigError, match=field):
        DPOTrainingConfig(**{field: value})


# -- rendering rows as the runtime prompts the model --------------------------------------


class TemplateTokenizer:
    """ChatML-like template; optionally refuses the system role like Gemma's."""

    bos_token = "<s>"
    add_bos_token = True
    chat_template = "chatml"

    def __init__(self, *, system: bool = True) -> None:
        self.system = system

    def apply_chat_template(self, messages, tokenize, add_generation_prompt):
        assert tokenize is False
        if not self.system and messages[0]["role"] == "system":
            raise ValueError("System role not supported")
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        return text + ("<|im_start|>assistant\n" if add_generation_prompt else "")


class PlainTokenizer:
    bos_token = "<s>"
    add_bos_token = True
    chat_template = None


def test_chat_rows_use_the_template_and_keep_the_end_of_turn():
    out = render_pair(ROW, TemplateTokenizer())
    assert out["prompt"].endswith("Query: q\nRationales:<|im_end|>\n<|im_start|>assistant\n")
    assert out["prompt"].startswith("<|im_start|>system\nWrite rationales.<|im_end|>")
    assert out["chosen"] == "<rationale_1>good</rationale_1><|im_end|>\n"
    assert out["rejected"] == "<rationale_1>bad</rationale_1><|im_end|>\n"


def test_a_template_without_system_role_gets_it_merged_like_the_runtime():
    out = render_pair(ROW, TemplateTokenizer(system=False))
    assert out["prompt"].startswith("<|im_start|>user\nWrite rationales.Query: q\nRationales:<|im_end|>")
    assert out["chosen"].startswith("<rationale_1>good")


def test_without_a_template_rows_use_the_runtime_plain_layout():
    out = render_pair(ROW, PlainTokenizer())
    assert out == {"prompt": "<s>Write rationales.\n\nQuery: q\nRationales:",
                   "chosen": "\n\n<rationale_1>good</rationale_1>", "rejected": "\n\n<rationale_1>bad</rationale_1>"}


def test_string_rows_pass_through():
    row = {"prompt": "p", "chosen": "c", "rejected": "r"}
    assert render_pair(row, TemplateTokenizer()) == row


# -- errors before any heavy import -------------------------------------------------------


@pytest.fixture
def train_file(tmp_path) -> Path:
    path = tmp_path / "train.jsonl"
    path.write_text(json.dumps(ROW) + "\n")
    return path


@pytest.fixture
def model_dir(tmp_path) -> Path:
    path = tmp_path / "model"
    path.mkdir()
    (path / "config.json").write_text("{}")
    return path


@pytest.mark.parametrize(
    "case, message",
    [
        ("missing-train", "file not found"),
        ("row-without-rejected", "row 1: missing key 'rejected'"),
        ("mixed-row", "must all be non-empty strings or all lists"),
        ("no-config", "neither a Hugging Face causal LM folder"),
        ("output-not-empty", "is not empty; give a new folder or pass --overwrite"),
        ("beta", "beta must be a positive number"),
        ("max-steps", "max_steps must be a positive integer"),
        ("missing-extra", "install it with: pip install \"meteora-edge[train]\""),
    ],
)
def test_cli_errors_are_one_line_and_leave_no_output(tmp_path, train_file, model_dir, monkeypatch, case, message):
    out = tmp_path / "trained"
    args = ["--train", str(train_file), "--model", str(model_dir), "--output-dir", str(out)]
    if case == "missing-train":
        args[1] = str(tmp_path / "nope.jsonl")
    elif case == "row-without-rejected":
        train_file.write_text(json.dumps({"prompt": "p", "chosen": "c"}) + "\n")
    elif case == "mixed-row":
        train_file.write_text(json.dumps({"prompt": "p", "chosen": ROW["chosen"], "rejected": "r"}) + "\n")
    elif case == "no-config":
        (model_dir / "config.json").unlink()
    elif case == "output-not-empty":
        out.mkdir()
        (out / "keep.txt").write_text("mine")
    elif case == "beta":
        args += ["--beta", "0"]
    elif case == "max-steps":
        args += ["--max-steps", "0"]
    else:
        for module in ("torch", "transformers", "datasets", "trl"):
            monkeypatch.setitem(sys.modules, module, None)
    result = run("dpo-train", *args)
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0], result.output
    if case == "output-not-empty":
        assert [p.name for p in out.iterdir()] == ["keep.txt"]
    else:
        assert not out.exists()


# -- the plumbing, end to end (slow) -----------------------------------------------------


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    require_dev_data()
    root = tmp_path_factory.mktemp("dpo-data")
    (root / "shots.json").write_text(json.dumps(SHOTS))
    runner = CliRunner()
    derived = runner.invoke(main, ["dpo-derive", "--hotpot", str(DEV), "--limit", "8", "--output", str(root / "c.jsonl")])
    assert derived.exit_code == 0, derived.output
    prepared = runner.invoke(main, ["dpo-prepare", "--input", str(root / "c.jsonl"), "--sample-shots", str(root / "shots.json"),
                                    "--output-dir", str(root / "dpo"), "--train-ratio", "0.75", "--validation-ratio", "0.25",
                                    "--test-ratio", "0", "--max-pairs-per-query", "1"])
    assert prepared.exit_code == 0, prepared.output
    return root


def _weights(model_dir: Path) -> dict:
    from safetensors.numpy import load_file

    return load_file(str(model_dir / "model.safetensors"))


@pytest.mark.slow
def test_train_export_and_load_a_tiny_llama(prepared, tiny_llama, converter, tmp_path):
    pytest.importorskip("trl")
    pytest.importorskip("llama_cpp")
    import torch

    torch.set_num_threads(1)
    from meteora_edge import LlamaRationaleGenerator, LocalLLM
    from meteora_edge.export.llm import export_llm

    trained = tmp_path / "trained"
    result = run("dpo-train", "--train", str(prepared / "dpo" / "train.jsonl"),
                 "--validation", str(prepared / "dpo" / "validation.jsonl"), "--model", str(tiny_llama),
                 "--output-dir", str(trained), "--max-steps", "2", "--threads", "1", "--max-length", "768")
    assert result.exit_code == 0, result.output
    assert "wrote" in result.output and "2 steps" in result.output and "Traceback" not in result.output
    report = json.loads((trained / REPORT_NAME).read_text())
    assert report["steps"] == 2 and report["config"]["beta"] == 0.05 and report["train_pairs"] >= 2
    assert [e["step"] for e in report["log"] if "loss" in e] == [1.0, 2.0]
    assert "eval_loss" in report["validation"]
    assert not [p for p in trained.parent.iterdir() if p.name.startswith(".")]  # no scratch folder left
    before, after = _weights(tiny_llama), _weights(trained)
    assert before.keys() == after.keys()
    assert any((before[k] != after[k]).any() for k in before)  # the optimiser moved the weights

    bundle = tmp_path / "bundle"
    component = export_llm(str(trained), bundle, quant="Q8_0", llama_cpp_dir=converter)
    assert component.settings["quant"] == "Q8_0" and component.settings["chat_format"] == "plain"
    generator = LlamaRationaleGenerator(LocalLLM.from_bundle(bundle, threads=1), sample_shots=SHOTS,
                                        num_rationales=3, max_new_tokens=24)
    rationales = generator.generate("Were Scott Derrickson and Ed Wood of the same nationality?")
    assert isinstance(rationales, list) and len(rationales) <= 3  # random weights: any text, parsed safely
    assert generator.last_completion is not None and generator.last_completion.prompt_tokens > 0


@pytest.mark.slow
def test_lora_adapter_is_merged_and_the_chat_template_is_used(prepared, tiny_llama, tmp_path):
    pytest.importorskip("trl")
    pytest.importorskip("peft")
    import torch

    torch.set_num_threads(1)
    from meteora_edge.export.dpo_train import train_dpo

    base = tmp_path / "base"
    shutil.copytree(tiny_llama, base)
    settings = json.loads((base / "tokenizer_config.json").read_text())
    settings["chat_template"] = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                                 "{% if add_generation_prompt %}assistant: {% endif %}")
    (base / "tokenizer_config.json").write_text(json.dumps(settings))
    out = tmp_path / "lora"
    report = train_dpo(prepared / "dpo" / "train.jsonl", base, out,
                       config=DPOTrainingConfig(lora=True, max_steps=1, max_length=768, threads=1))
    assert report["steps"] == 1 and report["config"]["lora"] is True
    assert not (out / "adapter_config.json").exists() and (out / "config.json").is_file()
    before, after = _weights(base), _weights(out)
    assert before.keys() == after.keys()  # merged: plain Llama weights, no lora_ tensors
    assert any((before[k] != after[k]).any() for k in before)
    assert "chat_template" in json.loads((out / "tokenizer_config.json").read_text()) or (out / "chat_template.jinja").is_file()


@pytest.mark.slow
def test_training_starts_from_a_gguf_file(prepared, tiny_llama, converter, tmp_path):
    """The tiny Llama as an F16 GGUF: transformers dequantises it, DPO moves it, HF weights come out."""
    pytest.importorskip("trl")
    pytest.importorskip("gguf")
    import torch

    torch.set_num_threads(1)
    from meteora_edge.export.dpo_train import train_dpo
    from meteora_edge.export.llm import export_llm

    component = export_llm(str(tiny_llama), tmp_path / "bundle", quant="F16", llama_cpp_dir=converter)
    gguf_file = tmp_path / "bundle" / component.files["model"].path
    out = tmp_path / "from-gguf"
    report = train_dpo(prepared / "dpo" / "train.jsonl", gguf_file, out,
                       config=DPOTrainingConfig(max_steps=1, max_length=768, threads=1))
    assert report["steps"] == 1 and report["model"] == str(gguf_file)
    assert [e["step"] for e in report["log"] if "loss" in e] == [1.0]
    before, after = _weights(tiny_llama), _weights(out)
    assert before.keys() <= after.keys()
    for name in before:  # the GGUF's weights (F16 rounding plus one small step), not a fresh initialisation
        assert abs(before[name].astype("float32") - after[name].astype("float32")).max() < 1e-2, name
    # the tokenizer loaded from the GGUF saves that GGUF as tokenizer.model; it is dropped, so
    # llama.cpp's converter reads tokenizer.json and the trained model goes back to GGUF
    saved = out / "tokenizer.model"
    assert not saved.exists() or saved.read_bytes()[:4] != b"GGUF"
    back = export_llm(str(out), tmp_path / "back", quant="F16", llama_cpp_dir=converter)
    with open(tmp_path / "back" / back.files["model"].path, "rb") as handle:
        assert handle.read(4) == b"GGUF"
