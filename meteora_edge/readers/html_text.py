"""HTML to text with selectolax (the Lexbor HTML5 parser): the words a reader sees, no markup.

What a page shows but a passage should not hold is removed first: scripts, styles,
templates, inline SVG and forms' option lists, and navigation — ``<nav>``, elements with
``role="navigation"``, and the navigation bars of the two generators most documentation on
disk comes from (DocBook's ``navheader``/``navfooter``, Sphinx's ``related`` and
``sphinxsidebar``). Block elements end a line, so paragraphs, headings, list items and table
rows stay apart; runs of spaces inside a line become one. The ``<title>`` is returned beside
the text, for the document's metadata.
"""

from __future__ import annotations

import re

from ..errors import InputError, MissingExtraError

__all__ = ["html_text"]

_DROP = ("script, style, noscript, template, svg, select, iframe, object, nav, [role=navigation], "
         ".navheader, .navfooter, div.related, div.sphinxsidebar")
_BLOCKS = ("p, div, br, hr, li, dt, dd, tr, th, td, h1, h2, h3, h4, h5, h6, pre, blockquote, section, article, "
           "main, aside, header, footer, table, ul, ol, dl, figure, figcaption, caption, address, details, summary")
_SPACES = re.compile(r"[ \t\r\f\v\u00a0]+")
_LINE_BREAKS = re.compile(r"\n{2,}")


def _parser(text: str):  # type: ignore[no-untyped-def]
    try:
        from selectolax.lexbor import LexborHTMLParser
    except ImportError:
        raise MissingExtraError("selectolax", "documents") from None
    return LexborHTMLParser(text)


def tidy_lines(text: str) -> str:
    """One space between words inside each line, no blank lines, no space at a line's ends."""
    lines = (_SPACES.sub(" ", line).strip() for line in text.split("\n"))
    return _LINE_BREAKS.sub("\n", "\n".join(lines)).strip()


def html_text(markup: str, where: str) -> tuple[str, str | None]:
    """The visible text of an HTML page, and its title.

    Args:
        markup: the page, decoded.
        where: how messages name the file.

    Returns:
        ``(text, title or None)``; the text is empty when the page shows no words.

    Raises:
        MissingExtraError: selectolax is not installed (``pip install "meteora-edge[documents]"``).
        InputError: the parser refused the page.

    Example:
        >>> html_text("<title>T</title><nav>Home</nav><p>One <b>two</b></p><script>x()</script><p>Three</p>", "a.html")
        ('One two\\nThree', 'T')
    """
    tree = _parser(markup)
    try:
        title_node = tree.css_first("title")
        title = " ".join(title_node.text().split()) if title_node is not None else ""
        for node in tree.css(_DROP):
            node.decompose()
        for node in tree.css(_BLOCKS):
            node.insert_after("\n")
        root = tree.body if tree.body is not None else tree.root
        text = root.text(deep=True) if root is not None else ""
    except Exception as exc:  # selectolax raises its own errors (SelectolaxError, ValueError) on pathological input
        raise InputError(f"{where} cannot be read as HTML ({exc})") from None
    return tidy_lines(text), title or None
