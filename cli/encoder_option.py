"""The options that choose the encoder, shared by every command that embeds text."""

from __future__ import annotations

import click

from meteora_edge.encoders import EncoderLike, HashingEncoder

bundle_option = click.option(
    "--bundle", envvar="METEORA_EDGE_BUNDLE", type=click.Path(file_okay=False), default=None,
    help="Model bundle folder (env METEORA_EDGE_BUNDLE); without it the hashing encoder is used.",
)
threads_option = click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True,
                              help="CPU threads for the encoder.")
precision_option = click.option("--precision", type=click.Choice(["int8", "fp32"]), default="int8", show_default=True,
                                help="Which ONNX encoder of the bundle to run.")


def encoder_from_options(bundle: str | None, threads: int, precision: str) -> EncoderLike:
    if bundle is None:
        return HashingEncoder()
    from meteora_edge.bundle import Bundle

    if "encoder" not in Bundle.load(bundle).components:
        return HashingEncoder()  # e.g. a bundle that so far holds only the llm; the trace names the encoder
    from meteora_edge.onnx_encoder import OnnxEncoder

    return OnnxEncoder.from_bundle(bundle, threads=threads, precision=precision)
