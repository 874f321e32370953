"""The light command-line paths import only what they need: no model runtime for help or the version.

Commands are registered lazily (cli/main.py), so ``--version`` loads no command module and
``select --help`` loads only select's; none of them starts onnxruntime, tokenizers or llama.cpp.
"""

import subprocess
import sys

import pytest
from repo_paths import EXAMPLES

RUNTIMES = ("onnxruntime", "llama_cpp", "tokenizers", "faiss", "pymilvus", "torch")


def imported_after(args: list[str]) -> tuple[set[str], str]:
    code = (
        "import sys, runpy\n"
        f"sys.argv = ['meteora-edge', *{args!r}]\n"
        "try:\n"
        "    runpy.run_module('meteora_edge', run_name='__main__')\n"
        "except SystemExit as exc:\n"
        "    assert exc.code in (0, None), exc.code\n"
        "print(' '.join(sorted(sys.modules)), file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return set(proc.stderr.strip().splitlines()[-1].split()), proc.stdout  # the last line: notes come before it


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["select", "--help"], ["index", "search", "--help"],
                                  ["index", "build", "--help"], ["serve", "--help"]])
def test_help_and_version_start_no_model_runtime(args):
    modules, out = imported_after(args)
    assert out.strip()  # it did print the help or the version
    loaded = sorted(m for m in modules if m.split(".")[0] in RUNTIMES)
    assert loaded == [], f"{' '.join(args)} imported {loaded}"


def test_version_loads_no_command_module_and_no_numpy():
    modules, out = imported_after(["--version"])
    assert "meteora-edge" in out
    commands = sorted(m for m in modules if m.startswith("meteora_edge.cli.") and m != "meteora_edge.cli.main"
                      and m != "meteora_edge.cli.output")
    assert commands == []
    assert "numpy" not in modules


def test_select_help_loads_select_and_not_the_other_commands():
    modules, out = imported_after(["select", "--help"])
    assert "--query" in out
    assert "meteora_edge.cli.select_command" in modules
    others = {"meteora_edge.cli.eval_command", "meteora_edge.cli.export_commands", "meteora_edge.cli.dpo_commands",
              "meteora_edge.cli.doctor_command", "meteora_edge.cli.serve_command", "meteora_edge.cli.model_commands"}
    assert sorted(others & modules) == []


# modules a path needs only with a bundle (ONNX encoders, their cache) or an LLM (the GGUF model)
MODEL_CODE = ("meteora_edge.models.onnx_encoder", "meteora_edge.models.onnx_cross_encoder",
              "meteora_edge.models.onnx_session", "meteora_edge.models.embedding_cache",
              "meteora_edge.models.llm_model", "sqlite3")


@pytest.mark.parametrize("args", [["--help"], ["select", "--help"], ["index", "build", "--help"]])
def test_help_imports_no_model_code(args):
    modules, _ = imported_after(args)
    assert sorted(m for m in modules if m in MODEL_CODE) == []


def test_a_select_with_the_hashing_encoder_imports_no_model_code_and_no_resource_readers():
    """No bundle: the hashing encoder, so neither the ONNX encoder modules nor the LLM's are imported,
    and the stop words are read without importlib.resources' readers (zipfile and friends)."""
    clauses = str(EXAMPLES / "contract_clauses.json")
    modules, out = imported_after(["select", "--chunks", clauses, "--query", "Who may terminate?"])
    assert "terminat" in out.lower()  # it did select
    loaded = sorted(m for m in modules if m in MODEL_CODE or m.split(".")[0] in RUNTIMES)
    assert loaded == []
    assert "importlib.resources.readers" not in modules
