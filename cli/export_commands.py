"""``meteora-edge export …`` (model export) and ``meteora-edge models …`` (bundle checks)."""

from __future__ import annotations

import click


@click.group()
def export() -> None:
    """Export models into a bundle (needs the heavy 'export' extra; run once, on any machine)."""


@export.command("llm")
@click.argument("source", required=False)
@click.option("--out", "out", required=True, type=click.Path(file_okay=False), help="Bundle folder (created when absent).")
@click.option("--quant", type=click.Choice(["Q4_K_M", "Q8_0", "F16"]), default="Q4_K_M", show_default=True,
              help="Quantisation of the converted model.")
@click.option("--gguf", "gguf", type=click.Path(dir_okay=False), default=None,
              help="Import this GGUF file instead of converting SOURCE (needs no torch).")
@click.option("--llama-cpp", "llama_cpp_dir", type=click.Path(file_okay=False), default=None,
              help="llama.cpp checkout with convert_hf_to_gguf.py [fetched from the llama-cpp-python sdist with pip].")
@click.option("--context-size", type=click.IntRange(min=256), default=None, help="Context the runtime uses [min(4096, trained)].")
@click.option("--chat-format", type=click.Choice(["gguf", "chatml", "plain"]), default=None,
              help="Prompt layout [gguf when the file has a chat template, else plain].")
@click.option("--licence", default=None, help="Licence of the weights [from the GGUF metadata].")
@click.option("--tokenizer-from", "tokenizer_from", type=click.Path(dir_okay=False), default=None,
              help="Take the tokenizer from this GGUF (for a model dpo-train started from it).")
def export_llm_command(source: str | None, out: str, quant: str, gguf: str | None, llama_cpp_dir: str | None,
                       context_size: int | None, chat_format: str | None, licence: str | None,
                       tokenizer_from: str | None) -> None:
    """Add a language model to a bundle: convert a Hugging Face causal LM (SOURCE) or import a GGUF (--gguf)."""
    from meteora_edge.errors import InputError
    from meteora_edge.export.llm import export_llm, import_gguf

    if (source is None) == (gguf is None):
        raise InputError("give exactly one of SOURCE (a Hugging Face model folder) or --gguf FILE")
    if gguf is not None and tokenizer_from is not None:
        raise InputError("--tokenizer-from applies to a converted SOURCE; an imported --gguf keeps its own tokenizer")
    if gguf is not None:
        component = import_gguf(gguf, out, licence=licence, context_size=context_size, chat_format=chat_format)
    else:
        component = export_llm(source, out, quant=quant, llama_cpp_dir=llama_cpp_dir, licence=licence,
                               context_size=context_size, chat_format=chat_format, tokenizer_from=tokenizer_from)
    entry = component.files["model"]
    click.echo(f"{out}: llm {entry.path} ({component.settings['quant']}, {entry.size} bytes, "
               f"chat format {component.settings['chat_format']}, context {component.settings['context_size']})")


@export.command("encoder")
@click.argument("source")
@click.option("--out", "out", required=True, type=click.Path(file_okay=False), help="Bundle folder (created when absent).")
@click.option("--quantize", type=click.Choice(["int8"]), default=None,
              help="Also write the per-channel dynamic int8 models: int8 (mixed recipe) and int8-dot (for CPUs "
                   "with int8 dot-product instructions).")
@click.option("--max-length", type=click.IntRange(min=2), default=None,
              help="Tokens per text [the model's max_seq_length].")
@click.option("--opset", type=click.IntRange(14, 21), default=17, show_default=True, help="ONNX opset.")
@click.option("--licence", default=None, help="Licence of the weights [from the model card].")
def export_encoder_command(source: str, out: str, quantize: str | None, max_length: int | None, opset: int,
                           licence: str | None) -> None:
    """Add a sentence encoder to a bundle as ONNX: SOURCE is a model folder, package or hub id."""
    from meteora_edge.export.encoder import export_encoder
    from meteora_edge.models.precision import MIN_COSINE

    component = export_encoder(source, out, quantize=quantize, max_length=max_length, opset=opset, licence=licence)
    settings = component.settings
    click.echo(f"{out}: encoder from {component.source} (dimension {settings['dimension']}, max length "
               f"{settings['max_length']}, {settings['pooling']} pooling, licence {component.licence})")
    report = component.report
    for precision in ("fp32", "int8", "int8-dot"):
        if precision in report:
            row = report[precision]
            dropped = "" if precision in component.files else (
                f"; not kept: below {MIN_COSINE[precision]} on this CPU, so the bundle runs fp32")
            click.echo(f"parity {precision} vs torch over {report['sentences']} sentences: "
                       f"min cosine {row['min_cosine']:.6f}, mean {row['mean_cosine']:.6f}{dropped}")


@export.command("cross-encoder")
@click.argument("source")
@click.option("--out", "out", required=True, type=click.Path(file_okay=False), help="Bundle folder (created when absent).")
@click.option("--quantize", type=click.Choice(["int8"]), default=None, help="Also write a per-channel dynamic int8 model.")
@click.option("--max-length", type=click.IntRange(min=2), default=None, help="Tokens per (query, passage) pair.")
@click.option("--opset", type=click.IntRange(14, 21), default=17, show_default=True, help="ONNX opset.")
@click.option("--licence", default=None, help="Licence of the weights [from the model card].")
def export_cross_encoder_command(source: str, out: str, quantize: str | None, max_length: int | None, opset: int,
                                 licence: str | None) -> None:
    """Add a cross-encoder (sequence classification) to a bundle as ONNX, for the verification ladder."""
    from meteora_edge.export.cross_encoder import export_cross_encoder

    component = export_cross_encoder(source, out, quantize=quantize, max_length=max_length, opset=opset, licence=licence)
    click.echo(f"{out}: cross-encoder from {component.source} (max length {component.settings['max_length']}, "
               f"licence {component.licence})")
    for precision in ("fp32", "int8"):
        if precision in component.report:
            click.echo(f"parity {precision} vs torch over {component.report['pairs']} pairs: "
                       f"max score difference {component.report[precision]['max_abs_diff']}")
