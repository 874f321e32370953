"""The one error hierarchy of meteora-edge.

Every message says what failed, the offending value and the fix; the CLI turns any
:class:`MeteoraError` into a one-line message and a non-zero exit code.
"""

from __future__ import annotations

__all__ = [
    "MeteoraError",
    "InputError",
    "ConfigError",
    "BundleError",
    "ModelError",
    "LocalIndexError",
    "CollectionError",
    "MissingExtraError",
    "Cancelled",
]


class MeteoraError(Exception):
    """Base class of every error meteora-edge raises on purpose."""


class InputError(MeteoraError, ValueError):
    """Caller data is malformed: a missing file, bad JSON, an empty text, a wrong type."""


class ConfigError(MeteoraError, ValueError):
    """An option is out of range or inconsistent with another option."""


class BundleError(MeteoraError):
    """A model bundle is missing, tampered with, truncated or of an unknown format."""


class ModelError(MeteoraError):
    """A model failed at run time (load error, context overflow, unusable output)."""


class LocalIndexError(MeteoraError):
    """A local index is missing, corrupt, half-written or made by another encoder."""


class CollectionError(MeteoraError):
    """A Milvus collection (Milvus Lite or a server) is unreachable, missing, not ours or made by another encoder."""


class MissingExtraError(MeteoraError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""

    def __init__(self, module: str, extra: str) -> None:
        super().__init__(
            f"{module!r} is not installed; install it with: pip install \"meteora-edge[{extra}]\""
        )
        self.module = module
        self.extra = extra


class Cancelled(MeteoraError):
    """Work stopped at a checkpoint (between phases or batches): its deadline passed, or the server is stopping.

    Attributes:
        reason: ``"deadline"`` (it ran past its deadline), ``"queued"`` (the deadline passed before
            it started) or ``"shutdown"`` (the server is stopping).
    """

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason
