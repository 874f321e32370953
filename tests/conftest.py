"""Shared fakes and settings. Every test runs offline: a hub lookup must fail fast."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under mutmut (scripts/mutation.sh), run the quickest tests first.

    mutmut runs the tests that reach a mutant with ``-x`` in no particular order; quickest
    first, a mutant that a quick test kills costs no slow test. Normal runs keep their order.
    """
    if "__mutmut_" not in os.environ.get("MUTANT_UNDER_TEST", ""):
        return
    try:  # mutmut runs the tests from mutants/, where it keeps each test's duration
        durations = json.loads(Path("mutmut-stats.json").read_text(encoding="utf-8"))["duration_by_test"]
    except (OSError, ValueError, KeyError, TypeError):
        return
    items.sort(key=lambda item: durations.get(item.nodeid, 0.0))


@pytest.fixture
def table_encoder() -> type[TableEncoder]:
    return TableEncoder


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test gets its own HOME (so its own embedding cache) and no user configuration leaks in."""
    monkeypatch.setenv("HOME", str(tmp_path_factory.mktemp("home")))
    for var in ("METEORA_EDGE_BUNDLE", "METEORA_EDGE_CACHE", "METEORA_EDGE_CACHE_MAX_MB", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)


# -- shared heavy fixtures: a tiny random Llama and llama.cpp's converter -------------------
# (used by the LLM export tests and the DPO training test; each is built once per test run)

_TINY_WORDS = ("the a party may terminate agreement notice days written fees due monthly tenant landlord deposit "
               "return confidential information renewal term year evidence passage query judge relevant flagged").split()


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer LlamaForCausalLM (hidden 256, so k-quants apply) with a sentencepiece BPE vocabulary."""
    import random

    spm = pytest.importorskip("sentencepiece")
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    out = tmp_path_factory.mktemp("tiny-llama")
    rng = random.Random(0)
    corpus = out / "corpus.txt"
    lines = [" ".join(rng.choice(_TINY_WORDS) for _ in range(rng.randint(5, 14))) + "." for _ in range(400)]
    corpus.write_text("\n".join(lines) + '\n{"relevant": true, "flagged": false, "reason": "x"} 0123456789\n')
    spm.SentencePieceTrainer.train(
        input=str(corpus), model_prefix=str(out / "sp"), vocab_size=400, model_type="bpe", character_coverage=1.0,
        byte_fallback=True, unk_id=0, bos_id=1, eos_id=2, pad_id=-1, minloglevel=2,
    )
    tokenizer = transformers.LlamaTokenizer(vocab_file=str(out / "sp.model"), legacy=False)
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=2048,
    )
    model_dir = out / "model"
    transformers.LlamaForCausalLM(config).save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    return model_dir


@pytest.fixture(scope="session")
def converter() -> Path:
    """llama.cpp's HF→GGUF converter from the set-up cache (see tests/converter_cache.py)."""
    from converter_cache import ConverterNotCached, cached_converter

    try:
        return cached_converter()
    except ConverterNotCached as exc:
        pytest.fail(str(exc))


@pytest.fixture
def dev_data() -> Path:
    """The HotpotQA dev file beside the checkout (skips without it; fails in CI)."""
    from repo_paths import require_dev_data

    return require_dev_data()


@pytest.fixture
def contract_dev_data() -> Path:
    """The ContractNLI dev file beside the checkout (skips without it; fails in CI)."""
    from repo_paths import CONTRACT_DEV_DATA, require_dev_data

    return require_dev_data(CONTRACT_DEV_DATA)
