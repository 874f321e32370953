"""The package tree names the stages, and imports flow one way through them."""

from __future__ import annotations

import ast
import subprocess
import sys

from repo_paths import ROOT

PACKAGE = ROOT / "meteora_edge"
# readers first: turning a file into text needs no model (the index's corpus and the chunk command use it).
# evaluation before training: training labels rationale sets on the evaluation's data sets with
# its metric (load_hotpot, precision_recall_f1), so the two agree on what a good selection is.
ORDER = ["readers", "models", "selection", "index", "pipeline", "evaluation", "training", "integrations"]
# Pairs of stages that sit side by side although ORDER lists one after the other: neither imports
# the other (the index searches with models alone; the pipeline is where selection meets it).
SIDE_BY_SIDE = {frozenset({"selection", "index"})}
TOP_LEVEL_HELPERS = {"errors", "documents", "fileio"}


def _imported_modules(path) -> set[str]:
    """Absolute dotted names (inside meteora_edge) of every import in one file, lazy ones included."""
    package = "meteora_edge." + ".".join(path.relative_to(PACKAGE).parent.parts)
    package = package.rstrip(".")
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                found.add(".".join(base + ([node.module] if node.module else [])))
            elif node.module and node.module.startswith("meteora_edge"):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("meteora_edge"))
    return found


def _module_graph(package, *, typing_imports: bool = False) -> dict[str, set[str]]:
    """Each module of a package (dotted name) and the package's modules it imports, lazy ones
    included, imports under ``if TYPE_CHECKING:`` left out (they never run) unless ``typing_imports``;
    ``from pkg import name`` counts as importing ``pkg.name`` when that is a module."""
    root = package.parent

    def dotted(path) -> str:
        parts = path.relative_to(root).with_suffix("").parts
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    modules = {dotted(path): path for path in package.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only = set() if typing_imports else {
            id(inner) for node in ast.walk(tree) if _is_type_checking_block(node)
            for stmt in node.body for inner in ast.walk(stmt)}
        for node in ast.walk(tree):
            if id(node) in typing_only:  # never executed: names for annotations only
                continue
            if isinstance(node, ast.ImportFrom):
                base = here.split(".")[: len(here.split(".")) - node.level + 1] if node.level else []
                source = ".".join(base + ([node.module] if node.module else []))
                for alias in node.names:
                    target = f"{source}.{alias.name}"
                    found.add(target if target in modules else source)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
        graph[name] = {target for target in found if target in modules and target != name}
    return graph


def _is_type_checking_block(node: ast.AST) -> bool:
    """``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``): imports for type annotations, never run."""
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Groups of modules that reach each other through imports (Tarjan's strongly connected components)."""
    order, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(node: str) -> None:
        order[node] = low[node] = len(order)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in order:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], order[target])
        if low[node] == order[node]:
            group = []
            while not group or group[-1] != node:
                group.append(stack.pop())
                on_stack.discard(group[-1])
            if len(group) > 1:
                cycles.append(sorted(group))

    for node in sorted(graph):
        if node not in order:
            visit(node)
    return cycles


def test_no_two_modules_import_each_other_even_lazily():
    """A lazy import inside a function still ties two modules together (llm_backend and llm_model
    once did: each imported the other)."""
    assert _import_cycles(_module_graph(PACKAGE)) == []


def test_no_two_modules_import_each_other_even_for_a_type_checker():
    """A circle closed only under ``if TYPE_CHECKING:`` still ties two modules: neither can be read,
    typed or moved without the other (the update planners name what they need of an index as a
    Protocol instead of importing the index class)."""
    assert _import_cycles(_module_graph(PACKAGE, typing_imports=True)) == []


