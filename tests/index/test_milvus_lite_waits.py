"""Milvus Lite lets one process open a database: a second process waits for it (and says so once),
then opens it; past the wait it fails in one line that names the way out (a Milvus server URI)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")

from click.testing import CliRunner  # noqa: E402

from meteora_edge.cli.main import main  # noqa: E402
from meteora_edge.errors import CollectionError  # noqa: E402
from meteora_edge.index.milvus_location import connect, lite_in_use, milvus_location  # noqa: E402

HOLD = """
import sys, time
from pymilvus import MilvusClient
client = MilvusClient(uri=sys.argv[1])
print("holding", flush=True)
time.sleep(float(sys.argv[2]))
client.close()
"""


def _hold(path, seconds: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path), str(seconds)], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    assert proc.stdout.readline().strip() == b"holding"
    return proc


@pytest.fixture
def built(tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "terms.md").write_text("Either party may terminate the agreement on ninety days notice.")
    location = milvus_location(str(tmp_path / "notes.db"))
    # built in a child process: Milvus Lite keeps a database open in the process that opened it
    subprocess.run([sys.executable, "-m", "meteora_edge", "index", "build", str(notes), "--backend", "milvus",
                    "--uri", location.uri], check=True, capture_output=True, timeout=120)
    return notes, location


def test_a_second_process_waits_for_the_database_and_then_opens_it(built, caplog):
    notes, location = built
    holder = _hold(location.uri, 3)
    try:
        assert lite_in_use(location.uri)
        started = time.monotonic()
        client = connect(location, wait=30)
        waited = time.monotonic() - started
        client.close()
    finally:
        holder.wait(timeout=30)
    assert 1.5 < waited < 25  # (this process holds it now: Milvus Lite keeps it open until the process ends)
    assert [r.message for r in caplog.records if "waiting up to 30 s" in r.message] == [
        f"waiting up to 30 s for the Milvus Lite database {location.uri}: another process has it open "
        "(Milvus Lite lets one process open a database)"]


def test_past_the_wait_it_fails_in_one_line_naming_the_way_out(built):
    notes, location = built
    holder = _hold(location.uri, 30)
    try:
        started = time.monotonic()
        with pytest.raises(CollectionError, match=r"another process has kept the Milvus Lite database .* open for "
                                                  r"1 s .*use a Milvus server \(--uri http://HOST:19530\)"):
            connect(location, wait=1)
        assert time.monotonic() - started < 10
        env = {**os.environ, "METEORA_EDGE_LOCK_TIMEOUT": "1"}
        result = CliRunner(env=env).invoke(main, ["index", "sync", f"milvus://{location.uri}", str(notes)])
        assert result.exit_code == 1 and "Traceback" not in result.output
        assert result.output.strip().splitlines()[-1].startswith(
            f"Error: another process has kept the Milvus Lite database {location.uri} open for 1 s")
    finally:
        holder.kill()
        holder.wait()
