"""Where the tests find the repository's files and the shared dev data (never an absolute path)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
CATALOG = ROOT / "meteora_edge" / "data" / "catalog.json"
DEV_DATA = ROOT.parent / "shared" / "data" / "hotpotqa_distractor_dev50.json"


def require_dev_data() -> Path:
    """The HotpotQA dev file beside the checkout; skip without it, fail when CI demands it.

    CI sets ``METEORA_EDGE_REQUIRE_DATA=1``, so a missing data file fails the run there
    instead of skipping silently.
    """
    if DEV_DATA.is_file():
        return DEV_DATA
    if os.environ.get("METEORA_EDGE_REQUIRE_DATA") == "1":
        pytest.fail(f"the dev data is missing: {DEV_DATA} (shared/ must sit beside the checkout)")
    pytest.skip(f"the dev data is not beside the checkout: {DEV_DATA}")
