"""The bundle an index was built with: recorded at build time, used again by later commands.

``index build --bundle B`` records B's absolute path and the sha256 of its ``manifest.json``
under the index manifest's ``encoder.bundle``. A later command over the index that is given
no bundle uses that one (:func:`remembered_bundle`), after checking it is still there and
unchanged; a bundle given explicitly still wins, and is checked against the index's encoder
identity as before.

Example:
    >>> bundle_record(None) is None
    True
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import LocalIndexError
from ..models.bundle import MANIFEST_NAME, sha256_file

__all__ = ["bundle_record", "remembered_bundle"]


def bundle_record(bundle: str | os.PathLike[str] | None) -> dict[str, str] | None:
    """``{"path": absolute path, "manifest_sha256": …}`` of a bundle folder, or None without one.

    Raises:
        LocalIndexError: the folder has no readable manifest.
    """
    if bundle is None:
        return None
    root = Path(bundle).resolve()
    try:
        digest = sha256_file(root / MANIFEST_NAME)
    except OSError as exc:
        raise LocalIndexError(f"cannot record bundle {root}: {exc.strerror or exc}") from None
    return {"path": str(root), "manifest_sha256": digest}


def remembered_bundle(manifest: Mapping[str, Any], where: object) -> str | None:
    """The bundle folder an index manifest recorded, checked; None when it recorded none.

    Args:
        manifest: the index's manifest (its ``encoder`` entry is read).
        where: names the index in messages.

    Raises:
        LocalIndexError: the recorded bundle is gone, or its manifest changed since the build.
    """
    record = manifest.get("encoder", {}).get("bundle")
    if not record:
        return None
    root = Path(record["path"])
    fix = "give --bundle with the bundle that built it, or rebuild the index"
    try:
        digest = sha256_file(root / MANIFEST_NAME)
    except OSError:
        raise LocalIndexError(f"index {where} was built with bundle {root}, which is gone; {fix}") from None
    if digest != record["manifest_sha256"]:
        raise LocalIndexError(f"index {where} was built with bundle {root}, whose manifest changed since "
                              f"(sha256 {digest[:12]}…, recorded {record['manifest_sha256'][:12]}…); {fix}")
    return str(root)
