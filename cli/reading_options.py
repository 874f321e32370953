"""The options that choose which files ``index build|add|sync`` read, and the report of what was skipped.

By default the skipped files are one summary line (``skipped 1,204 files: 1,100 binary, 104
over --max-file-size``; a single skipped file is named in it), and the lines of JSON Lines
files left out are named up to ten; ``--verbose`` lists every one.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import click

from meteora_edge.fileio import MAX_INPUT_BYTES
from meteora_edge.index.corpus_walk import path_label
from meteora_edge.index.file_choice import FileChoice
from meteora_edge.index.skips import TOO_LARGE, SkipTally

__all__ = ["file_choice_options", "file_choice", "SkipReport"]

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]?)(?:i?b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
_NAMED_LINES = 10


class ByteSize(click.ParamType):
    """A size in bytes: ``5000000``, ``512K``, ``20M``, ``1G`` (powers of 1024; ``MB``/``MiB`` alike)."""

    name = "SIZE"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        match = _SIZE.match(str(value))
        if not match:
            self.fail(f"{value!r} is not a size; write e.g. 20M, 512K or 1G", param, ctx)
        size = int(float(match.group(1)) * _UNITS[match.group(2).lower()])
        if not 1 <= size <= MAX_INPUT_BYTES:
            self.fail(f"{value!r} must be between 1 byte and {MAX_INPUT_BYTES >> 20} MiB", param, ctx)
        return size


_OPTIONS = (
    click.option("--include", "include", multiple=True, metavar="GLOB",
                 help="Inside folders, read only files matching this .gitignore-style pattern (repeatable), "
                      "e.g. '*.md' or 'docs/**/*.html'."),
    click.option("--exclude", "exclude", multiple=True, metavar="GLOB",
                 help="Inside folders, leave out files and folders matching this pattern (repeatable), "
                      "e.g. 'drafts/' or '*.log'."),
    click.option("--no-ignore-files", "no_ignore_files", is_flag=True,
                 help="Read what .gitignore and .meteoraignore files inside the folders leave out."),
    click.option("--max-file-size", "max_file_size", type=ByteSize(), default=None,
                 help=f"Skip files larger than this (gzip: once decompressed), e.g. 20M [{MAX_INPUT_BYTES >> 20}M]."),
    click.option("--verbose", "-v", "verbose", is_flag=True, help="List every skipped file and line with its reason."),
)


def file_choice_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add --include, --exclude, --no-ignore-files, --max-file-size and --verbose to a command."""
    for option in reversed(_OPTIONS):
        command = option(command)
    return command


def file_choice(include: tuple[str, ...], exclude: tuple[str, ...], no_ignore_files: bool,
                max_file_size: int | None) -> FileChoice:
    """The library's file choice for the options given."""
    return FileChoice(include=include, exclude=exclude, ignore_files=not no_ignore_files,
                      max_file_bytes=max_file_size or MAX_INPUT_BYTES)


def _verbose(flag: bool) -> bool:
    """The command's --verbose, or meteora-edge's own -v before the command."""
    ctx = click.get_current_context(silent=True)
    return flag or bool(ctx is not None and ctx.find_root().params.get("verbose"))


class SkipReport:
    """The ``on_skip`` handler of a command that reads files: it counts, and prints at the end."""

    def __init__(self, verbose: bool) -> None:
        self.tally = SkipTally()
        self.verbose = _verbose(verbose)

    def __call__(self, path: Any, reason: str) -> None:
        self.tally(path, reason)
        if self.verbose:
            click.echo(f"warning: skipped {path_label(path)}: {reason}", err=True)

    def __len__(self) -> int:
        return len(self.tally)

    def print_summary(self) -> None:
        """A single skipped file and the first bad lines by name, then one line counting them all by reason
        (when it says more than the names did)."""
        files, lines = self.tally.files, self.tally.lines
        named = 0
        if not self.verbose:
            shown = lines[:_NAMED_LINES] + (files if len(files) == 1 else [])
            for path, reason in shown:
                click.echo(f"warning: skipped {path_label(path)}: {reason}", err=True)
            named = len(shown)
        summary = self.tally.summary()
        if summary is None or (not self.verbose and named == len(files) + len(lines)):
            return
        summary = summary.replace(TOO_LARGE, "over --max-file-size")
        click.echo(f"warning: {summary}" + ("" if self.verbose else " (--verbose lists them)"), err=True)
