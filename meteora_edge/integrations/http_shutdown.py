"""The HTTP server's shutdown: running requests get the shutdown timeout, then their work is told to stop.

uvicorn, on SIGINT/SIGTERM, stops accepting, waits ``timeout_graceful_shutdown`` seconds for the
running requests and then cancels their tasks; a selection running in a worker thread does not
notice a cancelled task, so it used to run on (and the process to wait for it) while its client got
uvicorn's plain-text 500. :class:`StoppingServer` sets the app's stop event shortly before that
timeout ends: the selection's own checks (see :class:`~meteora_edge.pipeline.deadline.Deadline`)
then end it, and its client gets the app's JSON 503 in time.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import uvicorn

__all__ = ["StoppingServer", "STOP_MARGIN"]

logger = logging.getLogger(__name__)


#: seconds before the end of the shutdown timeout at which running work is told to stop, so that it
#: reaches its next check and its client gets a JSON 503 before uvicorn gives up on the connection
STOP_MARGIN = 1.0


class StoppingServer(uvicorn.Server):
    """uvicorn's server that, on SIGINT/SIGTERM, lets running requests finish within the shutdown timeout
    and sets the app's stop :data:`STOP_MARGIN` seconds before it ends (at once on a second signal):
    work still running then ends at its next check, with a JSON 503."""

    def __init__(self, config: uvicorn.Config, stop: threading.Event) -> None:
        super().__init__(config)
        self.stop = stop
        self.timer: threading.Timer | None = None
        self.signalled = False

    def handle_exit(self, sig: int, frame: Any) -> None:
        timeout = self.config.timeout_graceful_shutdown
        if self.signalled:
            self.stop.set()
        elif timeout is not None:  # (None: uvicorn waits for ever, and so does the work, until a second signal)
            grace = max(0.0, timeout - STOP_MARGIN)
            logger.warning("received signal %d: running requests get %g s to finish, then stop at their next check",
                           sig, grace)
            self.timer = threading.Timer(grace, self.stop.set)
            self.timer.daemon = True
            self.timer.start()
        self.signalled = True
        super().handle_exit(sig, frame)
