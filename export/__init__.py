"""The export toolkit (installed as ``meteora_edge.export``): heavy tools, imported lazily.

Only this package may import torch, transformers or optimum, and only inside functions.
"""
