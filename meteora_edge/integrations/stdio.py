"""``meteora-edge serve --stdio``: JSON lines over pipes, for apps that spawn a child process.

One ``/v1/select`` request body per line on stdin, one JSON object per line on stdout, in
the same order: ``select``'s JSON, or ``{"error": "<one line>"}`` for a line that is not a
good request (the loop goes on). Blank lines are passed over; end of input ends the loop.
Requests are answered one at a time; logs and notes go to stderr only.

Example:
    >>> import io
    >>> from meteora_edge.integrations.service import SelectService
    >>> out = io.BytesIO()
    >>> serve_stdio(SelectService(), io.BytesIO(b'{"query": "x", "chunks": ["x y"]}\\nnot json\\n'), out)
    2
    >>> [line[:40] for line in out.getvalue().decode().splitlines()]
    ['{"format": "meteora-edge.selection", "ve', '{"error": "malformed JSON: Expecting val']
"""

from __future__ import annotations

import logging
from typing import Any, BinaryIO

from ..errors import MeteoraError
from .service import SelectService, json_line, one_line

__all__ = ["serve_stdio"]

logger = logging.getLogger(__name__)

_READ = 1 << 16


def _answer(service: SelectService, line: bytes) -> dict[str, Any]:
    try:
        return service.select(line)
    except MeteoraError as exc:
        return {"error": one_line(exc)}
    except MemoryError:
        return {"error": "out of memory; send a smaller request"}
    except Exception as exc:  # the loop must go on; the full error goes to the log
        logger.exception("unexpected error while answering a line")
        return {"error": f"internal error ({type(exc).__name__}: {one_line(exc)[:200]})"}


def _skip_rest_of_line(stdin: BinaryIO) -> None:
    while True:
        piece = stdin.readline(_READ)
        if not piece or piece.endswith(b"\n"):
            return


def serve_stdio(service: SelectService, stdin: BinaryIO, stdout: BinaryIO, *, max_line_bytes: int = 16 * 2**20) -> int:
    """Answer request lines until end of input.

    Args:
        service: the loaded models and indexes.
        stdin: binary input, one JSON request per line.
        stdout: binary output; each answer is written and flushed as one line.
        max_line_bytes: a longer line is skipped and answered with an error.

    Returns:
        The number of answers written.
    """
    answered = 0
    while True:
        line = stdin.readline(max_line_bytes + 1)
        if not line:
            return answered
        if len(line) > max_line_bytes:
            if not line.endswith(b"\n"):
                _skip_rest_of_line(stdin)
            data: dict[str, Any] = {"error": f"the line has more than {max_line_bytes} bytes, the limit "
                                             "(--max-body-mb); send a smaller request"}
        elif not line.strip():
            continue
        else:
            data = _answer(service, line)
        stdout.write(json_line(data))
        stdout.flush()
        answered += 1
