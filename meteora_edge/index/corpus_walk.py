"""Finding the files to read under the paths given: folders walked in sorted order, any depth.

Inside a folder, hidden files and folders (``.git``, ``.DS_Store``) and what the
:class:`~meteora_edge.index.file_choice.FileChoice` leaves out (patterns, ignore files) are
passed over silently. Reported with their reason (a
:class:`~meteora_edge.index.skips.SkipReason`): a FIFO, socket or device, a link to a folder,
a broken link, a link to a file outside the folders given (unless ``follow_links``), an
index folder, and a name known to be binary. Every other file is yielded, to be judged by its
reader. Folders are walked with a stack, so any depth works.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..fileio import STDIN, STDIN_LABEL, is_stdin
from ..readers import kind_by_name
from .file_choice import FileChoice, FolderRules
from .skips import BINARY, INDEX_FOLDER, LINK, SPECIAL, UNREADABLE, UNSUPPORTED, SkipReason

__all__ = ["path_label", "is_index_folder", "expand_paths", "Found", "SkipHandler"]

SkipHandler = Callable[[Path, str], None]
#: a file found, with its ``lstat`` when that is also its ``stat`` (a regular file, not a link)
Found = tuple["Path | str", "os.stat_result | None"]


def path_label(path: str | os.PathLike[str]) -> str:
    """The path as valid UTF-8 text: bytes of a non-UTF-8 file name appear as ``\\xNN``; the string ``-`` is ``<stdin>``.

    Example:
        >>> path_label(os.fsdecode(b"notes/caf\\xe9.txt"))
        'notes/caf\\\\xe9.txt'
    """
    if is_stdin(path):
        return STDIN_LABEL
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _kind(mode: int) -> str | None:
    """What a non-regular, non-folder file is, for skip reasons (None: a regular file or a folder)."""
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return None


def _inside(target: str, roots: Sequence[str]) -> bool:
    return any(target == root or target.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def _link_reason(found: Path, roots: Sequence[str], follow_links: bool) -> SkipReason | None:
    """Why the symlink ``found`` is skipped, or None to read the file it points to."""
    try:
        target = os.path.realpath(found, strict=True)
        mode = os.stat(found).st_mode
    except FileNotFoundError:
        return SkipReason("a broken link", LINK)
    except OSError as exc:
        return SkipReason(f"a link that cannot be followed ({exc.strerror or exc})", LINK)
    if stat.S_ISDIR(mode):
        return SkipReason("a link to a folder (links to folders are not followed; give the folder itself to index it)",
                          LINK)
    kind = _kind(mode)
    if kind:
        return SkipReason(f"a link to {kind}, not a file", SPECIAL)
    if not follow_links and not _inside(target, roots):
        return SkipReason(f"a link to {path_label(target)}, outside the folders being indexed (--follow-links indexes "
                          "it)", LINK)
    return None


_INDEX_FOLDER = SkipReason("a meteora-edge index folder (index folders are never read as input)", INDEX_FOLDER)


def is_index_folder(folder: Path) -> bool:
    """Whether ``folder`` is (or is a generation of) a meteora-edge index: its ``manifest.json`` says
    so, or it carries a generation's marker file. Such folders are never read as input."""
    for name in ("manifest.json", ".meteora-edge-generation"):
        try:
            with open(folder / name, "rb") as handle:
                head = handle.read(4096)
        except OSError:
            continue
        if b'"meteora-edge-index"' in head:
            return True
    return False


def _child(folder: str, name: str) -> str:
    """``folder / name`` as pathlib spells it (``.`` / ``a.md`` is ``a.md``), without building a Path per file."""
    return name if folder == "." else os.path.join(folder, name)


def _children(folder: str, relative: str, skip: SkipHandler) -> Iterator[tuple[str, str]]:
    """The entries of ``folder`` that are not hidden, sorted by name, as (path, path under the root);
    a folder that cannot be read is skipped."""
    try:
        names = sorted(os.listdir(folder))
    except FileNotFoundError:
        skip(Path(folder), SkipReason("the folder vanished while it was read", UNREADABLE))
        return iter(())
    except OSError as exc:
        skip(Path(folder), SkipReason(f"cannot read the folder ({exc.strerror or exc})", UNREADABLE))
        return iter(())
    prefix = relative + "/" if relative else ""
    return iter([(_child(folder, name), prefix + name) for name in names if not name.startswith(".")])


def _name_reason(found: str) -> SkipReason | None:
    """Why a file is skipped by its name alone (an image, an archive, a format not read), or None."""
    kind = kind_by_name(os.path.basename(found))
    if kind == "binary":
        return SkipReason("binary, not text", BINARY)
    if kind == "unsupported":
        return SkipReason(f"'{os.path.splitext(found)[1]}' files are not read; save it as .docx, .pdf, .html or "
                          "text to index it", UNSUPPORTED)
    return None


def _walk(folder: Path, skip: SkipHandler, follow_links: bool, choice: FileChoice | None) -> Iterator[Found]:
    """The files under ``folder`` in sorted path order, walked with a stack (any depth), reporting
    every entry that is not a file to read. Paths are strings until reported."""
    roots = [os.path.realpath(folder)]
    rules = FolderRules(choice)
    top = rules.enter(str(folder), "", ())
    # the folder given may itself be a link: it is followed
    stack: list[tuple[Iterator[tuple[str, str]], Any]] = [(_children(str(folder), "", skip), top)]
    while stack:
        entries, ignores = stack[-1]
        found, relative = next(entries, (None, ""))
        if found is None:
            stack.pop()
            continue
        try:
            info: os.stat_result | None = os.lstat(found)
        except FileNotFoundError:
            skip(Path(found), SkipReason("it vanished while the folder was read", UNREADABLE))
            continue
        except OSError as exc:
            skip(Path(found), SkipReason(f"cannot read it ({exc.strerror or exc})", UNREADABLE))
            continue
        assert info is not None
        mode = info.st_mode
        if stat.S_ISDIR(mode):
            if not rules.wanted(relative, ignores, folder=True):
                continue
            if is_index_folder(Path(found)):
                skip(Path(found), _INDEX_FOLDER)
            else:
                stack.append((_children(found, relative, skip), rules.enter(found, relative, ignores)))
            continue
        if not rules.wanted(relative, ignores, folder=False):
            continue
        if stat.S_ISLNK(mode):
            reason, info = _link_reason(Path(found), roots, follow_links), None
        else:
            kind = _kind(mode)
            reason = SkipReason(f"{kind}, not a file", SPECIAL) if kind else None
        reason = reason or _name_reason(found)
        if reason:
            skip(Path(found), reason)
        else:
            yield found, info


def expand_paths(paths: Sequence[str | os.PathLike[str]], skip: SkipHandler, follow_links: bool,
                 choice: FileChoice | None = None) -> Iterator[Found]:
    """Every file to read under ``paths``: folders walked, named files as they are, ``-`` for standard input.

    Raises:
        InputError: a named path is missing, or ``-`` is given twice.
    """
    if sum(is_stdin(raw) for raw in paths) > 1:
        raise InputError("standard input (-) can be read once; give - a single time")
    for raw in paths:
        if is_stdin(raw):
            yield STDIN, None
            continue
        path = Path(raw)
        if path.is_dir() and is_index_folder(path):
            skip(path, _INDEX_FOLDER)
        elif path.is_dir():
            yield from _walk(path, skip, follow_links, choice)
        elif path.exists():
            yield path, None  # a file named on purpose is read whatever its name: its reader judges it
        else:
            raise InputError(f"file not found: {path}")
