"""kill -9 during a sync leaves the old or the new state, never a mix, and the next sync finishes the job."""

import signal
import subprocess
import sys
import textwrap

import pytest

from meteora_edge import HashingEncoder
from meteora_edge.index.corpus import read_documents
from meteora_edge.index.local_index import LocalIndex

ENC = HashingEncoder()

# the child syncs and kills itself (SIGKILL: no cleanup runs) at one point of the write
CHILD = textwrap.dedent("""
    import os, signal, sys
    from meteora_edge import HashingEncoder
    from meteora_edge.index import generations
    from meteora_edge.index.local_index import LocalIndex

    root, notes, point = sys.argv[1:]
    die = lambda: os.kill(os.getpid(), signal.SIGKILL)
    if point == "mid-write":  # the delta is written, the source table not yet
        real = generations.GenerationWriter.write_bytes
        def write_bytes(self, name, data):
            if name == "sources.json":
                die()
            return real(self, name, data)
        generations.GenerationWriter.write_bytes = write_bytes
    elif point in ("before-switch", "after-switch"):
        real_publish = generations._publish
        def publish(root_, generation):
            if point == "before-switch":
                die()
            real_publish(root_, generation)
            die()
        generations._publish = publish
    LocalIndex.load(root).sync([notes], HashingEncoder())
""")


def _texts(index):
    return sorted(r["text"] for r in index.records(index.live_ids()))


@pytest.mark.parametrize("point,switched", [("mid-write", False), ("before-switch", False), ("after-switch", True)])
def test_kill_9_during_sync_leaves_the_old_or_the_new_state(tmp_path, point, switched):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "terms.md").write_text("Either party may terminate on ninety (90) days notice.")
    (notes / "fees.md").write_text("Fees are payable monthly.")
    root = tmp_path / "ix"
    old = _texts(LocalIndex.build(root, read_documents([notes]), ENC, chunk_size=5, overlap=0))
    (notes / "terms.md").write_text("Either party may terminate on fourteen days notice.")
    (notes / "new.md").write_text("Notices are given in writing.")
    new = _texts(LocalIndex.build(tmp_path / "expected", read_documents([notes]), ENC, chunk_size=5, overlap=0))
    child = subprocess.run([sys.executable, "-c", CHILD, str(root), str(notes), point], capture_output=True)
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()[-2000:]
    after = LocalIndex.load(root, encoder=ENC)  # verified: every file's sha256
    assert _texts(after) == (new if switched else old)
    finished = after.sync([notes], ENC)
    assert _texts(finished) == new
    generations = [p.name for p in root.iterdir() if p.name.startswith("gen-")]
    if switched:  # the new state was live already: nothing to write (the superseded one goes with the next write)
        assert finished.generation == after.generation and finished.generation in generations
    else:
        assert generations == [finished.generation]  # the killed writer's half-written generation is gone
