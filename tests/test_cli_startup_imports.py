"""The light command-line paths import only what they need: no model runtime for help or the version.

Commands are registered lazily (cli/main.py), so ``--version`` loads no command module and
``select --help`` loads only select's; none of them starts onnxruntime, tokenizers or llama.cpp.
"""

import subprocess
import sys

import pytest

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
    return set(proc.stderr.split()), proc.stdout


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
