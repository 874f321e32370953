"""The index under kill -9, concurrent writers, readers during rebuilds, a full disk and a
read-only folder: it always loads and holds the old or the new version, never a mix."""

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from meteora_edge import HashingEncoder
from meteora_edge.cli.main import main
from meteora_edge.errors import LocalIndexError
from meteora_edge.index.corpus import SourceDocument
from meteora_edge.index.local_index import LocalIndex

FORMAT1 = Path(__file__).parent / "data" / "format1_index"
BASE = [SourceDocument(f"base{i}", f"base document {i} about topic {i % 7}", {}) for i in range(40)]
CLI = [sys.executable, "-m", "meteora_edge.cli.main"]

# Runs one write in a fresh interpreter and SIGKILLs itself right after its n-th file-system
# step (fsync, replace, mkdir, unlink, rmdir, rmtree); n = 0 runs to the end and prints the steps.
STEP_KILLER = textwrap.dedent(
    """
    import json, os, shutil, signal, sys
    op, root, kill_at = sys.argv[1], sys.argv[2], int(sys.argv[3])
    steps = []

    def hooked(name, fn):
        def call(*args, **kwargs):
            out = fn(*args, **kwargs)
            steps.append(name)
            if len(steps) == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            return out
        return call

    for name in ("fsync", "replace", "mkdir", "unlink", "rmdir"):
        setattr(os, name, hooked(name, getattr(os, name)))
    shutil.rmtree = hooked("rmtree", shutil.rmtree)
    from meteora_edge import HashingEncoder
    from meteora_edge.index.corpus import SourceDocument
    from meteora_edge.index.local_index import LocalIndex
    new = [SourceDocument(f"new{i}", f"new document {i} about topic {i % 5}", {}) for i in range(30)]
    if op in ("add", "migrate"):
        LocalIndex.load(root).add(new, HashingEncoder())
    else:
        LocalIndex.build(root, new, HashingEncoder(), overwrite=(op == "rebuild"))
    print(json.dumps(steps))
    """
)


def _state(root: Path):
    """The records of the index at root, or None when it holds no index; anything else fails the test."""
    try:
        index = LocalIndex.load(root)
    except LocalIndexError as exc:
        assert "holds no index" in str(exc) or "not found" in str(exc), exc
        return None
    return [(r["source"], r["text"]) for r in index.records(range(len(index)))]


def _template(op: str, folder: Path) -> Path:
    root = folder / "ix"
    folder.mkdir()
    if op == "migrate":
        shutil.copytree(FORMAT1, root)
    elif op != "first-build":
        LocalIndex.build(root, BASE, HashingEncoder())
    return root


def _run_killer(op: str, root: Path, kill_at: int) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", STEP_KILLER, op, str(root), str(kill_at)], capture_output=True,
                          text=True, timeout=120)


def _only_one_version_left(root: Path) -> None:
    """The next write removes whatever killed writers left."""
    if _state(root) is None:
        LocalIndex.build(root, BASE[:2], HashingEncoder())
    index = LocalIndex.load(root).add(BASE[:1], HashingEncoder(), allow_duplicates=True)  # a write, even of known text
    assert sorted(p.name for p in root.iterdir()) == [".writer.lock", index.generation, "manifest.json"]


@pytest.mark.parametrize("op, every_step", [
    ("add", False),
    pytest.param("add", True, marks=pytest.mark.slow),
    pytest.param("rebuild", True, marks=pytest.mark.slow),
    pytest.param("migrate", True, marks=pytest.mark.slow),
    pytest.param("first-build", True, marks=pytest.mark.slow),
])
def test_kill_9_after_any_step_leaves_the_old_or_the_new_index(tmp_path, op, every_step):
    template = _template(op, tmp_path / "template")
    old = _state(template)
    probe = tmp_path / "probe"
    shutil.copytree(template.parent, probe)
    finished = _run_killer(op, probe / "ix", 0)
    assert finished.returncode == 0, finished.stderr
    steps = json.loads(finished.stdout)
    new = _state(probe / "ix")
    assert new not in (None, old)
    switch = steps.index("replace") + 1
    chosen = range(1, len(steps) + 1) if every_step else sorted({1, switch - 1, switch, switch + 1, len(steps)})
    seen = set()
    for kill_at in chosen:
        work = tmp_path / f"kill-{kill_at}"
        shutil.copytree(template.parent, work)
        proc = _run_killer(op, work / "ix", kill_at)
        assert proc.returncode == -signal.SIGKILL, (kill_at, proc.stderr)
        state = _state(work / "ix")
        assert state in (old, new), f"killed after step {kill_at} ({steps[kill_at - 1]}): a third state"
        seen.add("new" if state == new else "old")
        _only_one_version_left(work / "ix")
        shutil.rmtree(work)
    assert seen == {"old", "new"}  # the kills landed on both sides of the switch


