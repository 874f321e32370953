"""Assertions shared by the CLI tests: a failure is exactly one ``Error: …`` line, exit code 1."""

from __future__ import annotations

from typing import Any


def one_line_error(result: Any, *needles: str) -> str:
    """Assert a CliRunner result failed with one ``Error:`` line holding every needle; return it."""
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]
