"""The options that choose the models (encoder, budget tokenizer, GGUF runtime), shared by the commands."""

from __future__ import annotations

import click

from meteora_edge.models.cpu_features import usable_cores
from meteora_edge.models.encoders import EncoderLike
from meteora_edge.models.precision import PRECISIONS
from meteora_edge.pipeline.ladder import CrossEncoder

_NO_CACHE = "meteora_edge.no_cache"

bundle_option = click.option(
    "--bundle", envvar="METEORA_EDGE_BUNDLE", type=click.Path(file_okay=False), default=None,
    help="Model bundle folder (env METEORA_EDGE_BUNDLE); without it the hashing encoder is used.",
)


def _limit_numpy_threads(ctx: click.Context, param: click.Parameter, threads: int) -> int:
    """Hold numpy's BLAS to ``--threads`` as well: its default, a thread per core, spins on cores other work
    holds, and a select's small products (kNN over 10,000 vectors: 0.6 ms on one thread) then take 30 ms or more."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=threads, user_api="blas")
    return threads


threads_option = click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True,
                              callback=_limit_numpy_threads, help="CPU threads for the encoder and numpy.")
# Index builds embed every chunk of a folder: they use the machine by default, as one one-thread
# onnxruntime session per core (see encoder_from_options), at most this many (each session holds
# its own copy of the model: 27-90 MB for MiniLM).
BUILD_THREADS_CAP = 4


build_threads_option = click.option(
    "--threads", type=click.IntRange(min=1), default=lambda: min(BUILD_THREADS_CAP, usable_cores()),
    show_default=f"the usable cores, at most {BUILD_THREADS_CAP}", callback=_limit_numpy_threads,
    help="CPU threads for embedding (one encoder session each) and numpy.")
precision_option = click.option(
    "--precision", type=click.Choice(PRECISIONS), default="auto", show_default=True,
    help="Which ONNX encoder of the bundle to run: auto picks by the CPU (int8-dot with VNNI/AMX/ARM "
         "dot product or AVX2, unless its embeddings were measured too far from fp32; else fp32); int8 is "
         "the mixed recipe (least memory).",
)

tokenizer_option = click.option("--tokenizer", default=None,
                                help="Answer model tokenizer: tokenizer.json, .gguf, a bundle, or 'whitespace' (the default).")
llm_threads_option = click.option("--llm-threads", type=click.IntRange(min=1), default=1, show_default=True,
                                  help="CPU threads of the GGUF model.")
context_size_option = click.option("--context-size", type=click.IntRange(min=256), default=None,
                                   help="Context of the GGUF model [the bundle's].")


def _remember_no_cache(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    ctx.meta[_NO_CACHE] = bool(value)


cache_option = click.option(
    "--no-cache", is_flag=True, expose_value=False, callback=_remember_no_cache,
    help="Do not read or write the embedding cache, which keeps vectors of embedded texts in "
         "~/.cache/meteora-edge (0700; env METEORA_EDGE_CACHE=off does the same, =DIR moves it; "
         "see 'meteora-edge cache info').",
)


def cache_disabled() -> bool:
    """Whether the running command was given ``--no-cache``."""
    ctx = click.get_current_context(silent=True)
    return bool(ctx and ctx.meta.get(_NO_CACHE))


def encoder_from_options(bundle: str | None, threads: int, precision: str, *, index_encoder: str | None = None,
                         bulk: bool = False) -> EncoderLike:
    """The encoder of ``--bundle`` (hashing without one), with the embedding cache unless ``--no-cache``.

    ``index_encoder``: the encoder id an index recorded (see :func:`load_encoder`). ``bulk``
    (index builds): ``threads`` one-thread sessions running batches at once instead of one
    session with ``threads`` threads (faster on shared cores; see docs/performance.md).
    """
    from meteora_edge.models.onnx_encoder import load_encoder

    return load_encoder(bundle, threads=1 if bulk else threads, precision=precision, cache=not cache_disabled(),
                        index_encoder=index_encoder, sessions=threads if bulk else 1)


def cross_encoder_from_options(bundle: str | None, threads: int) -> CrossEncoder | None:
    """The bundle's ONNX cross-encoder (the ladder's second rung), or None when it has none."""
    from meteora_edge.models.onnx_cross_encoder import load_cross_encoder

    return load_cross_encoder(bundle, threads=threads)
