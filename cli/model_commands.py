"""``meteora-edge models info|verify BUNDLE_DIR``: describe and check a model bundle."""

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
                             f"over {comp.report.get('sentences', '?')} sentences")
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
