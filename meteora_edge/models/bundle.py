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
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..errors import BundleError
from ..fileio import write_text_atomic

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
        kind: ``"encoder"``, ``"cross_encoder"`` or ``"llm"``.
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


def _component_from(name: str, raw: object, where: Path) -> Component:
    if not isinstance(raw, dict) or not isinstance(raw.get("files"), dict) or not isinstance(raw.get("kind"), str):
        raise BundleError(f"{where}: component {name!r} is malformed (needs 'kind' and 'files'); re-export the bundle")
    files = {}
    for role, entry in raw["files"].items():
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("path"), str)
            or not isinstance(entry.get("sha256"), str)
            or not isinstance(entry.get("size"), int)
        ):
            raise BundleError(f"{where}: file {role!r} of component {name!r} lacks path/sha256/size")
        rel = Path(entry["path"])
        if rel.is_absolute() or ".." in rel.parts:
            raise BundleError(f"{where}: file {entry['path']!r} points outside the bundle; refusing it")
        files[role] = FileEntry(entry["path"], entry["sha256"], entry["size"])
    return Component(
        kind=raw["kind"],
        files=files,
        settings=raw.get("settings") if isinstance(raw.get("settings"), dict) else {},
        source=str(raw.get("source", "")),
        licence=str(raw.get("licence", "")),
        report=raw.get("report") if isinstance(raw.get("report"), dict) else {},
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
            raise BundleError(f"bundle directory not found: {root}; export one with 'meteora-edge export'")
        manifest_path = root / MANIFEST_NAME
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise BundleError(f"{root} has no {MANIFEST_NAME}; it is not a meteora-edge bundle") from None
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise BundleError(f"{manifest_path} is not valid JSON ({exc}); re-export the bundle") from None
        if not isinstance(manifest, dict) or manifest.get("format") != BUNDLE_FORMAT:
            raise BundleError(f"{manifest_path} is not a {BUNDLE_FORMAT} manifest")
        version = manifest.get("format_version")
        if not isinstance(version, int) or version < 1:
            raise BundleError(f"{manifest_path} has an invalid format_version {version!r}")
        if version > BUNDLE_FORMAT_VERSION:
            raise BundleError(
                f"{manifest_path} has format version {version}, newer than this meteora-edge reads "
                f"({BUNDLE_FORMAT_VERSION}); upgrade meteora-edge"
            )
        raw_components = manifest.get("components")
        if not isinstance(raw_components, dict):
            raise BundleError(f"{manifest_path} has no 'components' object")
        components = {name: _component_from(name, raw, manifest_path) for name, raw in raw_components.items()}
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
            size = path.stat().st_size
        except FileNotFoundError:
            raise BundleError(f"{path} is missing from the bundle; re-export or copy it again") from None
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

        Raises:
            BundleError: at the first file that fails.
        """
        report: dict[str, dict[str, str]] = {}
        for name, component in self.components.items():
            for role in component.files:
                self.file(name, role)
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
    write_text_atomic(manifest_path, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest_path


def file_entry(bundle_dir: str | os.PathLike[str], relative: str) -> FileEntry:
    """Describe a file already inside the bundle (hash and size)."""
    path = Path(bundle_dir) / relative
    return FileEntry(path=relative, sha256=sha256_file(path), size=path.stat().st_size)
