"""Small real documents made by the tests: a PDF written byte by byte, a .docx by python-docx, an HTML page."""

from __future__ import annotations

from pathlib import Path

HTML_PAGE = """<!DOCTYPE html>
<html><head><title>Payment terms</title>
<style>p { color: red }</style>
<script>var tracking = "secret-token-123";</script></head>
<body>
<nav><a href="/">Home</a> | <a href="/about">About us</a></nav>
<h1>Invoices</h1>
<p>Invoices are due <b>thirty days</b> after delivery.</p>
<ul><li>Late payments carry interest.</li><li>Disputes go to arbitration.</li></ul>
<noscript>Enable JavaScript</noscript>
</body></html>
"""


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def pdf_bytes(pages: list[str], *, title: str | None = None) -> bytes:
    """A valid PDF with one line of Helvetica text per page (an empty string makes a page without text)."""
    count = len(pages)
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(count))
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>",
               f"<< /Type /Pages /Kids [{kids}] /Count {count} >>".encode(),
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    for i, text in enumerate(pages):
        stream = f"BT /F1 12 Tf 72 720 Td ({_escape(text)}) Tj ET".encode("latin-1") if text else b""
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
                       f"/Contents {5 + 2 * i} 0 R >>".encode())
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    if title is not None:
        objects.append(f"<< /Title ({_escape(title)}) >>".encode("latin-1"))
    out = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    info = b" /Info %d 0 R" % len(objects) if title is not None else b""
    out += b"trailer\n<< /Size %d /Root 1 0 R%s >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, info, xref)
    return out


def write_docx(path: Path, *, title: str, paragraphs: list[str], table: list[list[str]]) -> Path:
    """A .docx made by python-docx: a heading, the paragraphs, then a table."""
    import docx

    document = docx.Document()
    document.core_properties.title = title
    document.add_heading(title, level=1)
    for text in paragraphs:
        document.add_paragraph(text)
    grid = document.add_table(rows=len(table), cols=len(table[0]))
    for r, row in enumerate(table):
        for c, cell in enumerate(row):
            grid.cell(r, c).text = cell
    document.save(str(path))
    return path
