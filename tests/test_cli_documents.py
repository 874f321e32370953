"""The folder path on the command line: every kind of file is indexed and chunked, a PDF passage
cites its page, skips are one summary line (listed with --verbose), --include/--exclude and
ignore files choose the files, and a bad JSON Lines line is skipped alone."""

from __future__ import annotations

import gzip
import json
import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from document_files import HTML_PAGE, pdf_bytes, write_docx
from meteora_edge.cli.main import main
from meteora_edge.index.local_index import LocalIndex


def run(*args: str, stdin: str | bytes | None = None):
    return CliRunner().invoke(main, list(args), input=stdin, catch_exceptions=False)


def _warnings(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("warning")]


def _sources(index_dir: Path) -> set[str]:
    index = LocalIndex.load(index_dir)
    return {Path(r["file"]).name for r in index.records(range(len(index)))}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    (docs / "pkg").mkdir(parents=True)
    (docs / "terms.html").write_text(HTML_PAGE)
    (docs / "lease.pdf").write_bytes(pdf_bytes(["Fees are due monthly by bank transfer.",
                                                "Either party may terminate the lease on ninety days written notice."]))
    write_docx(docs / "policy.docx", title="Refunds", paragraphs=["Refunds go back to the card."], table=[["a", "b"]])
    (docs / "pkg" / "README.gz").write_bytes(gzip.compress(b"The package keeps its manual here.\n"))
    (docs / "pkg" / "copyright").write_bytes("Copyright Zoë Müller, all rights reserved.".encode("utf-16"))
    (docs / "pkg" / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    return docs


def test_index_build_reads_every_kind_and_a_pdf_passage_cites_its_page(folder, tmp_path):
    out = tmp_path / "ix"
    built = run("index", "build", str(folder), "--out", str(out), "--progress", "none")
    assert built.exit_code == 0, built.output
    assert _warnings(built.output) == [f"warning: skipped {folder / 'pkg' / 'logo.png'}: binary, not text"]
    assert "indexed 6 documents from 5 files into 6 chunks" in built.output
    assert _sources(out) == {"terms.html", "lease.pdf", "policy.docx", "README.gz", "copyright"}
    text = run("select", "--index", str(out), "-q", "How much notice ends the lease?", "--format", "text")
    assert text.exit_code == 0, text.output
    assert f"{folder / 'lease.pdf'}#page=2:0-67" in text.output
    assert "Either party may terminate the lease on ninety days written notice." in text.output


def test_chunk_reads_html_pdf_and_stdin_through_the_same_reader(folder, tmp_path):
    page = json.loads(run("chunk", str(folder / "terms.html"), "--compact").output)["chunks"]
    assert "secret-token" not in page[0]["text"] and page[0]["text"].startswith("Invoices")
    pdf = json.loads(run("chunk", str(folder / "lease.pdf"), "--compact").output)["chunks"]
    assert [(c["index"], c["metadata"]["page"]) for c in pdf] == [(0, 1), (1, 2)]
    piped = run("chunk", "-", "--compact", stdin=HTML_PAGE)
    assert piped.exit_code == 0 and "<script>" not in piped.output and "Invoices are due" in piped.output
    bom = tmp_path / "bom.txt"
    bom.write_bytes(b"\xef\xbb\xbfNotice is ninety days.")
    chunks = json.loads(run("chunk", str(bom), "--compact").output)["chunks"]
    assert chunks[0]["text"] == "Notice is ninety days." and chunks[0]["start_pos"] == 0
    built = run("index", "build", "-", "--out", str(tmp_path / "stdin.idx"), "--progress", "none", stdin=HTML_PAGE)
    assert built.exit_code == 0, built.output
    index = LocalIndex.load(tmp_path / "stdin.idx")
    assert all("secret-token" not in r["text"] and "<" not in r["text"] for r in index.records(range(len(index))))


def test_chunk_of_a_binary_or_an_html_file_without_the_extra_is_one_line(folder, monkeypatch):
    binary = run("chunk", str(folder / "pkg" / "logo.png"))
    assert binary.exit_code == 1 and binary.output == f"Error: {folder / 'pkg' / 'logo.png'} is binary, not text\n"
    monkeypatch.setitem(sys.modules, "selectolax", None)
    monkeypatch.setitem(sys.modules, "selectolax.lexbor", None)
    missing = run("chunk", str(folder / "terms.html"))
    assert missing.exit_code == 1 and 'pip install "meteora-edge[documents]"' in missing.output
    assert missing.output.count("\n") == 1 and "Traceback" not in missing.output


def test_many_skips_are_one_summary_line_and_verbose_lists_each(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.md").write_text("Keep receipts for seven years.")
    for i in range(30):
        (docs / f"image{i}.png").write_bytes(b"\x89PNG")
    (docs / "big.txt").write_text("word " * 400)
    (docs / "empty.txt").write_text("  \n")
    out = tmp_path / "ix"
    quiet = run("index", "build", str(docs), "--out", str(out), "--max-file-size", "1K", "--progress", "none")
    assert quiet.exit_code == 0, quiet.output
    assert _warnings(quiet.output) == [
        "warning: skipped 32 files: 30 binary, 1 over --max-file-size, 1 without text (--verbose lists them)"]
    assert "indexed 1 document from 1 file into 1 chunk at" in quiet.output
    loud = run("index", "build", str(docs), "--out", str(tmp_path / "v"), "--max-file-size", "1K", "--verbose",
               "--progress", "none")
    listed = _warnings(loud.output)
    assert len(listed) == 33 and listed[-1].startswith("warning: skipped 32 files: ")
    assert f"warning: skipped {docs / 'image7.png'}: binary, not text" in listed
    assert any(line.startswith(f"warning: skipped {docs / 'big.txt'}: 2,000 bytes, over the limit of 1,024")
               for line in listed), listed


def test_include_exclude_and_ignore_files_choose_the_files(tmp_path):
    docs = tmp_path / "docs"
    (docs / "drafts").mkdir(parents=True)
    (docs / "build").mkdir()
    (docs / "sub").mkdir()
    for name in ("a.md", "b.txt", "drafts/c.md", "build/d.md", "sub/e.md", "sub/f.log", "sub/keep.log"):
        (docs / name).write_text(f"Text of {name} for the index.")
    (docs / ".gitignore").write_text("build/\n*.log\n")
    (docs / "sub" / ".meteoraignore").write_text("!keep.log\ne.md\n")

    def indexed(*options: str) -> set[str]:
        out = tmp_path / f"ix{len(list(tmp_path.iterdir()))}"
        result = run("index", "build", str(docs), "--out", str(out), "--progress", "none", *options)
        assert result.exit_code == 0 and not _warnings(result.output), result.output
        return _sources(out)

    assert indexed() == {"a.md", "b.txt", "c.md", "keep.log"}
    assert indexed("--include", "*.md") == {"a.md", "c.md"}
    assert indexed("--exclude", "drafts/", "--exclude", "*.txt") == {"a.md", "keep.log"}
    assert indexed("--no-ignore-files") == {"a.md", "b.txt", "c.md", "d.md", "e.md", "f.log", "keep.log"}
    assert indexed("--include", "/*.md", "--no-ignore-files") == {"a.md"}
    bad = run("index", "build", str(docs), "--out", str(tmp_path / "bad"), "--max-file-size", "lots")
    assert bad.exit_code == 2 and "'lots' is not a size" in bad.output


def test_sync_with_an_exclude_removes_the_files_it_now_leaves_out(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "keep.md").write_text("Keep this clause about notice.")
    (docs / "old.md").write_text("An old clause about fees.")
    out = tmp_path / "ix"
    assert run("index", "build", str(docs), "--out", str(out), "--progress", "none").exit_code == 0
    synced = run("index", "sync", str(out), str(docs), "--exclude", "old.md", "--progress", "none")
    assert synced.exit_code == 0, synced.output
    assert "added 0 chunks, removed 1 chunk; now holds 1 chunk" in synced.output
    assert _sources(out) == {"keep.md"}


def test_a_bad_json_lines_line_is_skipped_by_name_and_the_rest_kept(tmp_path):
    faq = tmp_path / "faq.jsonl"
    faq.write_text('{"text": "Shipping takes five days."}\n{"text": "broken\n{"id": 7}\n{"text": "Refunds go to the card."}\n')
    out = tmp_path / "ix"
    built = run("index", "build", str(faq), "--out", str(out), "--progress", "none")
    assert built.exit_code == 0, built.output
    assert _warnings(built.output) == [
        f"warning: skipped {faq}:2: not valid JSON: Unterminated string starting at (column 10)",
        f"warning: skipped {faq}:3: document is a mapping without a text: keys ['id']; give it one of the keys text, "
        "content, page_content"]
    index = LocalIndex.load(out)
    assert [r["text"] for r in index.records(range(len(index)))] == ["Shipping takes five days.", "Refunds go to the card."]
    strict = run("index", "build", str(faq), "--out", str(tmp_path / "strict"), "--strict")
    assert strict.exit_code == 1 and f"{faq}:2: not valid JSON" in strict.output and "--strict" in strict.output
    assert not os.path.exists(tmp_path / "strict")


def test_a_utf8_bom_never_reaches_a_text_or_breaks_a_json_file(tmp_path):
    chunks = tmp_path / "chunks.json"
    chunks.write_bytes(b"\xef\xbb\xbf" + json.dumps(["Either party may terminate on ninety days notice.",
                                                     "Fees are due monthly."]).encode())
    selected = run("select", "--chunks", str(chunks), "-q", "How is the agreement terminated?", "--format", "jsonl")
    assert selected.exit_code == 0, selected.output
    assert "\ufeff" not in selected.output and "ninety days" in selected.output
    notes = tmp_path / "notes.md"
    notes.write_bytes(b"\xef\xbb\xbfKeep receipts for seven years.")
    out = tmp_path / "ix"
    assert run("index", "build", str(notes), "--out", str(out), "--progress", "none").exit_code == 0
    index = LocalIndex.load(out)
    assert [r["text"] for r in index.records(range(len(index)))] == ["Keep receipts for seven years."]
