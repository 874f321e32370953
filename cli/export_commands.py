"""``meteora-edge export …`` (model export) and ``meteora-edge models …`` (bundle checks)."""

from __future__ import annotations

import click


@click.group()
def export() -> None:
    """Export models into a bundle (needs the heavy 'export' extra; run once, on any machine)."""
