"""``meteora-edge doctor``."""

from __future__ import annotations

import json

import click

from meteora_edge.doctor import collect_report

from .encoder_option import bundle_option, cache_disabled, cache_option, precision_option, threads_option


@click.command()
@bundle_option
@threads_option
@precision_option
@cache_option
@click.option("--index", "index_path", default=None, metavar="DIR|URL",
              help="Also report an index: its encoder and the lexical scorer it was built with.")
@click.option("--no-probe", is_flag=True, help="Skip the latency probe.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def doctor(bundle: str | None, threads: int, precision: str, index_path: str | None, no_probe: bool,
           as_json: bool) -> None:
    """Check versions, CPU features, the embedding cache, the llm extra, a bundle and an index; exit 1 if either is broken."""
    report = collect_report(bundle=bundle, threads=threads, probe=not no_probe, precision=precision,
                            cache=not cache_disabled(), index=index_path)
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        cpu = report["cpu"]
        click.echo(f"python      {report['python']} on {report['platform']}")
        click.echo(f"cpu         {cpu['model']}, {cpu['usable_cores']}/{cpu['cores']} cores, {' '.join(cpu['features'])}")
        click.echo(f"int8 dot    {cpu['int8_dot_product'] or 'none'} (flags from {cpu['flags_source']})")
        click.echo("versions    " + ", ".join(f"{k} {v or '-'}" for k, v in report["versions"].items()))
        set_vars = ", ".join(f"{k}={v}" for k, v in report["threads"].items() if v is not None)
        click.echo("threads     " + (set_vars or "library defaults (no thread variables set)"))
        cache = report["cache"]
        if "path" in cache:
            used = (f", {cache['entries']} vectors, {cache['used_mb']} MB, {cache['disk_mb']} MB on disk"
                    if "entries" in cache else "")
            modes = ", ".join(f"{name} {mode}" for name, mode in cache["permissions"].items())
            click.echo(f"cache       {cache['path']} ({cache['state']}{used}, bound {cache['max_mb']} MB"
                       + (f"; permissions {modes}" if modes else "") + ")")
        else:
            click.echo(f"cache       {cache['state']}")
        llm = report["llm_extra"]
        if llm["ok"]:
            backend = llm["cpu_backend"]
            kernels = (f"runtime CPU dispatch, loaded {backend['variant'] or 'unknown'} of {len(backend['variants'])} variants"
                       if backend["dispatch"] == "runtime" else "CPU kernels built in (no runtime dispatch)")
            kernels += "".join(f"; never loads {level}: {why}" for level, why in backend.get("skipped", {}).items())
            click.echo(f"llm extra   ok {llm['version']}, {kernels}")
        else:
            click.echo(f"llm extra   MISSING: {llm['detail']}")
        if "bundle" in report:
            b = report["bundle"]
            click.echo(f"bundle      {'ok' if b['ok'] else 'BROKEN: ' + b['detail']} ({b['path']})")
        if "encoder" in report:
            e = report["encoder"]
            if "precision" in e:
                parity = "; ".join(f"{v} min cosine {p.get('min_cosine')}" for v, p in e["parity"].items())
                click.echo(f"encoder     {e['precision']} (--precision {e['requested']}: {e['reason']}); "
                           f"variants {', '.join(e['variants'])}" + (f"; parity {parity}" if parity else ""))
            else:
                click.echo(f"encoder     {e['state']}")
        if "lexical" in report:
            sparse = report["lexical"]["sparse"]
            click.echo("lexical     bm25" + (f" and sparse ({sparse['component']}: {sparse['source'] or 'sparse model'}, "
                                              f"variants {', '.join(sparse['variants'])})" if sparse else
                                              " only (no sparse_encoder component)"))
        if "index" in report:
            ix = report["index"]
            if ix["ok"]:
                model = f" by {ix['sparse_model']}" if ix["sparse_model"] else ""
                click.echo(f"index       {ix['path']}: {ix['chunks']} chunks, lexical scorer {ix['lexical_scorer']}{model}, "
                           f"encoder {ix['encoder']}")
            else:
                click.echo(f"index       BROKEN: {ix['detail']} ({ix['path']})")
        if "probe" in report:
            click.echo("probe       " + ", ".join(f"{k}={v}" for k, v in report["probe"].items()))
    if not report["ok"]:
        raise SystemExit(1)
