"""docs/evaluation.md shows the files scripts/evaluate.sh writes, not figures pasted by hand."""

from __future__ import annotations

import importlib.util
import re

import pytest

from repo_paths import ROOT

PAGE = ROOT / "docs" / "evaluation.md"
_spec = importlib.util.spec_from_file_location("eval_tables", ROOT / "scripts" / "eval_tables.py")
eval_tables = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(eval_tables)


def test_every_table_of_the_results_page_equals_the_file_it_names():
    text = PAGE.read_text(encoding="utf-8")
    rewritten, changed = eval_tables.rewrite(text, PAGE.parent)
    assert changed == [], f"run python scripts/eval_tables.py: these tables differ from their file: {changed}"
    assert rewritten == text


def test_the_page_is_short_and_every_fenced_table_is_generated():
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300
    tables = [i for i, line in enumerate(lines) if line == "```text" and i + 1 < len(lines)
              and lines[i + 1].startswith("method ")]
    assert len(tables) >= 10
    assert all(eval_tables.MARKER.match(lines[i - 1]) for i in tables), "a table without its eval-table marker"
    sources = {eval_tables.MARKER.match(line).group("source") for line in lines if eval_tables.MARKER.match(line)}
    for needed in ("eval/sentence.txt", "eval/paragraph.txt", "eval/contractnli.txt", "eval/dense-gold.txt",
                   "eval/hashing.txt", "eval/contractnli-hashing.txt", "eval/dense-gold-hashing.txt"):
        assert needed in sources
    assert any(source.startswith("eval/corpus-") for source in sources)
    assert any(source.startswith("eval/llm/") for source in sources)


def test_a_changed_figure_is_caught(tmp_path):
    (tmp_path / "eval").mkdir()
    source = (ROOT / "docs" / "eval" / "hashing.txt").read_text(encoding="utf-8")
    (tmp_path / "eval" / "hashing.txt").write_text(source, encoding="utf-8")
    page = "# P\n\n<!-- eval-table: eval/hashing.txt methods=bm25:2|pipeline -->\n```text\n```\n"
    filled, changed = eval_tables.rewrite(page, tmp_path)
    assert changed == ["eval/hashing.txt"]
    rows = [line for line in filled.splitlines() if re.match(r"(bm25:2|pipeline) ", line)]
    assert [row.split()[0] for row in rows] == ["bm25:2", "pipeline"]
    assert "(CPU: " in filled
    assert eval_tables.rewrite(filled, tmp_path)[1] == []
    moved = source.replace(rows[1], rows[1].replace("0.582", "0.583", 1))
    (tmp_path / "eval" / "hashing.txt").write_text(moved, encoding="utf-8")
    assert eval_tables.rewrite(filled, tmp_path)[1] == ["eval/hashing.txt"]


@pytest.mark.parametrize("marker", ["eval/nope.txt", "eval/hashing.txt methods=bm25:9"])
def test_a_marker_without_its_source_or_row_is_an_error(tmp_path, marker):
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "hashing.txt").write_text((ROOT / "docs" / "eval" / "hashing.txt").read_text())
    with pytest.raises(eval_tables.TableError):
        eval_tables.rewrite(f"<!-- eval-table: {marker} -->\n```text\n```\n", tmp_path)
