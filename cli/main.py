"""Entry point: the click group, error mapping and the registration of every command.

Commands stay thin: they parse options, call the library and print. The library raises
:class:`~meteora_edge.errors.MeteoraError`; here it becomes one line on stderr and exit 1.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import click

from meteora_edge import __version__
from meteora_edge.errors import MeteoraError

from .output import tolerant_streams


class _Group(click.Group):
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
    from meteora_edge.models.llm_model import set_llama_verbose

    set_llama_verbose(verbose)
    if verbose:
        logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s", stream=sys.stderr)


def _register() -> None:
    from .cache_commands import cache
    from .core_commands import chunk
    from .select_command import select
    from .serve_command import serve
    from .doctor_command import doctor
    from .dpo_commands import dpo_derive, dpo_prepare, dpo_train
    from .eval_command import eval_command
    from .export_commands import export
    from .index_commands import index
    from .model_commands import models

    main.add_command(select)
    main.add_command(serve)
    main.add_command(chunk)
    main.add_command(index)
    main.add_command(eval_command)
    main.add_command(export)
    main.add_command(doctor)
    main.add_command(cache)
    main.add_command(models)
    main.add_command(dpo_derive)
    main.add_command(dpo_prepare)
    main.add_command(dpo_train)


_register()

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
