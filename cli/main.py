"""Entry point: the click group, error mapping and the (lazy) registration of every command.

Commands stay thin: they parse options, call the library and print. The library raises
:class:`~meteora_edge.errors.MeteoraError`; here it becomes one line on stderr and exit 1.
"""

from __future__ import annotations

import importlib
import logging
import sys
from typing import Any

import click

from meteora_edge import __version__
from meteora_edge.errors import MeteoraError

from .output import tolerant_streams


# command name -> (module under cli/, attribute): a module is imported when its command is run or
# listed, so `--version` and `select --help` skip the other commands' imports (start-up time)
_COMMANDS = {
    "select": ("select_command", "select"),
    "serve": ("serve_command", "serve"),
    "chunk": ("core_commands", "chunk"),
    "index": ("index_commands", "index"),
    "eval": ("eval_command", "eval_command"),
    "export": ("export_commands", "export"),
    "doctor": ("doctor_command", "doctor"),
    "cache": ("cache_commands", "cache"),
    "models": ("model_commands", "models"),
    "dpo-derive": ("dpo_commands", "dpo_derive"),
    "dpo-prepare": ("dpo_commands", "dpo_prepare"),
    "dpo-train": ("dpo_commands", "dpo_train"),
}


class _Group(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in _COMMANDS:
            module, attribute = _COMMANDS[cmd_name]
            command = getattr(importlib.import_module(f"{__package__}.{module}"), attribute)
            if command.name != cmd_name:  # a bug here, not a user error
                raise RuntimeError(f"cli.{module}.{attribute} is named {command.name!r}, not {cmd_name!r}")
            self.add_command(command)
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        tolerant_streams()
        try:
            return super().invoke(ctx)
        except MeteoraError as exc:
            raise click.ClickException(" ".join(str(exc).split()) or type(exc).__name__) from None
        except MemoryError:
            raise click.ClickException("out of memory; give a smaller input or raise the limits") from None
        except UnicodeEncodeError as exc:
            raise click.ClickException(
                f"the output holds {exc.object[exc.start:exc.end]!r}, which is not valid Unicode (a lone surrogate, "
                "e.g. from an argument in a non-UTF-8 locale); fix the input it came from"
            ) from None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="meteora-edge")
@click.option("--verbose", "-v", is_flag=True, help="Log progress, and show llama.cpp's own log lines on stderr.")
def main(verbose: bool) -> None:
    """Offline evidence selection for RAG: pick the few passages worth sending to an answer model."""
    from meteora_edge.models.llm_backend import set_llama_verbose  # not llm_model: it imports numpy

    set_llama_verbose(verbose)
    if verbose:
        logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s", stream=sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
