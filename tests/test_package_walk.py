"""Tools that walk the package (API doc generators, plugin discovery) see meteora_edge and only it,
from a source checkout as from an installed wheel: ``cli`` and ``export`` are its subpackages, and
nothing else of the checkout (``tests``, ``benchmarks``, ``meteora_edge`` itself) is."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from repo_paths import ROOT

WALK = r"""
import json, pkgutil, sys
import meteora_edge
names = [m.name for m in pkgutil.walk_packages(meteora_edge.__path__, "meteora_edge.")]
import meteora_edge.cli.main, meteora_edge.export
try:
    import meteora_edge.main
    stray = True
except ModuleNotFoundError:
    stray = False
print(json.dumps({"names": names, "cli": meteora_edge.cli.main.__file__, "export": meteora_edge.export.__file__,
                  "stray": stray, "path": list(meteora_edge.__path__), "torch": "torch" in sys.modules}))
"""
NOT_PACKAGES = ("meteora_edge.meteora_edge", "meteora_edge.tests", "meteora_edge.benchmarks", "meteora_edge.scripts",
                "meteora_edge.main", "meteora_edge.output")


def _walk(python_path: Path, cwd: Path) -> dict:
    run = subprocess.run([sys.executable, "-c", WALK], capture_output=True, text=True, cwd=cwd, timeout=120,
                         env={"PYTHONPATH": str(python_path), "PATH": "/usr/bin:/bin", "HOME": str(cwd)})
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout)


def _check(walk: dict, top: Path) -> None:
    names = walk["names"]
    assert len(names) == len(set(names)) and all(name.startswith("meteora_edge.") for name in names)
    assert {"meteora_edge.cli", "meteora_edge.cli.main", "meteora_edge.export", "meteora_edge.export.encoder",
            "meteora_edge.pipeline.engine", "meteora_edge.index.local_index"} <= set(names)
    assert not [name for name in names if name.startswith(NOT_PACKAGES)]
    assert not walk["stray"], "cli's modules must not be modules of meteora_edge itself"
    assert Path(walk["cli"]) == top / "cli" / "main.py" if (top / "cli").is_dir() else \
        Path(walk["cli"]) == top / "meteora_edge" / "cli" / "main.py"
    assert not walk["torch"]


def test_the_walk_from_a_checkout_lists_cli_and_export_and_nothing_else_of_the_checkout(tmp_path):
    walk = _walk(ROOT, tmp_path)
    _check(walk, ROOT)
    assert ROOT.as_posix() not in walk["path"], "the checkout root must not be on the package's __path__"
    assert Path(walk["export"]) == ROOT / "export" / "__init__.py"


def test_the_walk_from_an_installed_wheel_is_the_same(tmp_path):
    pytest.importorskip("setuptools")
    source = tmp_path / "source"  # built from a copy, so the build leaves nothing in the checkout
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for name in ("meteora_edge", "cli", "export"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", str(source),
                            "-w", str(tmp_path / "dist")], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert build.returncode == 0, build.stdout + build.stderr
    wheel = next((tmp_path / "dist").glob("meteora_edge-*.whl"))
    site = tmp_path / "site-packages"  # a wheel of pure Python installs by unpacking it
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/")[0] for name in archive.namelist()}
        archive.extractall(site)
    assert {top for top in tops if not top.endswith(".dist-info")} == {"meteora_edge"}
    walk = _walk(site, tmp_path)
    _check(walk, site)
    assert walk["path"] == [str(site / "meteora_edge")]
    assert Path(walk["export"]) == site / "meteora_edge" / "export" / "__init__.py"
    names_from_checkout = set(_walk(ROOT, tmp_path)["names"])
    assert set(walk["names"]) == names_from_checkout
