"""GGUF files checked before llama.cpp sees them, and their metadata read without llama.cpp.

llama.cpp may abort the whole process on some malformed inputs, so :func:`check_gguf`
looks at the magic bytes, the version and the header counts first, and
:func:`read_gguf_metadata` walks the key/value section in pure Python (arrays are skipped,
only their length is kept). :func:`check_gguf_complete` also walks the tensor infos
(shape, type, offset) and refuses a file shorter than the data they declare, as llama.cpp
would only find out when loading. All are used by the runtime, ``models verify`` and
``export llm --gguf``, which must work without torch and without llama-cpp-python.
"""

from __future__ import annotations

import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from ..errors import ModelError

__all__ = ["GGUF_MAGIC", "GgufLayout", "check_gguf", "check_gguf_complete", "read_gguf_layout", "read_gguf_metadata",
           "quant_name", "context_length", "kv_cache_bytes", "licence_of"]

GGUF_MAGIC = b"GGUF"
_HEADER = struct.Struct("<4sIQQ")  # magic, version, tensor count, key/value count
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
_MAX_COUNT = 10_000_000
_MAX_DIMS = 4
_MAX_NESTING = 8  # arrays of arrays: llama.cpp reads none; deeper would walk Python's stack
_DEFAULT_ALIGNMENT = 32
# ggml tensor types: id -> (elements per block, bytes per block), as the GGUF format defines them
_BLOCKS = {
    0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34), 9: (32, 36),
    10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 15: (256, 292),
    16: (256, 66), 17: (256, 74), 18: (256, 98), 19: (256, 50), 20: (32, 18), 21: (256, 110), 22: (256, 82),
    23: (256, 136), 24: (1, 1), 25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8), 29: (256, 56), 30: (1, 2),
    34: (256, 54), 35: (256, 66), 39: (32, 17), 40: (64, 36), 41: (128, 18), 42: (64, 18),
}

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
    if not stat.S_ISREG(p.stat().st_mode):
        raise ModelError(f"{p} is not a regular file (a device, FIFO or socket); give the .gguf file")
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

    def value(self, kind: int, depth: int = 0) -> Any:
        if kind in _SCALARS:
            return self.scalar(kind)
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            if depth >= _MAX_NESTING:
                raise _corrupt(self.path, f"metadata arrays nested more than {_MAX_NESTING} deep")
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
                    self.value(item_kind, depth + 1)
            return {"array_of": item_kind, "length": count}
        raise _corrupt(self.path, f"unknown metadata value type {kind}")


@dataclass(frozen=True)
class GgufLayout:
    """What a GGUF header declares: its metadata, tensors and the file size they need.

    Attributes:
        metadata: the key/value section (arrays reduced to ``{"array_of", "length"}``).
        tensors: how many tensors the header describes.
        data_offset: where the tensor data starts (after the header, aligned).
        required_size: the smallest file size that holds every declared tensor.
        file_size: the file's actual size.
    """

    metadata: dict[str, Any]
    tensors: int
    data_offset: int
    required_size: int
    file_size: int


def _tensor_end(reader: _Reader, alignment: int) -> tuple[int, int]:
    """Read one tensor info; return (offset of its data, offset one past its data)."""
    name = reader.string()
    (n_dims,) = struct.unpack("<I", reader.take(4))
    if not 1 <= n_dims <= _MAX_DIMS:
        raise _corrupt(reader.path, f"tensor {name[:60]!r} has {n_dims} dimensions")
    dims = struct.unpack(f"<{n_dims}Q", reader.take(8 * n_dims))
    kind, offset = struct.unpack("<IQ", reader.take(12))
    if kind not in _BLOCKS:
        raise _corrupt(reader.path, f"tensor {name[:60]!r} has an unknown type {kind}")
    per_block, block_bytes = _BLOCKS[kind]
    elements = 1
    for dim in dims:
        elements *= dim
    if dims[0] % per_block or offset % alignment:
        raise _corrupt(reader.path, f"tensor {name[:60]!r} has a shape or offset its type does not allow")
    return offset, offset + elements // per_block * block_bytes


