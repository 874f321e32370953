"""GGUF files checked before llama.cpp sees them, and their metadata read without llama.cpp.

llama.cpp may abort the whole process on some malformed inputs, so :func:`check_gguf`
looks at the magic bytes, the version and the header counts first, and
:func:`read_gguf_metadata` walks the key/value section in pure Python (arrays are skipped,
only their length is kept). Both are used by the runtime and by ``export llm --gguf``,
which must work without torch and without llama-cpp-python.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any, BinaryIO

from ..errors import ModelError

__all__ = ["GGUF_MAGIC", "check_gguf", "read_gguf_metadata", "quant_name", "context_length", "licence_of"]

GGUF_MAGIC = b"GGUF"
_HEADER = struct.Struct("<4sIQQ")  # magic, version, tensor count, key/value count
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
_MAX_COUNT = 10_000_000

# llama_ftype values (general.file_type) → the usual quantisation names
_FILE_TYPES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
    11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S",
    17: "Q5_K_M", 18: "Q6_K", 32: "BF16",
}


def _corrupt(path: Path, what: str) -> ModelError:
    return ModelError(f"{path} is not a readable GGUF model ({what}); re-copy it or convert the model again")


def check_gguf(path: str | os.PathLike[str]) -> Path:
    """Refuse anything that is not plausibly a GGUF model file, before llama.cpp opens it.

    Args:
        path: the ``.gguf`` file.

    Returns:
        The path.

    Raises:
        ModelError: the file is missing, a directory, too small, lacks the ``GGUF`` magic
            bytes, has an unknown version or absurd header counts.
    """
    p = Path(path)
    if not p.exists():
        raise ModelError(f"GGUF model not found: {p}; give a .gguf file or a bundle with an 'llm' component")
    if p.is_dir():
        raise ModelError(f"{p} is a directory; give the .gguf file inside it")
    size = p.stat().st_size
    if size < _HEADER.size:
        raise _corrupt(p, f"only {size} bytes")
    with open(p, "rb") as handle:
        magic, version, n_tensors, n_kv = _HEADER.unpack(handle.read(_HEADER.size))
    if magic != GGUF_MAGIC:
        raise ModelError(
            f"{p} is not a GGUF file (it starts with {magic!r}, expected {GGUF_MAGIC!r}); "
            "convert the model with 'meteora-edge export llm'"
        )
    if version not in (2, 3):
        raise _corrupt(p, f"GGUF version {version}; llama.cpp reads versions 2 and 3")
    if n_tensors == 0 or n_tensors > _MAX_COUNT or n_kv > _MAX_COUNT:
        raise _corrupt(p, f"header claims {n_tensors} tensors and {n_kv} metadata keys")
    return p


class _Reader:
    def __init__(self, handle: BinaryIO, path: Path, size: int) -> None:
        self.handle, self.path, self.size = handle, path, size

    def take(self, n: int) -> bytes:
        data = self.handle.read(n)
        if len(data) != n:
            raise _corrupt(self.path, "metadata ends early: truncated")
        return data

    def scalar(self, kind: int) -> Any:
        fmt = _SCALARS[kind]
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        (length,) = struct.unpack("<Q", self.take(8))
        if length > self.size:
            raise _corrupt(self.path, f"a metadata string claims {length} bytes")
        return self.take(length).decode("utf-8", errors="replace")

    def skip_string(self) -> None:
        (length,) = struct.unpack("<Q", self.take(8))
        if length > self.size:
            raise _corrupt(self.path, f"a metadata string claims {length} bytes")
        self.handle.seek(length, os.SEEK_CUR)

    def value(self, kind: int) -> Any:
        if kind in _SCALARS:
            return self.scalar(kind)
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            item_kind, count = struct.unpack("<IQ", self.take(12))
            if count > self.size:
                raise _corrupt(self.path, f"a metadata array claims {count} items")
            if item_kind == _STRING:
                for _ in range(count):
                    self.skip_string()
            elif item_kind in _SCALARS:
                self.handle.seek(count * struct.calcsize(_SCALARS[item_kind]), os.SEEK_CUR)
            else:
                for _ in range(count):  # nested arrays: rare, walk them
                    self.value(item_kind)
            return {"array_of": item_kind, "length": count}
        raise _corrupt(self.path, f"unknown metadata value type {kind}")


def read_gguf_metadata(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The key/value metadata of a GGUF file (arrays reduced to ``{"array_of", "length"}``).

    Raises:
        ModelError: the file fails :func:`check_gguf` or its metadata is truncated or corrupt.
    """
    p = check_gguf(path)
    size = p.stat().st_size
    with open(p, "rb") as handle:
        _, _, _, n_kv = _HEADER.unpack(handle.read(_HEADER.size))
        reader = _Reader(handle, p, size)
        metadata: dict[str, Any] = {}
        for _ in range(n_kv):
            key = reader.string()
            (kind,) = struct.unpack("<I", reader.take(4))
            metadata[key] = reader.value(kind)
    return metadata


def quant_name(metadata: dict[str, Any]) -> str:
    """``general.file_type`` as a name (``Q4_K_M``, ``Q8_0``, ``F16`` …), or ``"unknown"``."""
    file_type = metadata.get("general.file_type")
    return _FILE_TYPES.get(file_type, f"type-{file_type}") if isinstance(file_type, int) else "unknown"


def context_length(metadata: dict[str, Any]) -> int | None:
    """The training context length (``<architecture>.context_length``), when recorded."""
    arch = metadata.get("general.architecture")
    value = metadata.get(f"{arch}.context_length") if isinstance(arch, str) else None
    return int(value) if isinstance(value, int) and value > 0 else None


def licence_of(metadata: dict[str, Any]) -> str:
    """``general.license`` when recorded, else ``""``."""
    value = metadata.get("general.license")
    return value if isinstance(value, str) else ""
