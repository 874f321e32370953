"""Progress of long CLI work on stderr: a bar on a terminal, rate-limited lines elsewhere, or JSON events.

``--progress text`` (the default) draws click's bar when stderr is a terminal and otherwise
prints a line at most every :data:`INTERVAL` seconds (and one at the end), so a log or a
pipe shows signs of life; ``--progress json`` prints one JSON event per line
(``{"event": "progress", "stage": …, "done": n, "total": m, "elapsed_s": s, "per_s": rate}``) at the same rate, for apps;
``--progress none`` prints nothing.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click

__all__ = ["INTERVAL", "PROGRESS_MODES", "progress_option", "LineProgress", "progress_reporter"]

INTERVAL = 2.0
PROGRESS_MODES = ("text", "json", "none")

progress_option = click.option(
    "--progress", "progress_mode", type=click.Choice(PROGRESS_MODES), default="text", show_default=True,
    envvar="METEORA_EDGE_PROGRESS",
    help="Progress on stderr: text (a bar on a terminal, else a line every 2 s), json (one "
         '{"event": "progress", "stage", "done", "total"} object a line) or none (env METEORA_EDGE_PROGRESS).',
)


class LineProgress:
    """(done, total) callbacks turned into rate-limited lines: text or JSON events.

    Args:
        stage: what is being done (``embedding``).
        unit: what is counted, for text lines (``chunks``).
        as_json: print JSON events instead of text.
        write: where a line goes.
        clock: seconds, monotonic (tests pass a fake).
        interval: least seconds between two lines (the first and the last are always printed).
    """

    def __init__(self, stage: str, unit: str, *, as_json: bool, write: Callable[[str], None],
                 clock: Callable[[], float] = time.monotonic, interval: float = INTERVAL) -> None:
        self.stage, self.unit, self.as_json = stage, unit, as_json
        self._write, self._clock, self._interval = write, clock, interval
        self._start = clock()
        self._last: float | None = None
        self._state: tuple[int, int] | None = None
        self._shown: tuple[int, int] | None = None

    def __call__(self, done: int, total: int) -> None:
        self._state = (done, total)
        now = self._clock()
        if self._last is None or now - self._last >= self._interval or (done >= total and total > 0):
            self._emit(now)

    def finish(self) -> None:
        """Print the last state if it was not printed yet."""
        if self._state is not None and self._state != self._shown:
            self._emit(self._clock())

    def _emit(self, now: float) -> None:
        assert self._state is not None
        done, total = self._state
        self._last, self._shown = now, self._state
        elapsed = max(now - self._start, 1e-9)
        if self.as_json:
            event: dict[str, Any] = {"event": "progress", "stage": self.stage, "done": done, "total": total,
                                     "elapsed_s": round(elapsed, 3), "per_s": round(done / elapsed, 2)}
            self._write(json.dumps(event))
            return
        share = f" ({100 * done / total:.0f} %)" if total else ""
        self._write(f"{self.stage}: {done}/{total} {self.unit}{share}, {done / elapsed:.1f} {self.unit}/s")


@contextmanager
def progress_reporter(mode: str, stage: str, unit: str) -> Iterator[Callable[[int, int], None]]:
    """A (done, total) callback for ``mode`` (see :data:`PROGRESS_MODES`), closed on exit."""
    if mode == "none":
        yield lambda done, total: None
        return
    if mode == "text" and sys.stderr.isatty():
        with _bar(stage) as update:
            yield update
        return
    reporter = LineProgress(stage, unit, as_json=mode == "json", write=lambda line: click.echo(line, err=True))
    try:
        yield reporter
    finally:
        reporter.finish()


@contextmanager
def _bar(label: str) -> Iterator[Callable[[int, int], None]]:
    """A click progress bar on stderr, driven by (done, total) callbacks."""
    bar = None
    shown = 0
    try:
        def update(done: int, total: int) -> None:
            nonlocal bar, shown
            if bar is None:
                bar = click.progressbar(length=total, label=label, file=sys.stderr, show_pos=True)
                bar.__enter__()
            bar.update(done - shown)
            shown = done

        yield update
    finally:
        if bar is not None:
            bar.__exit__(None, None, None)
