"""Model bundles: a directory of model files described by a checked manifest.

The export step writes bundles; the runtime only reads them. ``manifest.json`` lists each
component (``encoder``, ``cross_encoder``, ``llm``) with its files (relative path, sha256,
size), settings (pooling, max length, dimension, chat format, context size …), source and
licence. Loading refuses a manifest of a newer format, and :meth:`Bundle.file` checks a
file's size and hash before handing out its path. Nothing is ever unpickled.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..errors import BundleError, InputError, ModelError
from ..fileio import parse_json, read_text_file, write_text_atomic
from .bundle_schema import validate_manifest
from .llm_file import check_gguf_complete

__all__ = [
    "BUNDLE_FORMAT",
    "BUNDLE_FORMAT_VERSION",
    "MANIFEST_NAME",
    "Bundle",
    "Component",
    "FileEntry",
    "sha256_file",
    "add_component",
    "file_entry",
]

BUNDLE_FORMAT = "meteora-edge-bundle"
BUNDLE_FORMAT_VERSION = 1
MANIFEST_NAME = "manifest.json"
_HASH_BLOCK = 1 << 20
_MAX_MANIFEST_BYTES = 16 << 20


def sha256_file(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(_HASH_BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class FileEntry:
    """One file of a component: its path relative to the bundle, sha256 and size in bytes."""

    path: str
    sha256: str
    size: int

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "sha256": self.sha256, "size": self.size}


@dataclass(frozen=True)
class Component:
    """A model inside a bundle.

    Args:
        kind: ``"encoder"``, ``"sparse_encoder"``, ``"cross_encoder"`` or ``"llm"``.
        files: role → file (e.g. ``{"fp32": …, "int8": …, "tokenizer": …}`` or ``{"model": …}``).
        settings: how to run it (``pooling``, ``normalize``, ``max_length``, ``dimension``,
            ``chat_format``, ``context_size`` …).
        source: where it came from (model id, package, path).
        licence: the licence of the weights.
        report: optional export report (e.g. the parity check).
    """

    kind: str
    files: Mapping[str, FileEntry]
    settings: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""
    licence: str = ""
    report: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "files": {k: v.to_dict() for k, v in self.files.items()},
            "settings": dict(self.settings),
            "source": self.source,
            "licence": self.licence,
            "report": dict(self.report),
        }


def _component_from(raw: Mapping[str, Any]) -> Component:
    """A component from its manifest entry (already checked by :func:`validate_manifest`)."""
    return Component(
        kind=raw["kind"],
        files={role: FileEntry(e["path"], e["sha256"], e["size"]) for role, e in raw["files"].items()},
        settings=dict(raw.get("settings", {})),
        source=raw.get("source", ""),
        licence=raw.get("licence", ""),
        report=dict(raw.get("report", {})),
    )


class Bundle:
    """A loaded, format-checked bundle. Files are hash-checked when first asked for."""

    def __init__(self, root: Path, manifest: Mapping[str, Any], components: Mapping[str, Component]) -> None:
        self.root = root
        self.manifest = dict(manifest)
        self.components = dict(components)
        self._checked: set[tuple[str, str]] = set()

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Bundle:
        """Read and check a bundle's manifest.

        Raises:
            BundleError: no such directory, no manifest, malformed or newer-format manifest.
        """
        root = Path(path)
        if not root.is_dir():
            raise BundleError(f"bundle directory not found: {root}; make one with 'meteora-edge models install "
                              f"minilm-l6-v2 --bundle {root}' (no torch), or export your own with 'meteora-edge export'")
        manifest_path = root / MANIFEST_NAME
        if not manifest_path.exists():
            raise BundleError(f"{root} has no {MANIFEST_NAME}; it is not a meteora-edge bundle")
        try:
            manifest = parse_json(read_text_file(manifest_path, max_bytes=_MAX_MANIFEST_BYTES), manifest_path)
        except InputError as exc:
            raise BundleError(f"{exc}; re-export the bundle") from None
        if not isinstance(manifest, dict) or manifest.get("format") != BUNDLE_FORMAT:
            raise BundleError(f"{manifest_path} is not a {BUNDLE_FORMAT} manifest")
        version = manifest.get("format_version")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise BundleError(f"{manifest_path} has an invalid format_version {version!r}")
        if version > BUNDLE_FORMAT_VERSION:
            raise BundleError(
                f"{manifest_path} has format version {version}, newer than this meteora-edge reads "
                f"({BUNDLE_FORMAT_VERSION}); upgrade meteora-edge"
            )
        validate_manifest(manifest, manifest_path)
        components = {name: _component_from(raw) for name, raw in manifest["components"].items()}
        return cls(root, manifest, components)

    def component(self, name: str) -> Component:
        """The named component, or a :class:`BundleError` listing what the bundle has."""
        try:
            return self.components[name]
        except KeyError:
            have = ", ".join(sorted(self.components)) or "nothing"
            raise BundleError(
                f"bundle {self.root} has no {name!r} component (it has {have}); export one into it"
            ) from None

    def file(self, name: str, role: str, *, verify: bool = True) -> Path:
        """Path of a component's file after checking its size and sha256 (once per bundle object).

        Raises:
            BundleError: the component or file is missing, truncated or tampered with.
        """
        component = self.component(name)
        entry = component.files.get(role)
        if entry is None:
            raise BundleError(
                f"component {name!r} of {self.root} has no {role!r} file (it has {', '.join(sorted(component.files))})"
            )
        path = self.root / entry.path
        if not verify or (name, role) in self._checked:
            return path
        try:
            status = path.stat()
        except FileNotFoundError:
            raise BundleError(f"{path} is missing from the bundle; re-export or copy it again") from None
        except OSError as exc:
            raise BundleError(f"cannot read {path}: {exc.strerror or exc}") from None
        if not stat.S_ISREG(status.st_mode):
            raise BundleError(f"{path} is not a regular file; re-export or copy the bundle again")
        size = status.st_size
        if size != entry.size:
            raise BundleError(
                f"{path} has {size} bytes but the manifest says {entry.size}: truncated or replaced; re-copy the bundle"
            )
        if sha256_file(path) != entry.sha256:
            raise BundleError(f"{path} does not match its sha256 in the manifest: tampered or corrupt; re-copy the bundle")
        self._checked.add((name, role))
        return path

    def verify(self) -> dict[str, dict[str, str]]:
        """Check every file of every component; return ``{component: {role: "ok"}}``.

        Sizes and hashes are checked for every file, and a GGUF model must also hold all the
        tensor data its header declares.

        Raises:
            BundleError: at the first file that fails.
        """
        report: dict[str, dict[str, str]] = {}
        for name, component in self.components.items():
            for role in component.files:
                path = self.file(name, role)
                if component.kind == "llm":
                    try:
                        check_gguf_complete(path)  # the hash only proves the file is the one exported
                    except ModelError as exc:
                        raise BundleError(f"{exc}; re-export the llm component") from None
                report.setdefault(name, {})[role] = "ok"
        return report

    def info(self) -> dict[str, Any]:
        """The manifest, for ``models info``."""
        return {"path": str(self.root), **self.manifest}


def add_component(bundle_dir: str | os.PathLike[str], name: str, component: Component) -> Path:
    """Add or replace ``name`` in the bundle's manifest (created when absent), atomically.

    The component's files must already be inside ``bundle_dir``.

    Returns:
        The manifest path.
    """
    root = Path(bundle_dir)
    root.mkdir(parents=True, exist_ok=True)
    manifest_path = root / MANIFEST_NAME
    if manifest_path.exists():
        manifest = Bundle.load(root).manifest
    else:
        manifest = {"format": BUNDLE_FORMAT, "format_version": BUNDLE_FORMAT_VERSION, "components": {}}
    manifest["components"] = {**manifest.get("components", {}), name: component.to_dict()}
    manifest["updated"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    validate_manifest(manifest, manifest_path)  # never write a manifest this version would refuse
    write_text_atomic(manifest_path, json.dumps(manifest, indent=2, sort_keys=True) + "\n", private=False)
    return manifest_path


def file_entry(bundle_dir: str | os.PathLike[str], relative: str) -> FileEntry:
    """Describe a file already inside the bundle (hash and size)."""
    path = Path(bundle_dir) / relative
    return FileEntry(path=relative, sha256=sha256_file(path), size=path.stat().st_size)
