"""Which files of a folder are read: ``include``/``exclude`` patterns, ignore files and a size cap.

Patterns use ``.gitignore`` syntax (pathspec's ``GitIgnoreSpec``) and are matched against a
file's path relative to the folder given: ``*.md`` matches at any depth, ``/notes/*.md`` only
at the top, ``drafts/`` a folder and everything under it, ``**/tmp/**`` any ``tmp`` folder.

Inside a folder, a ``.gitignore`` and a ``.meteoraignore`` file (same syntax) leave out what
they match in their folder and below, as git does: a deeper file's rule wins over a shallower
one, ``!pattern`` takes a file back, and a folder left out is not entered. ``.gitignore`` is
honoured because the folders people index (a project, notes kept in git) already name there
what is not theirs to read — build output, dependencies, caches; ``.meteoraignore`` is for
rules that concern the index only, and is read after ``.gitignore`` in the same folder, so it
can take a file back. Ignore files are only read inside the folders given, not above them.

A file named on its own (not found inside a folder) is always read: patterns choose among
the files a folder holds.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..fileio import MAX_INPUT_BYTES

__all__ = ["FileChoice", "IGNORE_FILES", "FolderRules"]

IGNORE_FILES = (".gitignore", ".meteoraignore")
_MAX_IGNORE_BYTES = 1 << 20


def _spec(patterns: Sequence[str], what: str) -> Any:
    try:
        from pathspec import GitIgnoreSpec
    except ImportError:  # a dependency of meteora-edge itself: only a broken install lacks it
        raise ConfigError("pathspec is not installed; reinstall meteora-edge (pip install meteora-edge)") from None
    try:
        return GitIgnoreSpec.from_lines(patterns)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{what} holds a pattern that cannot be read: {exc}") from None


@dataclass(frozen=True)
class FileChoice:
    """Which files inside the folders given are read; pass by keyword.

    Args:
        include: patterns; when any are given, only files matching one are read.
        exclude: patterns; files (and folders) matching one are left out, whatever ``include`` says.
        ignore_files: honour ``.gitignore`` and ``.meteoraignore`` files inside the folders.
        max_file_bytes: files larger than this (for gzip: once decompressed) are skipped.
    """

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    ignore_files: bool = True
    max_file_bytes: int = MAX_INPUT_BYTES

    def __post_init__(self) -> None:
        for name in ("include", "exclude"):
            value = getattr(self, name)
            if isinstance(value, str) or not all(isinstance(p, str) and p.strip() for p in value):
                raise ConfigError(f"{name} must be a list of non-empty patterns, got {value!r}")
            object.__setattr__(self, name, tuple(value))
            _spec(value, name)
        if isinstance(self.max_file_bytes, bool) or not isinstance(self.max_file_bytes, int) \
                or not 1 <= self.max_file_bytes <= MAX_INPUT_BYTES:
            raise ConfigError(f"max_file_bytes must be an integer in [1, {MAX_INPUT_BYTES}], got {self.max_file_bytes!r}")


def _ignore_lines(folder: str) -> list[tuple[str, list[str]]]:
    """The ignore files of ``folder`` that exist, as (name, lines); one that cannot be read counts as empty."""
    found = []
    for name in IGNORE_FILES:
        try:
            with open(os.path.join(folder, name), "rb") as handle:
                data = handle.read(_MAX_IGNORE_BYTES)
        except OSError:
            continue
        found.append((name, data.decode("utf-8", "replace").splitlines()))
    return found


class FolderRules:
    """The rules in force while one folder given is walked: its patterns, and the ignore files
    met on the way down (a tuple per folder, shared by its children)."""

    def __init__(self, choice: FileChoice | None) -> None:
        choice = choice or FileChoice()
        self._include = _spec(choice.include, "include") if choice.include else None
        self._exclude = _spec(choice.exclude, "exclude") if choice.exclude else None
        self._ignore_files = choice.ignore_files

    def enter(self, folder: str, relative: str, outer: tuple[tuple[str, Any], ...]) -> tuple[tuple[str, Any], ...]:
        """The ignore rules for the entries of ``folder`` (``relative``: its path under the root, ``""`` for the
        root): ``outer`` plus its own ignore files, deepest last."""
        if not self._ignore_files:
            return outer
        own = _ignore_lines(folder)
        if not own:
            return outer
        lines = [line for _, found in own for line in found]
        return (*outer, (relative, _spec(lines, f"{os.path.join(folder, own[0][0])}")))

    def wanted(self, relative: str, rules: tuple[tuple[str, Any], ...], *, folder: bool) -> bool:
        """Whether the entry at ``relative`` (a path under the root, ``/``-separated) is walked or read."""
        key = relative + "/" if folder else relative
        if self._exclude is not None and self._exclude.match_file(key):
            return False
        for base, spec in reversed(rules):  # the deepest ignore file that has a say decides
            local = key[len(base) + 1:] if base else key
            verdict = spec.check_file(local).include
            if verdict is not None:
                if verdict:
                    return False
                break
        if folder or self._include is None:
            return True
        return bool(self._include.match_file(key))