def read_gguf_layout(path: str | os.PathLike[str]) -> GgufLayout:
    """Walk the whole GGUF header: metadata, then every tensor's shape, type and offset.

    Raises:
        ModelError: the file fails :func:`check_gguf`, or its header is truncated or corrupt.
    """
    p = check_gguf(path)
    size = p.stat().st_size
    with open(p, "rb") as handle:
        _, _, n_tensors, n_kv = _HEADER.unpack(handle.read(_HEADER.size))
        reader = _Reader(handle, p, size)
        metadata: dict[str, Any] = {}
        for _ in range(n_kv):
            key = reader.string()
            (kind,) = struct.unpack("<I", reader.take(4))
            metadata[key] = reader.value(kind)
        alignment = metadata.get("general.alignment", _DEFAULT_ALIGNMENT)
        if not isinstance(alignment, int) or alignment < 1 or alignment & (alignment - 1):
            raise _corrupt(p, f"general.alignment is {alignment!r}, not a power of two")
        end = 0
        for _ in range(n_tensors):
            end = max(end, _tensor_end(reader, alignment)[1])
        header_end = handle.tell()
    data_offset = -(-header_end // alignment) * alignment
    return GgufLayout(metadata, n_tensors, data_offset, data_offset + end, size)


def check_gguf_complete(path: str | os.PathLike[str]) -> GgufLayout:
    """Refuse a GGUF file that is shorter than the tensor data its header declares.

    Returns:
        The layout.

    Raises:
        ModelError: naming the bytes declared and present (a truncated copy or download).
    """
    layout = read_gguf_layout(path)
    if layout.file_size < layout.required_size:
        raise ModelError(
            f"{path} is truncated: its header declares {layout.tensors} tensors ending at byte "
            f"{layout.required_size}, but the file has {layout.file_size} bytes; re-copy or re-download it"
        )
    return layout


def read_gguf_metadata(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The key/value metadata of a GGUF file (arrays reduced to ``{"array_of", "length"}``).

    Raises:
        ModelError: the file fails :func:`check_gguf` or its header is truncated or corrupt.
    """
    return read_gguf_layout(path).metadata


def quant_name(metadata: dict[str, Any]) -> str:
    """``general.file_type`` as a name (``Q4_K_M``, ``Q8_0``, ``F16`` …), or ``"unknown"``."""
    file_type = metadata.get("general.file_type")
    return _FILE_TYPES.get(file_type, f"type-{file_type}") if isinstance(file_type, int) else "unknown"


def context_length(metadata: dict[str, Any]) -> int | None:
    """The training context length (``<architecture>.context_length``), when recorded."""
    arch = metadata.get("general.architecture")
    value = metadata.get(f"{arch}.context_length") if isinstance(arch, str) else None
    return int(value) if isinstance(value, int) and value > 0 else None


def kv_cache_bytes(metadata: dict[str, Any], context_size: int) -> int | None:
    """Bytes llama.cpp's f16 KV cache takes for ``context_size`` tokens, from the header; None if unknown."""
    arch = metadata.get("general.architecture")
    if not isinstance(arch, str):
        return None

    def number(key: str, default: int | None = None) -> int | None:
        value = metadata.get(f"{arch}.{key}", default)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default

    layers, width, heads = number("block_count"), number("embedding_length"), number("attention.head_count")
    if layers is None or width is None or heads is None:
        return None
    kv_heads = number("attention.head_count_kv", heads) or heads
    key = number("attention.key_length", width // heads) or 1
    value = number("attention.value_length", width // heads) or 1
    return 2 * context_size * layers * kv_heads * (key + value)


def licence_of(metadata: dict[str, Any]) -> str:
    """``general.license`` when recorded, else ``""``."""
    value = metadata.get("general.license")
    return value if isinstance(value, str) else ""
