"""Each kind of file people keep is read to its words: HTML without scripts or navigation, PDF page
by page, .docx, gzip by the inner name, text in UTF-16 (with or without a BOM), Latin-1 and
without an extension; binary files are refused by name or by content."""

from __future__ import annotations

import codecs
import gzip
import sys
from pathlib import Path

import pytest

from document_files import HTML_PAGE, pdf_bytes, write_docx
from meteora_edge.errors import MissingExtraError
from meteora_edge.index.corpus import read_documents
from meteora_edge.readers import BINARY, MALFORMED, UnusableFileError, decode_text, read_document_file

FRENCH = "Le préavis de résiliation est de quatre-vingt-dix jours; ça vaut aussi pour l'été à Noël."


def _docs(tmp_path: Path, name: str, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    seen: dict[str, str] = {}
    return read_documents([tmp_path], on_skip=lambda p, r: seen.setdefault(p.name, r)), seen


def test_html_keeps_the_words_and_drops_scripts_styles_and_navigation(tmp_path):
    docs, seen = _docs(tmp_path, "terms.html", HTML_PAGE.encode())
    assert not seen and len(docs) == 1
    text = docs[0].text
    assert "Invoices are due thirty days after delivery." in text
    assert "Late payments carry interest.\nDisputes go to arbitration." in text
    for gone in ("secret-token-123", "color: red", "About us", "Home", "Enable JavaScript", "<", ">"):
        assert gone not in text, gone
    assert docs[0].metadata == {"source": str(tmp_path / "terms.html"), "title": "Payment terms"}


def test_a_pdf_is_one_document_per_page_whose_metadata_names_the_page(tmp_path):
    data = pdf_bytes(["Fees are due monthly.", "", "Either party may end it on ninety days notice."], title="Lease")
    docs, seen = _docs(tmp_path, "lease.pdf", data)
    assert not seen
    label = str(tmp_path / "lease.pdf")
    assert [(d.source_id, d.text, d.metadata["page"]) for d in docs] == [
        (f"{label}#page=1", "Fees are due monthly.", 1),
        (f"{label}#page=3", "Either party may end it on ninety days notice.", 3)]  # page 2 holds no text
    assert {d.file for d in docs} == {label} and docs[0].metadata["title"] == "Lease"


def test_a_damaged_pdf_is_one_reason_not_a_traceback(tmp_path):
    docs, seen = _docs(tmp_path, "lease.pdf", pdf_bytes(["Fees are due monthly."]))
    docs, seen = _docs(tmp_path, "broken.pdf", pdf_bytes(["x"])[:60])
    assert len(docs) == 1 and "cannot be read as a PDF (data format error); it is damaged" in seen["broken.pdf"]
    assert seen["broken.pdf"].kind == MALFORMED  # type: ignore[attr-defined]


def test_a_docx_reads_paragraphs_and_table_rows_in_order(tmp_path):
    pytest.importorskip("docx")
    write_docx(tmp_path / "policy.docx", title="Refund policy", paragraphs=["Refunds go back to the card.", "Within 14 days."],
               table=[["Item", "Days"], ["Shoes", "30"]])
    docs = read_documents([tmp_path / "policy.docx"])
    assert docs[0].text == "Refund policy\nRefunds go back to the card.\nWithin 14 days.\nItem | Days\nShoes | 30"
    assert docs[0].metadata["title"] == "Refund policy"


@pytest.mark.parametrize("name, inner, expected", [
    ("README.gz", b"This package reads documents.\n", "This package reads documents."),
    ("changelog.Debian.gz", b"pkg (1.0) unstable; urgency=low\n\n  * First release.\n", "* First release."),
    ("manual.html.gz", HTML_PAGE.encode(), "Invoices are due thirty days after delivery."),
    ("notes.md.gz", "# Notes\n\n" .encode() + FRENCH.encode("latin-1"), FRENCH),
])
def test_gzip_files_are_read_by_the_name_inside(tmp_path, name, inner, expected):
    docs, seen = _docs(tmp_path, name, gzip.compress(inner))
    assert not seen and expected in docs[0].text
    assert "<" not in docs[0].text and "secret-token" not in docs[0].text


def test_a_damaged_or_binary_gzip_is_never_told_to_convert_to_utf8(tmp_path):
    (tmp_path / "a.gz").write_bytes(b"\x1f\x8b\x08\x00garbage")
    (tmp_path / "b.gz").write_bytes(gzip.compress(bytes(range(256)) * 4))
    seen: dict[str, str] = {}
    with pytest.raises(Exception, match="no text to index"):
        read_documents([tmp_path], on_skip=lambda p, r: seen.setdefault(p.name, r))
    assert "not a valid gzip file" in seen["a.gz"] and seen["b.gz"] == "binary, not text"
    assert not any("UTF-8" in reason for reason in seen.values())


@pytest.mark.parametrize("data", [
    codecs.BOM_UTF16_LE + FRENCH.encode("utf-16-le"),
    codecs.BOM_UTF16_BE + FRENCH.encode("utf-16-be"),
    FRENCH.encode("utf-16-le"),  # no byte-order mark
    FRENCH.encode("utf-16-be"),
    FRENCH.encode("latin-1"),
    FRENCH.encode("cp1252"),
    codecs.BOM_UTF8 + FRENCH.encode("utf-8"),
], ids=["utf16le-bom", "utf16be-bom", "utf16le", "utf16be", "latin1", "cp1252", "utf8-bom"])
def test_text_in_any_common_encoding_reads_the_same(tmp_path, data):
    docs, seen = _docs(tmp_path, "notice.txt", data)
    assert not seen and docs[0].text == FRENCH  # not garbled, no \ufeff, no \x00


def test_files_without_an_extension_are_judged_by_their_content(tmp_path):
    (tmp_path / "README").write_text("Install with make install.\n")
    (tmp_path / "copyright").write_bytes("Copyright 2024 Zoë Müller\n".encode("latin-1"))
    (tmp_path / "page").write_text(HTML_PAGE)
    (tmp_path / "program").write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)))
    (tmp_path / "photo.png").write_bytes(b"Not even a real PNG, but the name says binary")
    seen: dict[str, str] = {}
    docs = read_documents([tmp_path], on_skip=lambda p, r: seen.setdefault(p.name, r))
    by_name = {Path(d.file).name: d.text for d in docs}
    assert by_name["README"] == "Install with make install.\n"
    assert by_name["copyright"] == "Copyright 2024 Zoë Müller\n"
    assert by_name["page"].startswith("Invoices") and "secret-token" not in by_name["page"]
    assert seen == {"program": "binary, not text", "photo.png": "binary, not text"}
    assert all(reason.kind == BINARY for reason in seen.values())  # type: ignore[attr-defined]


