"""Hostile inputs and environments end in one ``Error:`` line (or just work), never a traceback.

Lone surrogates, 4300+-digit JSON integers, devices and FIFOs as input files, a terminal that
is not Unicode, tokenizers without an unknown token, and outputs on a full or read-only disk.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli_checks import one_line_error
from meteora_edge.cli.main import main
from meteora_edge.errors import InputError
from meteora_edge.fileio import read_text_file

from repo_paths import EXAMPLES

CLI = [sys.executable, "-m", "meteora_edge.cli.main"]
SURROGATE_JSON = '[{"text": "either party may terminate \\ud800 now"}, {"text": "fees are due monthly"}]'
HUGE_INT = "9" * 5000


def run(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.fixture
def surrogate_chunks(tmp_path: Path) -> Path:
    path = tmp_path / "chunks.json"
    path.write_text(SURROGATE_JSON)
    return path


# -- lone surrogates ------------------------------------------------------------------------------

@pytest.mark.parametrize("extra", [[], ["--compact"], ["--table"], ["-o", "OUT"], ["--table", "-o", "OUT"]],
                         ids=["json", "compact", "table", "output", "table-output"])
def test_a_lone_surrogate_in_a_chunk_is_one_line_and_writes_nothing(surrogate_chunks, tmp_path, extra):
    out = tmp_path / "out.json"
    args = [str(out) if a == "OUT" else a for a in extra]
    one_line_error(run("select", "--chunks", str(surrogate_chunks), "-q", "who may terminate", *args),
                   "position 0", "lone surrogate")
    assert not out.exists()


def test_a_lone_surrogate_in_an_indexed_document_is_one_line(surrogate_chunks, tmp_path):
    one_line_error(run("index", "build", str(surrogate_chunks), "--out", str(tmp_path / "ix"), "--strict"),
                   "lone surrogate")
    assert not (tmp_path / "ix").exists()


def test_lone_surrogates_from_arguments_are_one_line(tmp_path):
    chunks = str(EXAMPLES / "contract_clauses.json")
    one_line_error(run("select", "--chunks", chunks, "-q", "terminate \udcff"), "--query", "lone surrogate")
    one_line_error(run("select", "--chunks", chunks, "--rationale", "notice \udcff period"), "rationale 1")


def test_the_onnx_tokenizer_refuses_a_lone_surrogate_in_one_line(tmp_path):
    pytest.importorskip("onnxruntime")
    from tiny_onnx import make_bundle

    from meteora_edge import OnnxEncoder

    bundle = make_bundle(tmp_path / "b")
    with pytest.raises(InputError, match="text 1 holds .* lone surrogate"):
        OnnxEncoder.from_bundle(bundle, precision="fp32").encode(["fees are due", "notice \ud800"])
    chunks = tmp_path / "c.json"
    chunks.write_text(SURROGATE_JSON)
    one_line_error(run("select", "--chunks", str(chunks), "-q", "fees", "--bundle", str(bundle)), "lone surrogate")


# -- JSON integers beyond Python's 4300-digit conversion limit ----------------------------------

def test_huge_json_integers_are_one_line(tmp_path):
    chunks = tmp_path / "chunks.json"
    chunks.write_text(f'[{{"text": "fees are due", "n": {HUGE_INT}}}]')
    one_line_error(run("select", "--chunks", str(chunks), "-q", "fees"), "4300 digits")
    jsonl = tmp_path / "chunks.jsonl"
    jsonl.write_text(f'{{"text": "a"}}\n{{"text": "b", "n": {HUGE_INT}}}\n')
    one_line_error(run("select", "--chunks", str(jsonl), "-q", "fees"), "line 2", "4300 digits")
    rationales = tmp_path / "r.json"
    rationales.write_text(f'["notice", {HUGE_INT}]')
    one_line_error(run("select", "--chunks", str(EXAMPLES / "contract_clauses.json"), "--rationales", str(rationales)),
                   "4300 digits")
    one_line_error(run("index", "build", str(chunks), "--out", str(tmp_path / "ix"), "--strict"), "4300 digits")


def test_a_bundle_manifest_with_a_huge_integer_is_one_line(tmp_path):
    (tmp_path / "manifest.json").write_text(f'{{"format": "meteora-edge-bundle", "format_version": {HUGE_INT}}}')
    one_line_error(run("models", "info", str(tmp_path)), "4300 digits")


# -- only regular files are read; the cap holds while reading ------------------------------------

@pytest.mark.parametrize("command", [["chunk"], ["select", "-q", "x", "--chunks"],
                                     ["index", "build", "--strict", "--out", "IX"]],
                         ids=["chunk", "select", "index-build"])
def test_dev_zero_and_a_fifo_are_refused_at_once(tmp_path, command):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    for source in ("/dev/zero", str(fifo)):
        args = [str(tmp_path / "ix") if a == "IX" else a for a in command] + [source]
        proc = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60)  # a hang fails here
        assert proc.returncode == 1 and proc.stdout == ""
        assert proc.stderr.strip().count("\n") == 0 and "not a regular file" in proc.stderr, proc.stderr


def test_the_size_cap_is_enforced_while_reading_not_from_stat():
    status = Path("/proc/self/status")  # a regular file whose stat size is 0
    if not status.is_file() or status.stat().st_size != 0:
        pytest.skip("needs Linux /proc")
    assert "Name:" in read_text_file(status)
    with pytest.raises(InputError, match="over the limit of 10 bytes"):
        read_text_file(status, max_bytes=10)


# -- a terminal that is not Unicode ---------------------------------------------------------------

def _latin1(*args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONIOENCODING": "latin-1"}
    return subprocess.run([*CLI, *args], capture_output=True, env=env, cwd=cwd, timeout=120)


def test_non_latin_output_works_on_a_latin1_terminal(tmp_path):
    chunks = tmp_path / "zh.json"
    chunks.write_text(json.dumps(["合同 终止 条款 🧪", "Rent is due monthly."], ensure_ascii=False), encoding="utf-8")
    as_json = _latin1("select", "--chunks", str(chunks), "-q", "终止", "--compact", cwd=tmp_path)
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout.decode("latin-1"))["passages"][0]["text"] == "合同 终止 条款 🧪"
    table = _latin1("select", "--chunks", str(chunks), "-q", "终止", "--format", "table", cwd=tmp_path)
    assert table.returncode == 0 and "query: \\u7ec8\\u6b62" in table.stdout.decode("latin-1"), table.stderr
    lines = _latin1("select", "--chunks", str(chunks), "-q", "终止", "--format", "jsonl", cwd=tmp_path)
    assert json.loads(lines.stdout.decode("latin-1").splitlines()[0])["text"] == "合同 终止 条款 🧪"
    text = tmp_path / "zh.txt"
    text.write_text("一 二 三 四 五 六", encoding="utf-8")
    chunked = _latin1("chunk", str(text), "--chunk-size", "4", cwd=tmp_path)
    assert chunked.returncode == 0, chunked.stderr
    assert [c["text"] for c in json.loads(chunked.stdout.decode("latin-1"))["chunks"]] == ["一 二 三 四", "五 六"]
    missing = _latin1("chunk", "缺失.txt", cwd=tmp_path)
    assert missing.returncode == 1 and missing.stderr.decode("latin-1").strip() == "Error: file not found: \\u7f3a\\u5931.txt"


# -- tokenizers that cannot encode every word -----------------------------------------------------

def _wordlevel_without_unk(path: Path) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel({"fees": 0, "are": 1, "due": 2}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(path))
    return path


def test_a_budget_tokenizer_without_unk_is_one_line(tmp_path):
    pytest.importorskip("tokenizers")
    tokenizer = _wordlevel_without_unk(tmp_path / "tokenizer.json")
    one_line_error(run("select", "--chunks", str(EXAMPLES / "contract_clauses.json"), "-q", "fees are due",
                       "--t-max", "50", "--tokenizer", str(tokenizer)), "outside its vocabulary", "[UNK]")


def test_a_bundle_tokenizer_without_unk_is_one_line(tmp_path):
    pytest.importorskip("onnxruntime")
    from tiny_onnx import make_bundle

    from meteora_edge.models.bundle import MANIFEST_NAME, file_entry

    bundle = make_bundle(tmp_path / "b")
    _wordlevel_without_unk(bundle / "encoder" / "tokenizer.json")
    manifest = json.loads((bundle / MANIFEST_NAME).read_text())  # hashes recomputed: the manifest is "valid"
    manifest["components"]["encoder"]["files"]["tokenizer"] = file_entry(bundle, "encoder/tokenizer.json").to_dict()
    (bundle / MANIFEST_NAME).write_text(json.dumps(manifest))
    one_line_error(run("select", "--chunks", str(EXAMPLES / "contract_clauses.json"), "-q", "fees are due",
                       "--bundle", str(bundle)), "outside its vocabulary")
    one_line_error(run("models", "verify", str(bundle)), "outside its vocabulary")


# -- outputs on a full or read-only disk ----------------------------------------------------------

def _mount_ok() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"], capture_output=True)
    return probe.returncode == 0


def _in_small_disk(tmp_path: Path, command: list[str], *, read_only: bool) -> tuple[subprocess.CompletedProcess[str], str]:
    """Run ``command`` with ``DISK`` (a one-page tmpfs filled by an old ``out.json``) in a private mount namespace."""
    disk = tmp_path / "disk"
    disk.mkdir(exist_ok=True)
    args = " ".join(f"'{a.replace('DISK', str(disk))}'" for a in command)
    script = (f"mount -t tmpfs -o size=4k tmpfs {disk} && printf old > {disk}/out.json && "
              + (f"mount -o remount,ro {disk} && " if read_only else "")
              + f"{args}; rc=$?; echo; echo '--listing--'; ls -A {disk}; cat {disk}/out.json; exit $rc")
    proc = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=300)
    return proc, proc.stdout.split("--listing--")[-1]


@pytest.fixture
def big_text(tmp_path: Path) -> Path:
    path = tmp_path / "big.txt"
    path.write_text(" ".join(f"word{i}" for i in range(40_000)))  # chunks JSON far over 64 KiB
    return path


@pytest.mark.skipif(not _mount_ok(), reason="mounting a tmpfs in a user+mount namespace is not permitted here")
@pytest.mark.parametrize("read_only", [False, True], ids=["disk-full", "read-only"])
@pytest.mark.parametrize("command", [
    ["chunk", "BIG", "-o", "DISK/out.json"],
    ["select", "--chunks", "BIGCHUNKS", "-q", "word7", "--expansion-window", "0", "-o", "DISK/out.json"],
    ["select", "--chunks", "BIGCHUNKS", "-q", "word7", "--format", "table", "-o", "DISK/out.json"],
    ["dpo-derive", "--hotpot", "HOTPOT", "--output", "DISK/out.json"],
    ["dpo-prepare", "--input", "CANDIDATES", "--output-dir", "DISK/dpo"],
    ["eval", "--data", "HOTPOT", "--method", "bm25:2", "--limit", "5", "--output", "DISK/out.json"],
    ["eval", "--data", "HOTPOT", "--method", "bm25:2", "--limit", "5", "--plot", "DISK/out.json"],
], ids=["chunk", "select", "select-table", "dpo-derive", "dpo-prepare", "eval", "eval-plot"])
def test_outputs_on_a_full_or_read_only_disk_are_one_line_and_keep_the_old_file(tmp_path, big_text, command,
                                                                                   read_only, dev_data):
    big_chunks = tmp_path / "big.json"
    big_chunks.write_text(json.dumps([f"word{i} " * 60 for i in range(300)]))
    candidates = tmp_path / "candidates.jsonl"
    derived = CliRunner().invoke(main, ["dpo-derive", "--hotpot", str(dev_data), "--limit", "40", "--output", str(candidates)])
    assert derived.exit_code == 0, derived.output
    names = {"BIG": big_text, "BIGCHUNKS": big_chunks, "HOTPOT": dev_data, "CANDIDATES": candidates}
    args = [*CLI, *[str(names.get(a, a)) for a in command]]
    proc, listing = _in_small_disk(tmp_path, args, read_only=read_only)
    assert proc.returncode == 1, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("Error")]  # progress lines aside
    assert len(errors) == 1 and errors[0].startswith("Error: cannot"), proc.stderr
    # a read-only folder is refused before any work (permission check) or when the write starts
    expected = ("Read-only file system", "permission denied") if read_only else ("No space left on device",)
    assert any(reason in errors[0] for reason in expected), errors[0]
    assert "Traceback" not in proc.stderr
    assert listing.split() == ["out.json", "old"], listing  # the old file is intact, no temporary is left


# -- an output that is an input -------------------------------------------------------------------

def _output_is_input_cases(tmp_path: Path) -> list[tuple[list[str], Path]]:
    doc = tmp_path / "contract.md"
    doc.write_text("Either party may terminate this agreement on ninety days' notice. Fees are due monthly.\n")
    chunks = tmp_path / "c.json"
    chunks.write_text(json.dumps(["Either party may terminate on notice.", "Fees are due monthly."]))
    rationales = tmp_path / "r.txt"
    rationales.write_text("termination rights\n")
    link = tmp_path / "link.json"
    link.symlink_to(chunks)
    hard = tmp_path / "hard.md"
    os.link(doc, hard)
    return [
        (["chunk", str(doc), "-o", str(doc)], doc),
        (["chunk", str(doc), "-o", str(hard)], doc),  # a hard link is the same file
        (["select", "--chunks", str(chunks), "-q", "who may terminate", "-o", str(chunks)], chunks),
        (["select", "--chunks", str(chunks), "-q", "who may terminate", "-o", str(link)], chunks),  # through a link
        (["select", "--chunks", str(link), "-q", "who may terminate", "--output", str(tmp_path / "." / "c.json")], chunks),
        (["select", "--chunks", str(chunks), "-q", "who may terminate", "--rationales", str(rationales),
          "-o", str(rationales)], rationales),
    ]


@pytest.mark.parametrize("case", range(6))
def test_an_output_that_is_an_input_is_refused_and_the_input_kept(tmp_path, case):
    args, kept = _output_is_input_cases(tmp_path)[case]
    before = kept.read_bytes()
    one_line_error(run(*args), "is the input of", "another output file")
    assert kept.read_bytes() == before


def test_eval_refuses_its_data_or_one_file_for_both_outputs(tmp_path):
    data = tmp_path / "q.jsonl"
    data.write_text(json.dumps({"query": "who may terminate", "candidates": ["a", "b"], "gold": [0]}) + "\n")
    before = data.read_bytes()
    one_line_error(run("eval", "--data", str(data), "-o", str(data)), "--output", "is the input of --data")
    assert data.read_bytes() == before
    one_line_error(run("eval", "--data", str(data), "-o", str(tmp_path / "r.json"), "--plot", str(tmp_path / "r.json")),
                   "is also --output")
