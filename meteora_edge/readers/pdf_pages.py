"""PDF to text, one string per page, with pypdfium2 (Google's PDFium, the engine of Chrome's viewer).

A page's text is what PDFium's text layer holds, in its reading order (a word hyphenated across
lines whole again, control characters dropped); a scanned page without
a text layer reads as empty (OCR it first). Encrypted and damaged files raise one
:class:`~meteora_edge.errors.InputError`.
"""

from __future__ import annotations

import re

from ..errors import InputError, MissingExtraError

__all__ = ["pdf_pages"]

#: PDFium marks a word hyphenated across lines with U+FFFE (the word is whole around it) and gives
#: glyphs without a Unicode mapping as control characters: neither is text
_NOT_TEXT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def pdf_pages(data: bytes, where: str) -> tuple[list[str], str | None]:
    """The text of each page of a PDF (page 1 first), and the title its metadata gives.

    Args:
        data: the file's bytes.
        where: how messages name the file.

    Returns:
        ``(one text per page, title or None)``; a page without a text layer is ``""``.

    Raises:
        MissingExtraError: pypdfium2 is not installed (``pip install "meteora-edge[documents]"``).
        InputError: the file is encrypted, damaged or not a PDF.
    """
    try:
        import pypdfium2 as pdfium
    except ImportError:
        raise MissingExtraError("pypdfium2", "documents") from None
    try:
        document = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        detail = str(exc).rstrip(".").split("PDFium: ")[-1].rstrip(")").strip().lower() or "damaged"
        fix = ("; save it without its password first" if "password" in detail
               else "; it is damaged or not a PDF")
        raise InputError(f"{where} cannot be read as a PDF ({detail}){fix}") from None
    try:
        pages = []
        for page in document:
            textpage = page.get_textpage()
            text = textpage.get_text_range().replace("\r\n", "\n").replace("\r", "\n")
            pages.append(_NOT_TEXT.sub("", text))
            textpage.close()
            page.close()
        title = document.get_metadata_value("Title").strip() or None
    except pdfium.PdfiumError as exc:
        raise InputError(f"{where}: a page cannot be read ({exc})") from None
    finally:
        document.close()
    return pages, title