def test_decode_text_refuses_binary_and_strips_a_utf8_bom():
    assert decode_text(codecs.BOM_UTF8 + b"abc", "x") == "abc"
    with pytest.raises(UnusableFileError.__mro__[1], match="binary"):  # NotTextError is an InputError
        decode_text(b"\x00\x01\x02\x03binary\xff\xfe\x00", "x")


def test_without_the_documents_extra_html_is_skipped_naming_the_pip_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "selectolax", None)  # import selectolax now raises ImportError
    monkeypatch.setitem(sys.modules, "selectolax.lexbor", None)
    (tmp_path / "page.html").write_text(HTML_PAGE)
    (tmp_path / "notes.txt").write_text("Plain text still reads.")
    seen: dict[str, str] = {}
    docs = read_documents([tmp_path], on_skip=lambda p, r: seen.setdefault(p.name, r))
    assert [d.text for d in docs] == ["Plain text still reads."]
    assert 'pip install "meteora-edge[documents]"' in seen["page.html"]
    with pytest.raises(MissingExtraError, match=r'pip install "meteora-edge\[documents\]"'):
        read_document_file(tmp_path / "page.html", "page.html")


def test_a_large_binary_file_without_an_extension_is_refused_from_its_first_bytes(tmp_path, monkeypatch):
    import meteora_edge.readers.formats as formats

    image = tmp_path / "disk"
    image.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(1 << 20))
    monkeypatch.setattr(formats, "read_bytes", lambda *a, **k: pytest.fail("read whole"))
    with pytest.raises(UnusableFileError, match="binary") as refused:
        read_document_file(image, "disk")
    assert refused.value.kind == BINARY
    wide = tmp_path / "wide"  # zeros, but UTF-16's pattern: read whole, as text
    wide.write_bytes(("notice " * 2000).encode("utf-16-le"))
    monkeypatch.undo()
    assert read_document_file(wide, "wide").texts[0].startswith("notice notice")
