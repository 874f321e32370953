"""A request's deadline and its server's stop, checked between pipeline phases and batches.

A :class:`Deadline` is a callable: the pipeline calls it between its phases, the ONNX encoder
between its batches and the index retrieval between rationales, and it raises
:class:`~meteora_edge.errors.Cancelled` once the deadline has passed or the stop event is set.
Nothing is interrupted mid-call and no thread is killed: the work ends at its next check, so a
request stops within one batch of its deadline and a server's shutdown waits for no more than that.

Example:
    >>> deadline = Deadline(timeout=30)
    >>> deadline()  # well within 30 s: nothing happens
    >>> import threading
    >>> stop = threading.Event(); stop.set()
    >>> Deadline(timeout=None, stop=stop)()
    Traceback (most recent call last):
    ...
    meteora_edge.errors.Cancelled: the server is shutting down; send the request again once it is back
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ..errors import Cancelled, ConfigError

__all__ = ["Deadline", "Check"]

#: what the runtime takes: a callable that returns, or raises Cancelled
Check = Callable[[], None]


class Deadline:
    """Raise :class:`~meteora_edge.errors.Cancelled` when called after ``timeout`` seconds or once ``stop`` is set.

    Args:
        timeout: seconds from now (None: no deadline).
        stop: set when the server is shutting down (None: never).
        name: what the messages call the limit (the CLI's flag).

    Raises:
        ConfigError: a timeout that is not a positive number.
    """

    def __init__(self, *, timeout: float | None, stop: threading.Event | None = None,
                 name: str = "request_timeout") -> None:
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                    or not timeout > 0):
            raise ConfigError(f"{name} must be a positive number of seconds or None, got {timeout!r}")
        self.timeout, self.stop, self.name = timeout, stop, name
        self.at = None if timeout is None else time.monotonic() + timeout
        self.started = False

    def start(self) -> None:
        """The work begins (it waited for a worker until now): a deadline already past is ``queued``."""
        self._check("queued")
        self.started = True

    def __call__(self) -> None:
        self._check("deadline" if self.started else "queued")

    def _check(self, reason: str) -> None:
        if self.stop is not None and self.stop.is_set():
            raise Cancelled("the server is shutting down; send the request again once it is back", reason="shutdown")
        if self.at is not None and time.monotonic() > self.at:
            if reason == "queued":
                raise Cancelled(f"the request waited {self.timeout:g} s for a worker without starting "
                                f"({self.name}); the server is busy, retry later", reason=reason)
            raise Cancelled(f"the request ran past its deadline of {self.timeout:g} s ({self.name}) and was "
                            "stopped; send fewer chunks or raise the limit", reason=reason)
