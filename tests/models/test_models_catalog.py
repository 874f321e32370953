"""models/catalog.json is well formed, and the weights of installed model packages match it."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

import pytest

from repo_paths import CATALOG as CATALOG_PATH

CATALOG = json.loads(CATALOG_PATH.read_text())
ENTRIES = CATALOG["models"]


def test_catalog_shape():
    assert CATALOG["format"] == "meteora-edge-model-catalog" and CATALOG["format_version"] == 1
    for entry in ENTRIES:
        assert entry["role"] in ("encoder", "cross_encoder", "llm")
        assert {"id", "package", "install", "module", "licence", "default"} <= set(entry)
        assert "--no-deps" in entry["install"]
    assert sorted(e["role"] for e in ENTRIES if e["default"]) == ["encoder", "llm"]


@pytest.mark.parametrize("entry", [e for e in ENTRIES if "weights" in e], ids=lambda e: e["module"])
def test_installed_weights_match_the_catalog(entry):
    spec = importlib.util.find_spec(entry["module"])  # located, never imported
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"{entry['package']} is not installed ({entry['install']})")
    path = Path(list(spec.submodule_search_locations)[0]) / entry["weights"]["path"]
    assert path.stat().st_size == entry["weights"]["size"]
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    assert digest.hexdigest() == entry["weights"]["sha256"]
