"""The options that choose the models (encoder, budget tokenizer, GGUF runtime), shared by the commands."""

from __future__ import annotations

import click

from meteora_edge.models.encoders import EncoderLike
from meteora_edge.pipeline.ladder import CrossEncoder

bundle_option = click.option(
    "--bundle", envvar="METEORA_EDGE_BUNDLE", type=click.Path(file_okay=False), default=None,
    help="Model bundle folder (env METEORA_EDGE_BUNDLE); without it the hashing encoder is used.",
)
threads_option = click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True,
                              help="CPU threads for the encoder.")
precision_option = click.option("--precision", type=click.Choice(["int8", "fp32"]), default="int8", show_default=True,
                                help="Which ONNX encoder of the bundle to run.")

tokenizer_option = click.option("--tokenizer", default=None,
                                help="Answer model tokenizer: tokenizer.json, .gguf, a bundle, or 'whitespace' (the default).")
llm_threads_option = click.option("--llm-threads", type=click.IntRange(min=1), default=1, show_default=True,
                                  help="CPU threads of the GGUF model.")
context_size_option = click.option("--context-size", type=click.IntRange(min=256), default=None,
                                   help="Context of the GGUF model [the bundle's].")


def encoder_from_options(bundle: str | None, threads: int, precision: str) -> EncoderLike:
    from meteora_edge.models.onnx_encoder import load_encoder

    return load_encoder(bundle, threads=threads, precision=precision)


def cross_encoder_from_options(bundle: str | None, threads: int) -> CrossEncoder | None:
    """The bundle's ONNX cross-encoder (the ladder's second rung), or None when it has none."""
    from meteora_edge.models.onnx_cross_encoder import load_cross_encoder

    return load_cross_encoder(bundle, threads=threads)
