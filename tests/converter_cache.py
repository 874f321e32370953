"""llama.cpp's HF→GGUF converter for the slow tier, from the cache that scripts/setup-dev.sh fills.

The tests themselves never download: with ``METEORA_EDGE_OFFLINE_TESTS=1`` (set by
``scripts/test.sh``, so in CI) a missing cache is an error that says to run the set-up script;
without it (a developer running pytest by hand) the converter is fetched into the same cache once.
"""

from __future__ import annotations

import os
from pathlib import Path

from meteora_edge.export.llm import converter_cache_dir, fetch_converter

# resolved at import, before the per-test HOME of conftest.py hides the real cache
CACHE = converter_cache_dir()


class ConverterNotCached(RuntimeError):
    """The converter is not in the cache and the tests may not download it."""


def cached_converter(cache: Path = CACHE) -> Path:
    """The cached converter folder; fetched only when offline tests are not demanded.

    Raises:
        ConverterNotCached: the cache is empty and ``METEORA_EDGE_OFFLINE_TESTS=1``.
    """
    if (cache / ".complete").is_file():
        return fetch_converter(cache)  # checks the folder, downloads nothing
    if os.environ.get("METEORA_EDGE_OFFLINE_TESTS") == "1":
        raise ConverterNotCached(
            f"llama.cpp's converter is not cached at {cache}; run scripts/setup-dev.sh (the tests never download)"
        )
    return fetch_converter(cache)
