"""Index building skips what it cannot read (naming the file), re-adding is idempotent, and
``index info`` counts files as sources."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from meteora_edge import HashingEncoder
from meteora_edge.cli.main import main
from meteora_edge.errors import InputError
from meteora_edge.index.corpus import read_documents
from meteora_edge.index.local_index import LocalIndex


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "policy.md").write_text("Returns are accepted within thirty days of delivery.")
    (folder / "faq.jsonl").write_text('{"text": "Shipping takes five days."}\n{"text": "Refunds go to the card."}\n')
    (folder / "package.json").write_text('{"name": "shop", "version": "1.0.0"}')  # JSON without text fields
    (folder / "manual.pdf").write_bytes(b"%PDF-1.7\n\x00\x01binary")
    (folder / "sub" / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    (folder / "sub" / "empty.txt").write_text("   \n")
    (folder / "broken.json").write_text("[1,")
    (folder / "image.png").write_bytes(b"\x89PNG")
    (folder / ".git").mkdir()
    (folder / ".git" / "config").write_text("hidden, not reported")
    return folder


SKIPPED = {"package.json": "mapping without a text", "manual.pdf": "cannot be read as a PDF",
           "empty.txt": "holds no text", "broken.json": "not valid JSON", "image.png": "binary, not text"}
KINDS = {"package.json": "JSON without a text field", "manual.pdf": "damaged or malformed", "empty.txt": "without text",
         "broken.json": "damaged or malformed", "image.png": "binary"}


def test_read_documents_skips_each_unusable_file_with_its_reason(mixed):
    seen: dict[str, str] = {}
    docs = read_documents([mixed], on_skip=lambda path, reason: seen.setdefault(path.name, reason))
    assert [d.text for d in docs] == ["Shipping takes five days.", "Refunds go to the card.",
                                      "Returns are accepted within thirty days of delivery.", "café"]
    assert {d.file for d in docs} == {str(mixed / "faq.jsonl"), str(mixed / "policy.md"), str(mixed / "sub/latin1.txt")}
    assert set(seen) == set(SKIPPED)
    for name, reason in SKIPPED.items():
        assert reason in seen[name], (name, seen[name])
        assert seen[name].kind == KINDS[name], (name, seen[name].kind)  # type: ignore[attr-defined]


def test_strict_fails_on_the_first_unusable_file_naming_it(mixed):
    with pytest.raises(InputError, match=r"broken\.json.*--strict"):
        read_documents([mixed], strict=True)


def test_a_named_damaged_pdf_is_skipped_and_nothing_readable_is_an_error(tmp_path):
    pdf = tmp_path / "a.pdf"
    pdf.write_bytes(b"%PDF")
    with pytest.raises(InputError, match=r"no text to index; skipped 1 file, first .*a\.pdf: cannot be read as a PDF"):
        read_documents([pdf])


def test_index_build_summarises_the_skips_in_one_line_and_lists_them_with_verbose(mixed, tmp_path):
    out = tmp_path / "ix"
    result = run("index", "build", str(mixed), "--out", str(out), "--chunk-size", "20")
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.output.splitlines() if line.startswith("warning")]
    assert warnings == ["warning: skipped 5 files: 2 damaged or malformed, 1 JSON without a text field, 1 binary, "
                        "1 without text (--verbose lists them)"]
    assert "indexed 4 documents from 3 files into 4 chunks" in result.output
    verbose = run("index", "build", str(mixed), "--out", str(tmp_path / "v"), "--verbose")
    listed = [line for line in verbose.output.splitlines() if line.startswith("warning: skipped ")]
    for name, reason in SKIPPED.items():
        assert sum(f"{name}: " in line and reason in line for line in listed) == 1, (name, listed)
    assert listed[-1].startswith("warning: skipped 5 files: ") and len(listed) == len(SKIPPED) + 1
    strict = run("index", "build", str(mixed), "--out", str(tmp_path / "strict"), "--strict")
    assert strict.exit_code == 1 and "--strict" in strict.output and "Traceback" not in strict.output
    assert not (tmp_path / "strict").exists()


def test_index_add_twice_is_idempotent_unless_duplicates_are_allowed(tmp_path):
    a, b = tmp_path / "a.md", tmp_path / "b.jsonl"
    a.write_text("Either party may terminate on ninety days notice. " * 8)
    b.write_text('{"text": "Fees are due monthly."}\n{"text": "Rent is due on the first."}\n')
    out = tmp_path / "ix"
    assert run("index", "build", str(a), "--out", str(out), "--chunk-size", "20").exit_code == 0
    before = json.loads(run("index", "info", str(out)).output)
    first = run("index", "add", str(out), str(a), str(b))
    assert first.exit_code == 0 and "added 2 chunks" in first.output and "1 document already in the index" in first.output
    again = run("index", "add", str(out), str(a), str(b))
    assert again.exit_code == 0 and "added 0 chunks" in again.output and "3 documents already" in again.output
    info = json.loads(run("index", "info", str(out)).output)
    assert info["chunks"] == before["chunks"] + 2
    assert info["sources"] == 2 and info["documents"] == 3  # files, not JSONL records
    forced = run("index", "add", str(out), str(b), "--allow-duplicates")
    assert forced.exit_code == 0 and json.loads(run("index", "info", str(out)).output)["chunks"] == info["chunks"] + 2


def test_a_changed_document_replaces_its_old_chunks(tmp_path):
    enc = HashingEncoder()
    from meteora_edge.index.corpus import SourceDocument

    doc = SourceDocument("d", "one two three four five six", {}, "d.txt")
    index = LocalIndex.build(tmp_path / "ix", [doc], enc, chunk_size=3, overlap=0)
    assert len(index.add([doc], enc)) == len(index)  # nothing new: the same index back
    changed = SourceDocument("d", "one two three four five seven", {}, "d.txt")
    grown = index.add([changed], enc)
    assert len(grown) == len(index) and grown.removed_chunks == 2 and grown.added_chunks == 2
    assert [r["text"] for r in grown.records(grown.live_ids())] == ["one two three", "four five seven"]
    assert len(grown.add([doc], enc, allow_duplicates=True)) == len(grown) + 2  # appended to its source
