"""The manual: README is a front page, `mkdocs build --strict` passes (no broken link or
anchor), and every page of docs/ is in the site's navigation."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from repo_paths import ROOT

pytest.importorskip("mkdocs")


def test_readme_is_a_front_page_whose_links_resolve():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if not target.startswith(("http://", "https://")):
            assert (ROOT / target).exists(), f"README links to {target}, which does not exist"


def test_mkdocs_build_strict_passes(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                         cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert (tmp_path / "site" / "cli" / "index.html").is_file()


def test_a_broken_anchor_fails_the_strict_build(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\nSee [the part](other.md#no-such-part).\n", encoding="utf-8")
    (docs / "other.md").write_text("# Other\n\n## A part\n", encoding="utf-8")
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8").split("\nnav:")[0]
    (tmp_path / "mkdocs.yml").write_text(config + "\n", encoding="utf-8")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                         cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode != 0 and "no-such-part" in run.stdout + run.stderr


def test_every_page_is_in_the_navigation():
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8").split("\nnav:", 1)[1]
    listed = set(re.findall(r":\s*([\w./-]+\.md)\s*$", nav, flags=re.M))
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert pages == listed