# Adds (and now and then rebuilds) in a loop, saying which write it starts; killed at a random moment.
WRITE_LOOP = textwrap.dedent(
    """
    import sys
    from meteora_edge import HashingEncoder
    from meteora_edge.index.corpus import SourceDocument
    from meteora_edge.index.local_index import LocalIndex
    root, base_n = sys.argv[1], int(sys.argv[2])
    enc = HashingEncoder()
    base = [SourceDocument(f"base{i}", f"base document {i} about topic {i % 7}", {}) for i in range(base_n)]
    done = []
    print("ready", flush=True)
    for i in range(10_000):
        doc = SourceDocument(f"op{i}", f"written by operation {i}", {})
        print(f"begin {i}", flush=True)
        if i % 4 == 3:
            LocalIndex.build(root, base + done + [doc], enc, overwrite=True)
        else:
            LocalIndex.load(root).add([doc], enc)
        done.append(doc)
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_kill_9_at_a_random_moment_of_a_write_loop(tmp_path, seed):
    base_n = 3000  # each write moves a few MB, so kills land inside writes as well as between them
    base = [SourceDocument(f"base{i}", f"base document {i} about topic {i % 7}", {}) for i in range(base_n)]
    root = tmp_path / "ix"
    LocalIndex.build(root, base, HashingEncoder())
    proc = subprocess.Popen([sys.executable, "-c", WRITE_LOOP, str(root), str(base_n)], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(random.Random(seed).uniform(0.05, 1.5))
    proc.send_signal(signal.SIGKILL)
    lines = proc.communicate()[0].split()
    started = int(lines[-1]) if "begin" in lines else -1
    state = LocalIndex.load(root)
    sources = [r["source"] for r in state.records(range(len(state)))]
    written = [f"op{i}" for i in range(started + 1)]
    assert sources in ([d.source_id for d in base] + written[:-1], [d.source_id for d in base] + written)
    _only_one_version_left(root)


@pytest.mark.slow
@pytest.mark.parametrize("round_", range(3))
def test_two_index_add_processes_at_once_both_land(tmp_path, round_):
    root = tmp_path / "ix"
    LocalIndex.build(root, BASE, HashingEncoder())
    inputs = []
    for name in ("left", "right"):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps({"id": f"{name}{i}", "text": f"{name} text number {i}"}) + "\n"
                                for i in range(1500)))
        inputs.append(path)
    procs = [subprocess.Popen([*CLI, "index", "add", str(root), str(p)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for p in inputs]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    final = LocalIndex.load(root, encoder=HashingEncoder())
    records = final.records(range(len(final)))
    sources = sorted(r["source"] for r in records)
    assert sources == sorted([d.source_id for d in BASE] + [f"{n}{i}" for n in ("left", "right") for i in range(1500)])
    assert [r["id"] for r in records] == list(range(len(final)))
    assert all("added 1,500 chunks" in err for _, err in outputs)


# Rebuilds the index over and over, alternating two corpora that share no marker word.
REBUILD_LOOP = textwrap.dedent(
    """
    import sys
    from meteora_edge import HashingEncoder
    from meteora_edge.index.corpus import SourceDocument
    from meteora_edge.index.local_index import LocalIndex
    root, rounds = sys.argv[1], int(sys.argv[2])
    for r in range(rounds):
        marker = "alpha" if r % 2 else "beta"
        docs = [SourceDocument(f"{marker}{i}", f"{marker} clause {i}: notice of termination within {i} days",
                               {}) for i in range(400)]
        LocalIndex.build(root, docs, HashingEncoder(), chunk_size=12, overlap=0, overwrite=True)
    """
)


@pytest.mark.slow
def test_select_during_rebuilds_always_reads_one_whole_version(tmp_path):
    root = tmp_path / "ix"
    docs = [SourceDocument(f"alpha{i}", f"alpha clause {i}: notice of termination within {i} days", {})
            for i in range(400)]
    LocalIndex.build(root, docs, HashingEncoder(), chunk_size=12, overlap=0)
    writer = subprocess.Popen([sys.executable, "-c", REBUILD_LOOP, str(root), "40"])
    seen = set()
    runs = 0
    try:
        while writer.poll() is None or runs < 5:
            result = CliRunner().invoke(main, ["select", "--index", str(root), "-q", "notice of termination days",
                                               "--t-max", "80", "--compact"])
            assert result.exit_code == 0, result.output
            passages = json.loads(result.stdout)["passages"]
            markers = {p["text"].split()[0] for p in passages}
            assert passages and len(markers) == 1 and markers <= {"alpha", "beta"}, passages
            seen |= markers
            runs += 1
    finally:
        writer.wait(timeout=120)
    assert writer.returncode == 0
    assert seen == {"alpha", "beta"}, f"only {seen} in {runs} reads: the reads did not overlap the rebuilds"


# ----------------------------------------------------------------------------- full disk
@pytest.fixture
def small_tmpfs(tmp_path):
    """A 1 MiB tmpfs (needs root or CAP_SYS_ADMIN); skipped, with the reason, where mounting is impossible."""
    mount_point = tmp_path / "tmpfs"
    mount_point.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command here, so no small tmpfs to fill")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0755", "tmpfs", str(mount_point)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): {proc.stderr.strip()}")
    yield mount_point
    subprocess.run(["umount", "-l", str(mount_point)], check=True)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120)


def _big_input(folder: Path) -> Path:
    path = folder / "big.jsonl"
    path.write_text("".join(json.dumps({"id": f"big{i}", "text": f"filler text {i}"}) + "\n" for i in range(2000)))
    return path


def _one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode == 1, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip() and not line.startswith("embedding")]  # progress lines
    assert len(lines) == 1 and lines[0].startswith("Error: "), proc.stderr
    assert "Traceback" not in proc.stderr and all(n in lines[0] for n in needles), lines[0]


def test_a_full_disk_fails_add_and_rebuild_in_one_line_and_keeps_the_index(tmp_path, small_tmpfs):
    root = small_tmpfs / "ix"
    LocalIndex.build(root, BASE, HashingEncoder())
    before = _state(root)
    listing = sorted(p.name for p in root.iterdir())
    big = _big_input(tmp_path)
    attempts = (["index", "add", str(root), str(big)], ["index", "build", str(big), "--out", str(root), "--overwrite"])
    for args in attempts:
        _one_line_error(_cli(*args), "No space left on device", "unchanged")
        assert _state(root) == before
        assert sorted(p.name for p in root.iterdir()) == listing  # the half-written generation is gone
    small = LocalIndex.load(root).add(BASE[:1], HashingEncoder(), allow_duplicates=True)
    assert len(small) == len(BASE) + 1  # room enough for a small one


def test_a_full_disk_fails_a_first_build_and_leaves_no_index(tmp_path, small_tmpfs):
    root = small_tmpfs / "ix"
    _one_line_error(_cli("index", "build", str(_big_input(tmp_path)), "--out", str(root)), "No space left on device")
    assert _state(root) is None
    # the vectors are spooled before the writer lock is taken: a disk too small for them fails the
    # build before the folder is made; a later failure leaves only the lock (the folder counts as free)
    assert not root.exists() or sorted(p.name for p in root.iterdir()) == [".writer.lock"]
    assert len(LocalIndex.build(root, BASE, HashingEncoder())) == len(BASE)


def test_a_read_only_index_fails_writes_in_one_line_and_still_loads(tmp_path, small_tmpfs):
    root = small_tmpfs / "ix"
    LocalIndex.build(root, BASE, HashingEncoder())
    before = _state(root)
    subprocess.run(["mount", "-o", "remount,ro", str(small_tmpfs)], check=True)
    extra = tmp_path / "extra.txt"
    extra.write_text("one more clause")
    _one_line_error(_cli("index", "add", str(root), str(extra)), "Read-only file system")
    _one_line_error(_cli("index", "build", str(extra), "--out", str(root), "--overwrite"), "Read-only file system")
    _one_line_error(_cli("index", "build", str(extra), "--out", str(small_tmpfs / "new")), "Read-only file system")
    assert _state(root) == before
    info = _cli("index", "info", str(root))
    assert info.returncode == 0 and json.loads(info.stdout)["chunks"] == len(BASE)


def test_overwrite_of_a_home_folder_is_refused_by_the_cli(tmp_path):
    home = tmp_path / "home"
    (home / "Documents").mkdir(parents=True)
    (home / "Documents" / "thesis.md").write_text("years of work")
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_ed25519").write_text("secret")
    source = tmp_path / "doc.txt"
    source.write_text("Either party may terminate the agreement.")
    result = CliRunner().invoke(main, ["index", "build", str(source), "--out", str(home), "--overwrite"])
    assert result.exit_code == 1 and result.output.count("\n") == 1, result.output
    assert "not a meteora-edge index" in result.output and "refusing to touch it" in result.output
    assert (home / "Documents" / "thesis.md").read_text() == "years of work"
    assert sorted(p.name for p in home.iterdir()) == [".ssh", "Documents"]
    result = CliRunner().invoke(main, ["index", "build", str(source), "--out", str(source), "--overwrite"])
    assert result.exit_code == 1 and "is not a folder" in result.output
    assert source.read_text() == "Either party may terminate the agreement."
