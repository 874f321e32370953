"""Bytes to text: a byte-order mark, UTF-8, UTF-16 without a mark, then a charset detector.

The order is the one that never garbles a file that is valid in an earlier step: a BOM says
the encoding outright (and is dropped from the text); UTF-8 is tried next (a file valid as
UTF-8 is almost never anything else); UTF-16 without a BOM is recognised by its zero bytes
(``L\\x00i\\x00…``); anything else goes to charset-normalizer, with one correction: when the
Windows Western code page (cp1252, a superset of Latin-1's printable characters) reads the
bytes as cleanly as the detector's first pick, it wins, because the detector cannot tell
French in Latin-1 from Croatian in cp1250 by its measures and picks the latter.

Bytes that are not text (NUL bytes outside UTF-16, or control characters a text file does
not hold) raise :class:`NotTextError`.
"""

from __future__ import annotations

import codecs
import re

from ..errors import InputError

__all__ = ["NotTextError", "decode_text", "looks_binary", "binary_head"]

#: longest marks first: the UTF-32-LE mark starts with the UTF-16-LE one
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_SAMPLE = 8192
#: control characters text does not hold: all but tab, line feed, vertical tab, form feed, carriage return, escape
_CONTROLS = re.compile("[\x01-\x08\x0e-\x1a\x1c-\x1f]")
_WESTERN = frozenset(("cp1252", "latin_1", "iso8859_15"))


class NotTextError(InputError):
    """The bytes are not text in any encoding the reader recognises (an image, an archive, a program)."""


def _bom(data: bytes) -> tuple[str, int] | None:
    for mark, codec in _BOMS:
        if data.startswith(mark):
            return codec, len(mark)
    return None


def _utf16_without_bom(data: bytes) -> str | None:
    """``utf-16-le`` or ``utf-16-be`` when the sample's zero bytes sit on one side of each pair, as
    in mostly-ASCII text stored in UTF-16 without a byte-order mark; else None."""
    sample = data[: _SAMPLE - _SAMPLE % 2]
    pairs = len(sample) // 2
    if pairs < 2:
        return None
    even = sample[0::2].count(0) / pairs
    odd = sample[1::2].count(0) / pairs
    if odd > 0.3 and even < 0.02:
        return "utf-16-le"
    if even > 0.3 and odd < 0.02:
        return "utf-16-be"
    return None


def binary_head(head: bytes) -> bool:
    """Whether a file's first bytes already show it is not text: NUL bytes, without a byte-order
    mark or UTF-16's pattern of zeros (so a large binary file need not be read whole to be refused)."""
    return b"\x00" in head and _bom(head) is None and _utf16_without_bom(head) is None


def looks_binary(text: str) -> bool:
    """Whether decoded text holds what text files do not: a NUL, or more than 1 in 100 control characters."""
    if "\x00" in text:
        return True
    sample = text[:_SAMPLE]
    return len(_CONTROLS.findall(sample)) * 100 > len(sample)


def _detected(data: bytes) -> str | None:
    """The text charset-normalizer finds in ``data`` (cp1252 on a tie with its pick), or None."""
    try:
        from charset_normalizer import from_bytes
    except ImportError:  # a dependency of meteora-edge itself: only a broken install lacks it
        raise InputError("charset-normalizer is not installed; reinstall meteora-edge (pip install meteora-edge)") \
            from None

    matches = list(from_bytes(data))
    matches = [m for m in matches if not m.encoding.startswith(("utf_16", "utf_32"))]  # handled above, by zeros
    if not matches:
        return None
    cleanest = min(m.chaos for m in matches)
    if any(m.chaos <= cleanest + 0.01 and set(m.could_be_from_charset) & _WESTERN for m in matches):
        try:
            return data.decode("cp1252")
        except UnicodeDecodeError:  # 0x81, 0x8d, 0x8f, 0x90, 0x9d are unassigned in cp1252
            return data.decode("latin-1")
    return str(matches[0])  # the detector's own order: best first


def decode_text(data: bytes, where: str) -> str:
    """Decode a file's bytes to text, whatever its encoding, without a leading byte-order mark.

    Args:
        data: the bytes.
        where: how messages name the file.

    Returns:
        The text (empty for no bytes).

    Raises:
        NotTextError: the bytes are binary, or declare an encoding (a BOM) they do not follow.

    Example:
        >>> decode_text(b"\\xef\\xbb\\xbfcaf\\xc3\\xa9", "a.txt"), decode_text("caf\\u00e9".encode("utf-16-le"), "b.txt")
        ('café', 'café')
    """
    marked = _bom(data)
    if marked is not None:
        codec, skip = marked
        try:
            text = data[skip:].decode(codec)
        except UnicodeDecodeError as exc:
            raise NotTextError(f"{where} starts with a {codec.upper()} byte-order mark but byte {exc.start + skip} "
                               f"is not {codec.upper()}; save it again as UTF-8") from None
        if looks_binary(text):
            raise NotTextError(f"{where} is binary, not text")
        return text
    wide = _utf16_without_bom(data)
    if wide is not None:
        try:
            text = data[: len(data) - len(data) % 2].decode(wide)
        except UnicodeDecodeError:
            text = None
        if text is not None and not looks_binary(text):
            return text
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        if b"\x00" in data[:_SAMPLE]:
            raise NotTextError(f"{where} is binary, not text") from None
        text = _detected(data)
        if text is None:
            raise NotTextError(f"{where} is binary, or text in an encoding that cannot be told; "
                               "save it as UTF-8") from None
    if looks_binary(text):
        raise NotTextError(f"{where} is binary, not text")
    return text
