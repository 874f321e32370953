"""Where the tests find the repository's files and the shared dev data (never an absolute path)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
CATALOG = ROOT / "meteora_edge" / "data" / "catalog.json"
DEV_DATA = ROOT.parent / "shared" / "data" / "hotpotqa_distractor_dev50.json"
CONTRACT_DEV_DATA = ROOT.parent / "shared" / "data" / "contractnli_dev.json"


def require_dev_data(path: Path = DEV_DATA) -> Path:
    """A dev file beside the checkout (HotpotQA unless given); skip without it, fail when CI demands it.

    CI sets ``METEORA_EDGE_REQUIRE_DATA=1``, so a missing data file fails the run there
    instead of skipping silently.
    """
    if path.is_file():
        return path
    if os.environ.get("METEORA_EDGE_REQUIRE_DATA") == "1":
        pytest.fail(f"the dev data is missing: {path} (shared/ must sit beside the checkout)")
    pytest.skip(f"the dev data is not beside the checkout: {path}")
