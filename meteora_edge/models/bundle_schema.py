"""The strict schema of a bundle manifest, as data: keys, types, ranges and required files.

A manifest passes only if every key is known and well-typed, every component has the files
its kind needs (and no others), and every setting the runtime reads is in range. The file
hashes protect the files; this protects against a manifest edited with recomputed hashes
(a setting of the wrong type, a file left out, a string where an object belongs).

Example:
    >>> validate_manifest({"format": "meteora-edge-bundle", "format_version": 1, "components": {}}, "m.json")
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from ..errors import BundleError

__all__ = ["KINDS", "KindSpec", "validate_manifest"]

Check = Callable[[Any], bool]
_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
_SHA256 = re.compile(r"[0-9a-f]{64}")


def _int(low: int, high: int) -> Check:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and low <= v <= high


def _one_of(*values: str) -> Check:
    return lambda v: v in values


def _is(*types: type) -> Check:
    return lambda v: isinstance(v, types) and not (isinstance(v, bool) and bool not in types)


_STRINGS: Check = lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v)  # noqa: E731
_OBJECT_OR_NULL: Check = lambda v: v is None or isinstance(v, dict)  # noqa: E731


def _probe(v: Any) -> bool:
    """A few texts and their fp32 embeddings (lists of numbers of one length), one per text."""
    if not isinstance(v, dict) or set(v) != {"texts", "fp32"}:
        return False
    texts, vectors = v["texts"], v["fp32"]
    if not _STRINGS(texts) or not 1 <= len(texts) <= 16 or not isinstance(vectors, list) or len(vectors) != len(texts):
        return False
    width = len(vectors[0]) if isinstance(vectors[0], list) else 0
    return 0 < width <= 65_536 and all(
        isinstance(row, list) and len(row) == width
        and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in row) for row in vectors)


@dataclass(frozen=True)
class KindSpec:
    """What one kind of component must hold.

    Args:
        required: file roles that must be present.
        any_of: at least one of these roles must be present (the model precisions).
        settings: every allowed setting → (check, what a valid value is).
    """

    required: tuple[str, ...]
    any_of: tuple[str, ...]
    settings: Mapping[str, tuple[Check, str]]

    @property
    def roles(self) -> tuple[str, ...]:
        return self.required + self.any_of


_ONNX_COMMON = {
    "max_length": (_int(2, 100_000), "a positive integer from 2 to 100000"),
    "pad_id": (_int(0, 10_000_000), "a non-negative integer"),
    "opset": (_int(1, 100), "an ONNX opset number"),
    "quantization": (_OBJECT_OR_NULL, "an object or null"),
}
KINDS: Mapping[str, KindSpec] = {
    "encoder": KindSpec(("tokenizer",), ("fp32", "int8", "int8-dot"), {
        **_ONNX_COMMON,
        "dimension": (_int(1, 65_536), "a positive integer up to 65536"),
        "pooling": (_one_of("mean", "cls"), "one of mean, cls"),
        "normalize": (_is(bool), "true or false"),
        "inputs": (_STRINGS, "a list of input names"),
        "output": (_is(str), "an output name"),
        # calibration of the cosine verification rung, and the lexical analyser queries get with this bundle
        "cosine_tau": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and -1.0 <= v <= 1.0,
                       "a number in [-1, 1]"),
        "analyzer": (_is(dict), "an analyser record (an object)"),
        # a few texts and their fp32 embeddings, so that an int8 variant is checked on the CPU it runs on
        "probe": (_probe, "an object of 'texts' (1 to 16 strings) and 'fp32' (one list of numbers per text)"),
    }),
    # a learned sparse (SPLADE) encoder: output "sparse" is log(1 + ReLU(MLM logits)) max-pooled over the tokens
    "sparse_encoder": KindSpec(("tokenizer",), ("fp32", "int8", "int8-dot"), {
        **_ONNX_COMMON,
        "dimension": (_int(1, 65_536), "a positive integer up to 65536 (the hidden size)"),
        "vocabulary": (_int(1, 10_000_000), "a positive integer (the sparse vector's length)"),
        "inputs": (_STRINGS, "a list of input names"),
        "output": (_is(str), "an output name"),
        "logits": (_is(str), "an output name"),  # recorded by bundles whose graph also output the MLM logits
    }),
    "cross_encoder": KindSpec(("tokenizer",), ("fp32", "int8"), {
        **_ONNX_COMMON,
        "score": (_is(str), "a description"),
    }),
    "llm": KindSpec(("model",), (), {
        "chat_format": (_one_of("gguf", "chatml", "plain"), "one of gguf, chatml, plain"),
        "context_size": (_int(1, 2**63 - 1), "a positive integer"),  # bounded by the model and memory at load
        "quant": (_is(str), "a quantisation name"),
    }),
}
_TOP = {"format": True, "format_version": True, "components": True, "updated": False}
_COMPONENT = {"kind": True, "files": True, "settings": False, "source": False, "licence": False, "report": False}
_FILE = ("path", "sha256", "size")


def _keys(value: Mapping[str, Any], allowed: Mapping[str, bool], what: str) -> None:
    unknown = sorted(set(value) - set(allowed))
    if unknown:
        raise BundleError(f"{what} has an unknown key {unknown[0]!r} (this version reads {', '.join(allowed)})")
    missing = [k for k, required in allowed.items() if required and k not in value]
    if missing:
        raise BundleError(f"{what} lacks {missing[0]!r}")


def _file(entry: object, what: str) -> None:
    if not isinstance(entry, dict) or set(entry) != set(_FILE):
        raise BundleError(f"{what} lacks path/sha256/size (an object with exactly those keys)")
    path, digest, size = entry["path"], entry["sha256"], entry["size"]
    if not isinstance(path, str) or not path or "\\" in path or "\0" in path:
        raise BundleError(f"{what} has an invalid path {path!r}")
    rel = PurePosixPath(path)
    if rel.is_absolute() or ".." in rel.parts:
        raise BundleError(f"{what}: file {path!r} points outside the bundle; refusing it")
    if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
        raise BundleError(f"{what} has an invalid sha256 {str(digest)[:80]!r} (64 lower-case hex digits)")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise BundleError(f"{what} has an invalid size {size!r} (a non-negative integer)")


def _component(name: str, raw: object, where: object) -> None:
    what = f"{where}: component {name!r}"
    if not _NAME.fullmatch(name):
        raise BundleError(f"{where}: component name {name[:80]!r} is invalid (lower-case letters, digits, _)")
    if not isinstance(raw, dict) or not isinstance(raw.get("kind"), str) or not isinstance(raw.get("files"), dict):
        raise BundleError(f"{what} is malformed (needs 'kind' and 'files' objects)")
    _keys(raw, _COMPONENT, what)
    spec = KINDS.get(raw["kind"])
    if spec is None:
        raise BundleError(f"{what} has an unknown kind {raw['kind'][:80]!r} (this version reads {', '.join(KINDS)})")
    files = raw["files"]
    for role, entry in files.items():
        if role not in spec.roles:
            raise BundleError(f"{what} lists an unknown file role {role[:80]!r} (a {raw['kind']} has {', '.join(spec.roles)})")
        _file(entry, f"{what}: file {role!r}")
    for role in spec.required:
        if role not in files:
            raise BundleError(f"{what} lists no {role} file; re-export the bundle (a {raw['kind']} needs "
                              f"{' and '.join(spec.required)}{' and ' + ' or '.join(spec.any_of) if spec.any_of else ''})")
    if spec.any_of and not any(role in files for role in spec.any_of):
        raise BundleError(f"{what} lists no model file ({' or '.join(spec.any_of)})")
    for key in ("source", "licence"):
        if key in raw and not isinstance(raw[key], str):
            raise BundleError(f"{what}: {key} must be a string, got {type(raw[key]).__name__}")
    if "report" in raw and not isinstance(raw["report"], dict):
        raise BundleError(f"{what}: report must be an object, got {type(raw['report']).__name__}")
    settings = raw.get("settings", {})
    if not isinstance(settings, dict):
        raise BundleError(f"{what}: settings must be an object, got {type(settings).__name__}")
    for key, value in settings.items():
        if key not in spec.settings:
            raise BundleError(f"{what} has an unknown setting {key[:80]!r} (a {raw['kind']} reads "
                              f"{', '.join(spec.settings)})")
        check, valid = spec.settings[key]
        if not check(value):
            if key == "pooling":
                raise BundleError(f"{what}: unknown pooling {value!r:.80}; this version reads mean, cls")
            raise BundleError(f"{what}: {raw['kind']} setting {key} must be {valid}, got {value!r:.80}")


def validate_manifest(manifest: object, where: object) -> None:
    """Check a parsed bundle manifest against the schema (format and version are checked too).

    Args:
        manifest: the parsed ``manifest.json``.
        where: the manifest's path, for messages.

    Raises:
        BundleError: at the first violation, naming the component, key and value.
    """
    if not isinstance(manifest, dict) or manifest.get("format") != "meteora-edge-bundle":
        raise BundleError(f"{where} is not a meteora-edge-bundle manifest")
    if not isinstance(manifest.get("components"), dict):
        raise BundleError(f"{where} has no 'components' object")
    _keys(manifest, _TOP, str(where))
    if "updated" in manifest and not isinstance(manifest["updated"], str):
        raise BundleError(f"{where}: updated must be a string")
    for name, raw in manifest["components"].items():
        _component(name, raw, where)
