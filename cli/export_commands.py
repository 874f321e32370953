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
def export_llm_command(source: str | None, out: str, quant: str, gguf: str | None, llama_cpp_dir: str | None,
                       context_size: int | None, chat_format: str | None, licence: str | None) -> None:
    """Add a language model to a bundle: convert a Hugging Face causal LM (SOURCE) or import a GGUF (--gguf)."""
    from meteora_edge.errors import InputError
    from meteora_edge.export.llm import export_llm, import_gguf

    if (source is None) == (gguf is None):
        raise InputError("give exactly one of SOURCE (a Hugging Face model folder) or --gguf FILE")
    if gguf is not None:
        component = import_gguf(gguf, out, licence=licence, context_size=context_size, chat_format=chat_format)
    else:
        component = export_llm(source, out, quant=quant, llama_cpp_dir=llama_cpp_dir, licence=licence,
                               context_size=context_size, chat_format=chat_format)
    entry = component.files["model"]
    click.echo(f"{out}: llm {entry.path} ({component.settings['quant']}, {entry.size} bytes, "
               f"chat format {component.settings['chat_format']}, context {component.settings['context_size']})")
