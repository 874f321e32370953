"""Shared fakes and settings. Every test runs offline: a hub lookup must fail fast."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


class TableEncoder:
    """Embeds each text to a fixed vector from a table (unknown texts raise KeyError)."""

    def __init__(self, table: dict[str, Sequence[float]]) -> None:
        self.table = {k: np.asarray(v, dtype=np.float32) for k, v in table.items()}
        self.calls: list[list[str]] = []

    def encode(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return np.stack([self.table[t] for t in texts])


class FlakyModelError(RuntimeError):
    """Raised by a fake model to prove model errors propagate."""


@pytest.fixture
def table_encoder() -> type[TableEncoder]:
    return TableEncoder


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test gets its own HOME so no user configuration or cache leaks in."""
    monkeypatch.setenv("HOME", str(tmp_path_factory.mktemp("home")))
    monkeypatch.delenv("METEORA_EDGE_BUNDLE", raising=False)
