"""``serve``: load the models once and answer ``select`` requests over HTTP or stdio (extra ``[serve]``)."""

from __future__ import annotations

import sys

import click

from meteora_edge.errors import InputError

from .encoder_option import (
    bundle_option,
    cache_disabled,
    cache_option,
    context_size_option,
    llm_threads_option,
    precision_option,
    threads_option,
    tokenizer_option,
)
from .select_command import HASHING_NOTE


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on; anything but a loopback address needs --token.")
@click.option("--port", type=click.IntRange(0, 65535), default=8731, show_default=True,
              help="Port to listen on; 0 picks a free one (printed on stdout).")
@click.option("--token", envvar="METEORA_EDGE_TOKEN", default=None,
              help="Require 'Authorization: Bearer TOKEN' on every request (env METEORA_EDGE_TOKEN; 16+ characters).")
@click.option("--stdio", is_flag=True, help="Answer JSON lines on stdin/stdout instead of HTTP (no port).")
@click.option("--index", "indexes", multiple=True, type=click.Path(file_okay=False),
              help="An index requests may search, named by its folder name; repeatable (the first is the default).")
@tokenizer_option
@bundle_option
@threads_option
@precision_option
@cache_option
@click.option("--llm", is_flag=True, help="Load the bundle's GGUF model, for requests with generate_rationales or verify.")
@llm_threads_option
@context_size_option
@click.option("--num-rationales", type=click.IntRange(1, 20), default=3, show_default=True,
              help="Rationales the GGUF model writes for generate_rationales.")
@click.option("--sample-shots", default=None, help="Few-shot examples for the generator (JSON, JSONL or text) [the shipped ones].")
@click.option("--domain", default=None, help="Subject named in the GGUF prompts.")
@click.option("--workers", type=click.IntRange(min=1), default=2, show_default=True,
              help="Selections that run at once (threads over the shared models).")
@click.option("--queue", type=click.IntRange(min=0), default=32, show_default=True,
              help="Requests that may wait for a worker; more are refused with 503 and Retry-After.")
@click.option("--cors-origin", "cors_origins", multiple=True, metavar="ORIGIN",
              help="A web origin (scheme://host[:port]) whose pages may call the server from a browser; "
                   "repeatable. Without it CORS is off.")
@click.option("--max-body-mb", type=click.IntRange(min=1), default=16, show_default=True,
              help="Largest request body (HTTP) or line (stdio), in MiB; larger → 413.")
@click.option("--header-timeout", type=click.FloatRange(0, 3600, min_open=True), default=10.0, show_default=True,
              help="Seconds a connection has to send a request's headers; then it is closed (408).")
@click.option("--body-timeout", type=click.FloatRange(0, 3600, min_open=True), default=30.0, show_default=True,
              help="Seconds a request has to send its whole body; then 408.")
@click.option("--keep-alive", type=click.FloatRange(0, 3600, min_open=True), default=5.0, show_default=True,
              help="Seconds an idle connection stays open after an answer.")
@click.option("--max-connections", type=click.IntRange(min=1), default=256, show_default=True,
              help="Open connections at once; more are answered 503 (JSON, Retry-After).")
@click.option("--shutdown-timeout", type=click.IntRange(min=0), default=10, show_default=True,
              help="Seconds running requests get to finish after SIGINT/SIGTERM (they stop at their next check).")
@click.option("--request-timeout", type=click.FloatRange(0, 3600, min_open=True), default=60.0, show_default=True,
              help="Seconds a selection may take once its body arrived, waiting for a worker included; then its work "
                   "stops at the next check between phases and batches (504; 503 if it never started).")
def serve(
    host: str,
    port: int,
    token: str | None,
    stdio: bool,
    indexes: tuple[str, ...],
    tokenizer: str | None,
    bundle: str | None,
    threads: int,
    precision: str,
    llm: bool,
    llm_threads: int,
    context_size: int | None,
    num_rationales: int,
    sample_shots: str | None,
    domain: str | None,
    workers: int,
    queue: int,
    cors_origins: tuple[str, ...],
    max_body_mb: int,
    header_timeout: float,
    body_timeout: float,
    keep_alive: float,
    max_connections: int,
    shutdown_timeout: int,
    request_timeout: float,
) -> None:
    """Load the models once and answer select requests: HTTP on 127.0.0.1, or JSON lines with --stdio.

    POST /v1/select takes {"query", "chunks" or "index", "rationales", settings…} and answers with
    select's JSON; GET /v1/models, /v1/index and /v1/health describe the loaded models and indexes;
    GET /openapi.json is the API's OpenAPI document. With -v every request is logged in one line.
    """
    from meteora_edge.integrations.service import SelectService

    if stdio and _from_environment("token"):
        token = None  # METEORA_EDGE_TOKEN guards HTTP; a stdio child is reached only through its pipes
    if stdio and (token or host != "127.0.0.1" or port != 8731 or cors_origins):
        raise InputError("--stdio talks over pipes; drop --host, --port, --token and --cors-origin")
    http = None
    if not stdio:
        from meteora_edge.integrations import http_server as http  # the [serve] extra, checked before any model loads
        from meteora_edge.integrations.http_middleware import check_origins

        http.check_bind(host, token)
        try:
            cors_origins = check_origins(cors_origins, token=token)
        except InputError as exc:
            flags = str(exc).replace("cors_origins", "--cors-origin").replace("set a token", "add --token")
            raise InputError(flags) from None
        limits = http.ServerLimits(workers=workers, queue=queue, max_body_bytes=max_body_mb * 2**20,
                                   header_timeout=header_timeout, body_timeout=body_timeout, keep_alive=keep_alive,
                                   max_connections=max_connections, request_timeout=request_timeout)
    if (sample_shots or domain) and not llm:
        raise InputError("--sample-shots and --domain shape the GGUF prompts; add --llm")
    shots = None
    if sample_shots:
        from meteora_edge.selection.sample_shots import check_shots, load_sample_shots

        shots = check_shots(load_sample_shots(sample_shots))
    if bundle is None:
        click.echo(HASHING_NOTE, err=True)
    service = SelectService.load(
        bundle=bundle, indexes=indexes, tokenizer=tokenizer, threads=threads, precision=precision, llm=llm,
        llm_threads=llm_threads, context_size=context_size, num_rationales=num_rationales, sample_shots=shots,
        domain=domain, cache=not cache_disabled(),
    )
    if http is None:
        from meteora_edge.integrations.stdio import serve_stdio

        with _stopped_by_signals():
            serve_stdio(service, sys.stdin.buffer, sys.stdout.buffer, max_line_bytes=max_body_mb * 2**20,
                        request_timeout=request_timeout)
        return

    def ready(url: str) -> None:
        click.echo(f"listening on {url}", nl=True)
        sys.stdout.flush()

    http.serve_http(service, host=host, port=port, token=token, limits=limits, shutdown_timeout=shutdown_timeout,
                    cors_origins=cors_origins, on_ready=ready)


def _from_environment(name: str) -> bool:
    source = click.get_current_context().get_parameter_source(name)
    return source is click.core.ParameterSource.ENVIRONMENT


class _Stop(Exception):
    pass


class _stopped_by_signals:
    """SIGTERM and SIGINT end the stdio loop quietly (exit 0), between or during requests."""

    def __enter__(self) -> None:
        import signal

        def stop(signum: int, frame: object) -> None:
            raise _Stop

        self.previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}

    def __exit__(self, kind: object, exc: object, tb: object) -> bool:
        import signal

        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        return kind is _Stop
