"""``meteora-edge doctor``."""

from __future__ import annotations

import json

import click

from meteora_edge.doctor import collect_report

from .encoder_option import bundle_option, threads_option


@click.command()
@bundle_option
@threads_option
@click.option("--no-probe", is_flag=True, help="Skip the latency probe.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def doctor(bundle: str | None, threads: int, no_probe: bool, as_json: bool) -> None:
    """Check versions, CPU features, threads, the llm extra and a bundle; exit 1 if the bundle is broken."""
    report = collect_report(bundle=bundle, threads=threads, probe=not no_probe)
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        cpu = report["cpu"]
        click.echo(f"python      {report['python']} on {report['platform']}")
        click.echo(f"cpu         {cpu['model']}, {cpu['usable_cores']}/{cpu['cores']} cores, {' '.join(cpu['features'])}")
        click.echo("versions    " + ", ".join(f"{k} {v or '-'}" for k, v in report["versions"].items()))
        set_vars = ", ".join(f"{k}={v}" for k, v in report["threads"].items() if v is not None)
        click.echo("threads     " + (set_vars or "library defaults (no thread variables set)"))
        llm = report["llm_extra"]
        click.echo(f"llm extra   {'ok ' + llm['version'] if llm['ok'] else 'MISSING: ' + llm['detail']}")
        if "bundle" in report:
            b = report["bundle"]
            click.echo(f"bundle      {'ok' if b['ok'] else 'BROKEN: ' + b['detail']} ({b['path']})")
        if "probe" in report:
            click.echo("probe       " + ", ".join(f"{k}={v}" for k, v in report["probe"].items()))
    if not report["ok"]:
        raise SystemExit(1)
