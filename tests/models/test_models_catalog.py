"""The shipped catalog is well formed, and the weights of installed model packages match it."""

from __future__ import annotations

import hashlib
import json

import pytest

from meteora_edge.models.catalog import load_catalog, locate_part
from repo_paths import CATALOG as CATALOG_PATH

CATALOG = json.loads(CATALOG_PATH.read_text())
ENTRIES = CATALOG["models"]


def test_catalog_shape():
    assert CATALOG["format"] == "meteora-edge-model-catalog" and CATALOG["format_version"] == 2
    for entry in ENTRIES:
        assert entry["role"] in ("encoder", "sparse_encoder", "cross_encoder", "llm")
        assert {"name", "id", "install", "licence", "default", "weights"} <= set(entry)
        assert ("parts" in entry) != ("package" in entry and "module" in entry)
        assert "--no-deps" in entry["install"]
    assert sorted(e["role"] for e in ENTRIES if e["default"]) == ["encoder", "llm"]
    assert len(load_catalog()) == len(ENTRIES)  # the loader accepts every entry


@pytest.mark.parametrize("entry", load_catalog(), ids=lambda e: e.name)
def test_installed_parts_match_the_catalog(entry):
    located = [(part, locate_part(part)) for part in entry.parts]
    present = [(part, path) for part, path in located if path is not None]
    if not present:
        pytest.skip(f"no package of {entry.name} is installed ({entry.parts[0].requirement} …)")
    for part, path in present:
        assert path.stat().st_size == part.size
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        assert digest.hexdigest() == part.sha256, part.requirement
