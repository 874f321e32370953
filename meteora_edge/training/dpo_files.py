"""Reading preference records and DPO rows, and writing the splits all or nothing."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from .dpo_data import SPLIT_FILES, SPLITS, PreparedData
from ..errors import InputError
from ..fileio import escape_line_separators, read_json_or_jsonl

__all__ = ["read_records", "read_pairs", "write_splits"]


def read_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read preference records from a JSON list, JSONL (one object a line), or an object holding
    the list under ``records`` (or METEORA's ``examples``, ``data``, ``tests``, ``results``).

    Raises:
        InputError: the file is missing, malformed, empty, or holds something other than objects.
    """
    data = read_json_or_jsonl(path)
    if isinstance(data, dict):
        key = next((k for k in ("records", "examples", "data", "tests", "results") if isinstance(data.get(k), list)), None)
        data = data[key] if key else [data]
    if not isinstance(data, list):
        raise InputError(f"{path} must hold records: JSONL, a JSON list or {{\"records\": [...]}}; got {type(data).__name__}")
    if not data:
        raise InputError(f"{path} holds no records; give at least one")
    for position, item in enumerate(data):
        if not isinstance(item, dict):
            raise InputError(f"{path}: record {position} is a {type(item).__name__}, not an object with a 'query'")
    return data


def write_splits(data: PreparedData, output_dir: str | os.PathLike[str]) -> dict[str, Path]:
    """Write ``train.jsonl``, ``validation.jsonl``, ``test.jsonl`` and ``dpo_prepare.json`` into ``output_dir``.

    Every file is first written under a temporary name; only when all are complete are they
    renamed into place, so a failure leaves no partial set.

    Returns:
        The path of every file written, by split name (and ``"summary"``).

    Raises:
        InputError: the folder cannot be created or written.
    """
    out = Path(output_dir)
    if out.exists() and not out.is_dir():
        raise InputError(f"--output-dir {out} is a file; give a folder")
    if not out.parent.is_dir():
        raise InputError(f"cannot create {out}: folder {out.parent} does not exist")
    texts = {SPLIT_FILES[name]: "".join(escape_line_separators(json.dumps(row, ensure_ascii=False)) + "\n" for row in data.splits[name]) for name in SPLITS}
    texts["dpo_prepare.json"] = json.dumps(data.summary, indent=2) + "\n"
    temporary: dict[str, str] = {}
    created = not out.exists()
    done = False
    try:
        out.mkdir(mode=0o700, exist_ok=True)  # owner-only: the pairs quote the user's documents
        for name, text in texts.items():
            fd, tmp = tempfile.mkstemp(dir=out, prefix=f".{name}.", suffix=".tmp")
            temporary[name] = tmp
            os.chmod(tmp, 0o644)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
        for name, tmp in temporary.items():
            os.replace(tmp, out / name)
        done = True
    except OSError as exc:
        raise InputError(f"cannot write {out}: {exc.strerror or exc}") from None
    except UnicodeEncodeError:
        raise InputError(f"cannot write {out}: a row holds a lone surrogate, which is not valid Unicode; "
                         "fix the input it came from") from None
    finally:
        for tmp in temporary.values():
            Path(tmp).unlink(missing_ok=True)
        if created and not done:
            with contextlib.suppress(OSError):
                out.rmdir()  # the folder this call made, now empty again
    paths = {name: out / SPLIT_FILES[name] for name in SPLITS}
    paths["summary"] = out / "dpo_prepare.json"
    return paths


def _turns(value: object) -> bool:
    return isinstance(value, list) and bool(value) and all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in value
    )


def read_pairs(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read DPO rows (as :func:`write_splits` writes them) for training.

    Each row needs ``prompt``, ``chosen`` and ``rejected``: all strings, or all chat turns
    (``[{"role", "content"}, …]``; ``chosen``/``rejected`` then hold the assistant turn).

    Returns:
        The rows, with only those three keys.

    Raises:
        InputError: the file is missing, malformed, empty, or a row lacks a key or has a wrong shape.
    """
    rows = read_records(path)
    out = []
    for number, row in enumerate(rows, start=1):
        missing = [key for key in ("prompt", "chosen", "rejected") if key not in row]
        if missing:
            raise InputError(f"{path} row {number}: missing key {missing[0]!r}; rows need prompt, chosen and rejected (see dpo-prepare)")
        values = [row["prompt"], row["chosen"], row["rejected"]]
        if not (all(isinstance(v, str) and v.strip() for v in values) or all(_turns(v) for v in values)):
            raise InputError(
                f"{path} row {number}: prompt, chosen and rejected must all be non-empty strings or all lists of "
                "{'role', 'content'} turns"
            )
        out.append({"prompt": row["prompt"], "chosen": row["chosen"], "rejected": row["rejected"]})
    return out
