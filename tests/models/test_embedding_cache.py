"""The persistent embedding cache: exact round trips, never trusting a bad entry, a size bound,
several processes at once, and the ONNX encoder reading from it instead of running the model."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from meteora_edge.errors import ConfigError
from meteora_edge.models.embedding_cache import (
    CACHE_FILE,
    EmbeddingCache,
    default_cache,
    default_cache_dir,
    text_digest,
)

KEY = "encoder-a"


def vectors(n: int, dim: int = 8, seed: int = 0) -> dict[bytes, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {text_digest(f"text {seed}-{i}"): rng.normal(size=dim).astype(np.float32) for i in range(n)}


def rows(cache: EmbeddingCache, sql: str, *args: object) -> list[tuple]:
    with sqlite3.connect(cache.path) as conn:
        return conn.execute(sql, args).fetchall()


def test_round_trip_is_exact_and_missing_keys_are_absent(tmp_path):
    cache = EmbeddingCache(tmp_path)
    stored = vectors(5)
    cache.store(KEY, stored)
    wanted = [*stored, text_digest("never stored")]
    got = cache.lookup(KEY, wanted, dimension=8)
    assert set(got) == set(stored)
    for digest, vector in stored.items():
        assert got[digest].dtype == np.float32 and np.array_equal(got[digest], vector)
    assert cache.lookup("encoder-b", list(stored), dimension=8) == {}  # keyed by encoder too
    assert cache.lookup(KEY, list(stored), dimension=16) == {}  # another size is not this encoder's
    assert cache.stats()["entries"] == 5 and cache.stats()["state"] == "ok"


def test_a_tampered_entry_is_ignored(tmp_path):
    cache = EmbeddingCache(tmp_path)
    stored = vectors(3)
    cache.store(KEY, stored)
    victim, other = list(stored)[:2]
    flipped = bytearray(stored[victim].tobytes())
    flipped[0] ^= 0xFF
    with sqlite3.connect(cache.path) as conn:
        conn.execute("UPDATE vectors_v1 SET vector = ? WHERE digest = ?", (bytes(flipped), victim))
        # a row copied from another encoder (same bytes, other key) fails its checksum too
        conn.execute("INSERT INTO vectors_v1 SELECT 'encoder-b', digest, dimension, vector, checksum, last_used "
                     "FROM vectors_v1 WHERE digest = ?", (other,))
    got = cache.lookup(KEY, list(stored), dimension=8)
    assert victim not in got and len(got) == 2
    assert cache.lookup("encoder-b", [other], dimension=8) == {}


def test_non_finite_vectors_are_never_stored(tmp_path):
    cache = EmbeddingCache(tmp_path)
    cache.store(KEY, {text_digest("nan"): np.array([np.nan, 1.0], dtype=np.float32)})
    assert cache.lookup(KEY, [text_digest("nan")], dimension=2) == {}


def test_a_file_that_is_not_a_database_is_replaced(tmp_path):
    (tmp_path / CACHE_FILE).write_bytes(b"definitely not sqlite " * 100)
    cache = EmbeddingCache(tmp_path)
    stored = vectors(2)
    cache.store(KEY, stored)
    assert set(cache.lookup(KEY, list(stored), dimension=8)) == set(stored)


def test_an_unusable_folder_costs_only_speed(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    cache = EmbeddingCache(blocker / "cache")  # cannot create a folder under a file
    cache.store(KEY, vectors(2))
    assert cache.lookup(KEY, list(vectors(2)), dimension=8) == {}
    assert cache.stats()["entries"] == 0


def test_size_is_bounded_and_the_least_recently_used_go_first(tmp_path):
    cache = EmbeddingCache(tmp_path, max_bytes=300_000)
    first = vectors(40, dim=384, seed=1)
    keep = list(first)[:5]
    cache.store(KEY, first)
    for seed in range(2, 9):
        with sqlite3.connect(cache.path) as conn:  # two minutes pass (use times are in microseconds)
            conn.execute("UPDATE vectors_v1 SET last_used = last_used - 120000000")
        assert len(cache.lookup(KEY, keep, dimension=384)) == 5  # used again: their time is refreshed
        cache.store(KEY, vectors(40, dim=384, seed=seed))
        conn = sqlite3.connect(cache.path)
        assert cache._used_bytes(conn) <= cache.max_bytes
        conn.close()
    survivors = cache.lookup(KEY, list(first), dimension=384)
    assert set(keep) <= set(survivors) and len(survivors) < len(first)
    assert 0 < cache.stats()["entries"] < 8 * 40


def test_bad_settings(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="max_bytes must be an integer of at least 65536"):
        EmbeddingCache(tmp_path, max_bytes=10)
    with pytest.raises(ConfigError, match="timeout must be a positive number"):
        EmbeddingCache(tmp_path, timeout=0)
    monkeypatch.setenv("METEORA_EDGE_CACHE_MAX_MB", "lots")
    with pytest.raises(ConfigError, match="METEORA_EDGE_CACHE_MAX_MB='lots' is not a number"):
        default_cache()


def test_where_the_default_cache_lives(tmp_path, monkeypatch):
    home = Path.home()
    assert default_cache_dir() == home / ".cache" / "meteora-edge"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "meteora-edge"
    monkeypatch.setenv("METEORA_EDGE_CACHE", str(tmp_path / "mine"))
    assert default_cache_dir() == tmp_path / "mine"
    monkeypatch.setenv("METEORA_EDGE_CACHE_MAX_MB", "32")
    cache = default_cache()
    assert cache is not None and cache.folder == tmp_path / "mine" and cache.max_bytes == 32 * 2**20
    assert default_cache() is cache  # one per folder and process
    monkeypatch.setenv("METEORA_EDGE_CACHE", "off")
    assert default_cache_dir() is None and default_cache() is None


def test_several_processes_write_and_read_at_once(tmp_path):
    worker = textwrap.dedent(f"""
        import sys
        import numpy as np
        from meteora_edge.models.embedding_cache import EmbeddingCache, text_digest
        cache = EmbeddingCache({str(tmp_path)!r}, timeout=30)
        me = int(sys.argv[1])
        for round in range(20):
            batch = {{text_digest(f"shared {{i}}"): np.full(16, i, dtype=np.float32) for i in range(round * 5, round * 5 + 10)}}
            batch.update({{text_digest(f"own {{me}} {{round}}"): np.full(16, -me, dtype=np.float32)}})
            cache.store("k", batch)
            got = cache.lookup("k", list(batch), dimension=16)
            assert len(got) == len(batch), (round, len(got))
    """)
    procs = [subprocess.Popen([sys.executable, "-c", worker, str(n)], stderr=subprocess.PIPE, text=True)
             for n in range(3)]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    cache = EmbeddingCache(tmp_path)
    shared = cache.lookup("k", [text_digest(f"shared {i}") for i in range(105)], dimension=16)
    assert len(shared) == 105
    assert all(np.all(v == i) for i, v in enumerate(shared[text_digest(f"shared {i}")] for i in range(105)))
    assert rows(cache, "PRAGMA journal_mode") == [("wal",)]


# -- privacy: the vectors are derived from the user's documents --------------------------------

def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_a_new_cache_is_private_whatever_the_umask(tmp_path):
    import os

    old = os.umask(0o022)
    try:
        cache = EmbeddingCache(tmp_path / "fresh")
        cache.store(KEY, vectors(3))
    finally:
        os.umask(old)
    assert _mode(cache.folder) == 0o700
    files = [p for p in cache.folder.iterdir()]
    assert cache.path in files and {p.name for p in files} <= {CACHE_FILE, CACHE_FILE + "-wal", CACHE_FILE + "-shm"}
    assert all(_mode(p) == 0o600 for p in files), {p.name: oct(_mode(p)) for p in files}


def test_looser_modes_found_on_open_are_tightened(tmp_path):
    folder = tmp_path / "loose"
    EmbeddingCache(folder).store(KEY, vectors(2))
    folder.chmod(0o755)
    (folder / CACHE_FILE).chmod(0o644)
    cache = EmbeddingCache(folder)
    assert len(cache.lookup(KEY, list(vectors(2)), dimension=8)) == 2  # still readable by its owner
    assert _mode(folder) == 0o700 and _mode(folder / CACHE_FILE) == 0o600
    assert cache.stats()["permissions"][CACHE_FILE] == "0600"


def test_a_symlinked_cache_file_is_not_followed(tmp_path):
    folder = tmp_path / "c"
    folder.mkdir(mode=0o700)
    target = tmp_path / "elsewhere.db"
    (folder / CACHE_FILE).symlink_to(target)
    cache = EmbeddingCache(folder)
    cache.store(KEY, vectors(2))
    assert not target.exists()  # nothing written through the link
    assert cache.lookup(KEY, list(vectors(2)), dimension=8) == {}


def test_a_folder_of_another_user_is_not_used(tmp_path):
    import os

    if os.getuid() != 0:
        pytest.skip("needs root to give a folder to another user")
    folder = tmp_path / "theirs"
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    os.chown(folder, 65534, 65534)
    cache = EmbeddingCache(folder)
    cache.store(KEY, vectors(2))
    assert not (folder / CACHE_FILE).exists() and _mode(folder) == 0o777


def test_clear_empties_the_cache_and_reports_what_it_deleted(tmp_path):
    cache = EmbeddingCache(tmp_path / "c")
    cache.store(KEY, vectors(7, dim=384))
    before = cache.stats()
    assert before["entries"] == 7 and before["disk_mb"] > 0
    assert cache.clear() == 7
    assert cache.stats()["entries"] == 0 and cache.lookup(KEY, list(vectors(7, dim=384)), dimension=384) == {}


def test_the_environment_asks_for_the_cache_only_by_a_folder_or_on(monkeypatch, tmp_path):
    from meteora_edge.models.embedding_cache import cache_wanted_by_env

    monkeypatch.delenv("METEORA_EDGE_CACHE", raising=False)
    assert not cache_wanted_by_env()
    for value, wanted in (("off", False), ("0", False), ("on", True), ("1", True), (str(tmp_path), True)):
        monkeypatch.setenv("METEORA_EDGE_CACHE", value)
        assert cache_wanted_by_env() is wanted, value
    monkeypatch.setenv("METEORA_EDGE_CACHE", "on")
    assert default_cache_dir() == Path.home() / ".cache" / "meteora-edge"
