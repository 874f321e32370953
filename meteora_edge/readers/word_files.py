"""Word (.docx) to text with python-docx: paragraphs and tables, in the order the document shows them.

A table becomes one line per row, its cells joined by `` | ``. Headers, footers, comments
and text boxes are left out (python-docx does not place them in the body's order).
"""

from __future__ import annotations

import io
import zipfile

from ..errors import InputError, MissingExtraError

__all__ = ["docx_text"]


def _table_lines(table) -> list[str]:  # type: ignore[no-untyped-def]
    lines = []
    for row in table.rows:
        cells: list[str] = []
        for cell in row.cells:
            text = " ".join(cell.text.split())
            if text and (not cells or cells[-1] != text):  # a merged cell repeats in every column it spans
                cells.append(text)
        if cells:
            lines.append(" | ".join(cells))
    return lines


def docx_text(data: bytes, where: str) -> tuple[str, str | None]:
    """The text of a .docx file, and the title its properties give.

    Args:
        data: the file's bytes.
        where: how messages name the file.

    Returns:
        ``(text, title or None)``: one line per paragraph and per table row.

    Raises:
        MissingExtraError: python-docx is not installed (``pip install "meteora-edge[documents]"``).
        InputError: the file is not a .docx (an old .doc, a damaged zip, another Office file).
    """
    try:
        import docx
        from docx.table import Table
    except ImportError:
        raise MissingExtraError("python-docx", "documents") from None
    try:
        document = docx.Document(io.BytesIO(data))
    except (zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise InputError(f"{where} cannot be read as a .docx file ({exc}); an old .doc must be saved as .docx "
                         "first") from None
    except Exception as exc:  # python-docx and lxml raise their own types for a damaged part
        raise InputError(f"{where} cannot be read as a .docx file ({type(exc).__name__}: {exc})") from None
    lines: list[str] = []
    for block in document.iter_inner_content():
        if isinstance(block, Table):
            lines += _table_lines(block)
        else:
            lines.append(block.text)
    title = (document.core_properties.title or "").strip() or None
    return "\n".join(lines), title