def test_the_cycle_check_sees_a_circle_closed_for_type_checkers_only(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from .b import g\n")
    (package / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import A\n")
    assert _import_cycles(_module_graph(package)) == []
    assert _import_cycles(_module_graph(package, typing_imports=True)) == [["pkg.a", "pkg.b"]]


def test_the_cycle_check_finds_a_lazy_circle(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("from .a import f\n")
    (package / "sub" / "a.py").write_text("def f():\n    from .b import g\n    return g\n")
    (package / "sub" / "b.py").write_text("from pkg.sub import a\n\ndef g():\n    return a\n")
    (package / "c.py").write_text("from .sub import a\n")
    assert _import_cycles(_module_graph(package)) == [["pkg.sub.a", "pkg.sub.b"]]


def test_top_level_holds_at_most_eight_modules():
    modules = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(modules) <= 8, modules
    for stage in ORDER:
        assert (PACKAGE / stage / "__init__.py").is_file()


def test_each_stage_imports_only_earlier_stages_and_the_helpers():
    for rank, stage in enumerate(ORDER):
        allowed = {f"meteora_edge.{s}" for s in ORDER[: rank + 1] if frozenset({s, stage}) not in SIDE_BY_SIDE}
        allowed |= {f"meteora_edge.{h}" for h in TOP_LEVEL_HELPERS}
        for path in (PACKAGE / stage).glob("*.py"):
            for name in _imported_modules(path):
                parts = name.split(".")
                head = ".".join(parts[:2])
                assert head in allowed, (
                    f"{path.relative_to(ROOT)} imports {name}, which comes after or beside {stage}"
                )


def test_the_pipeline_uses_meteoras_parts_not_its_reranker_facade():
    """The facade is an entry point for callers; the pipeline resolves rationales through
    ``selection.rationales`` and selects through ``selection.ecse``, as the facade does."""
    for path in (PACKAGE / "pipeline").glob("*.py"):
        assert "meteora_edge.selection.reranker" not in _imported_modules(path), path.relative_to(ROOT)


def test_helpers_import_no_stage():
    for helper in TOP_LEVEL_HELPERS:
        for name in _imported_modules(PACKAGE / f"{helper}.py"):
            assert name.split(".")[1] in TOP_LEVEL_HELPERS, f"{helper}.py imports {name}"


def test_every_public_name_still_imports_from_the_top():
    code = (
        "import meteora_edge, sys\n"
        "missing = [n for n in meteora_edge.__all__ if getattr(meteora_edge, n, None) is None]\n"
        "assert not missing, missing\n"
        "print(len(meteora_edge.__all__))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout) >= 45


def test_every_package_folder_is_installed():
    """pyproject lists its packages by name, so a new subpackage left out of the list imports
    from a checkout (and an editable install) but is missing from a wheel."""
    import tomllib

    root = ROOT
    listed = set(tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"])
    found = {"meteora_edge." + ".".join(p.parent.relative_to(root / "meteora_edge").parts)
             for p in (root / "meteora_edge").rglob("__init__.py") if p.parent != root / "meteora_edge"}
    found |= {"meteora_edge", "meteora_edge.cli", "meteora_edge.export"}
    assert found <= listed, f"missing from pyproject's packages: {sorted(found - listed)}"


# every entry point builds a SelectRequest and runs it on the SelectRuntime: none assembles a pipeline
# or loads a model itself (pipeline/runtime.py is the one place that does both)
ENTRY_POINTS = ["cli/select_command.py", "cli/eval_command.py", "cli/serve_command.py",
                "meteora_edge/integrations/service.py", "meteora_edge/integrations/select_request.py",
                "meteora_edge/integrations/embedded.py", "meteora_edge/integrations/adapter_model.py",
                "meteora_edge/integrations/langchain_compressor.py",
                "meteora_edge/integrations/llamaindex_postprocessor.py", "meteora_edge/integrations/rerank_api.py",
                "meteora_edge/integrations/haystack_ranker.py", "meteora_edge/evaluation/methods.py",
                "meteora_edge/evaluation/corpus.py"]
ASSEMBLY = {"EvidencePipeline", "load_encoder", "load_cross_encoder", "encoder_from_options", "LocalLLM",
            "LlamaVerifier", "LlamaBatchVerifier", "LlamaRelevanceScorer", "LlamaRationaleGenerator",
            "HopRationaleGenerator", "select_config"}


def test_entry_points_go_through_the_select_runtime():
    for rel in ENTRY_POINTS:
        tree = ast.parse((ROOT / rel).read_text(encoding="utf-8"))
        names = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                 for alias in node.names}
        assert not names & ASSEMBLY, f"{rel} imports {sorted(names & ASSEMBLY)}; build a SelectRequest and run it " \
                                     "on pipeline.runtime.SelectRuntime instead"
    runtime = ast.parse((PACKAGE / "pipeline" / "runtime.py").read_text(encoding="utf-8"))
    calls = {node.func.id for node in ast.walk(runtime) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    assert "EvidencePipeline" in calls
