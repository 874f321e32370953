"""``meteora-edge cache info|clear``: where the embedding cache is, what it holds, and emptying it."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:  # numpy stays unimported until a cache command runs
    from meteora_edge.models.embedding_cache import EmbeddingCache


def _cache_or_none() -> tuple[EmbeddingCache | None, str]:
    from meteora_edge.models.embedding_cache import CACHE_ENV, default_cache

    cache = default_cache()
    if cache is None:
        return None, f"off ({CACHE_ENV}={os.environ.get(CACHE_ENV, '')!r}, or no home folder)"
    return cache, "on"


@click.group()
def cache() -> None:
    """The embedding cache: vectors of texts already embedded, kept between runs.

    The command line and serve keep it by default (select, index, eval; --no-cache or
    METEORA_EDGE_CACHE=off turn it off, METEORA_EDGE_CACHE=DIR moves it); the Python API
    only when asked. It holds one vector per (encoder, sha256 of a text) — no text — in
    embeddings.sqlite3, folder 0700 and files 0600. Vectors can be inverted to approximate
    the text they came from: treat the cache as you treat the documents.

    \b
    Examples:
      meteora-edge cache info
      meteora-edge cache clear
    """


@cache.command("info")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def cache_info(as_json: bool) -> None:
    """Where the cache is, its permissions, how many vectors it holds and its size on disk."""
    found, state = _cache_or_none()
    if found is None:
        report = {"state": state}
    else:
        report = found.stats()
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    if found is None:
        click.echo(f"cache       {state}")
        return
    click.echo(f"cache       {report['path']}")
    click.echo(f"state       {report['state']}")
    modes = ", ".join(f"{name} {mode}" for name, mode in report["permissions"].items()) or "-"
    click.echo(f"permissions {modes}")
    if "entries" in report:
        click.echo(f"holds       {report['entries']} vectors, {report['used_mb']} MB live of a {report['max_mb']} MB bound, "
                   f"{report['disk_mb']} MB on disk")


@cache.command("clear")
def cache_clear() -> None:
    """Delete every cached vector and give the disk space back."""
    found, state = _cache_or_none()
    if found is None:
        click.echo(f"cache {state}: nothing to clear")
        return
    if not found.path.exists():
        click.echo(f"cache {found.path} is empty: nothing to clear")
        return
    try:
        count = found.clear()
    finally:
        found.close()
    click.echo(f"cleared {count} vectors from {found.path}")

