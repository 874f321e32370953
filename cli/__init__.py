"""The ``meteora-edge`` command line (installed as ``meteora_edge.cli``)."""
