"""``python -m meteora_edge``: the command line, the same as the ``meteora-edge`` script."""

from __future__ import annotations

if __name__ == "__main__":  # pragma: no cover - exercised through a subprocess in the tests
    from meteora_edge.cli.main import main

    main(prog_name="meteora-edge")
