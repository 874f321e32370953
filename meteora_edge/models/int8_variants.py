"""The int8 variants of an fp32 ONNX encoder: per-channel dynamic int8, torch-free.

Shared by ``meteora-edge export`` and ``models install`` (which builds the fp32 graph from the
weights, :mod:`.bert_graph`): onnxruntime's ``quantize_dynamic`` with int8 weights, one scale
per output channel (never per tensor, which wrecks MiniLM), activations quantised at run time,
and the large embedding tables stored as int8 rows. Needs ``onnx`` and ``onnxruntime`` only.

Example:
    >>> quantize_int8(Path("model.onnx"), Path("model.int8-dot.onnx"), recipe="int8-dot")  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import ConfigError, MissingExtraError

__all__ = ["INT8_RECIPES", "INT8_FILES", "quantize_int8", "preoptimize", "quantize_embedding_tables"]

# The int8 variants, as the MatMuls each keeps in fp32 (matched on the node names optimum
# writes for BERT-like encoders). onnxruntime's dynamic int8 quantises activations with one
# scale per tensor, so inputs with outlier channels (post-LayerNorm/post-GELU feed-forward
# inputs, the first layer) lose the most.
# * "int8" (mixed): the feed-forward blocks and layer 0 stay fp32; the attention projections of
#   layers 1.. and the embedding table are int8. For CPUs without int8 dot-product instructions,
#   where int8 GEMMs barely pay (measured on MiniLM, 135 varied texts: min cosine 0.99).
# * "int8-dot": every MatMul int8 except the feed-forward output projections of layers 0 and 1
#   (the two that cost the most retrieval F1 on HotpotQA when quantised). For VNNI/AMX/ARM
#   dot-product CPUs, where it runs about 2x fp32.
INT8_RECIPES: dict[str, re.Pattern[str]] = {
    "int8": re.compile(r"/layer\.\d+/(intermediate|output)/dense/|/layer\.0/"),
    "int8-dot": re.compile(r"/layer\.[01]/output/dense/"),
}
INT8_FILES = {"int8": "model.int8.onnx", "int8-dot": "model.int8-dot.onnx"}


@contextmanager
def _quiet_root_logger() -> Iterator[None]:
    """Keep the quantiser's advice off stderr: it logs "consider pre-processing" on the root logger at
    every call (the graph is pre-optimised after quantising, :func:`preoptimize`), which would print
    a stray ``WARNING:root:`` line under ``models install`` and ``export``."""
    root = logging.getLogger()
    level, quiet = root.level, logging.NullHandler()
    root.addHandler(quiet)  # the root logger's own handler is not set up by the advice either
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)
        root.removeHandler(quiet)


def quantize_int8(fp32: Path, int8: Path, *, recipe: str = "int8", extra: str = "onnx") -> dict[str, Any]:
    """Dynamic int8 with per-channel weights (never the per-tensor default, which loses quality).

    Args:
        fp32: the exported model.
        int8: where to write the quantised one.
        recipe: a key of :data:`INT8_RECIPES` (which MatMuls stay fp32).
        extra: the extra a missing onnx/onnxruntime error names.

    Returns:
        The recipe, recorded in the manifest.

    Raises:
        ConfigError: an unknown recipe. MissingExtraError: onnx or onnxruntime is not installed.
    """
    if recipe not in INT8_RECIPES:
        raise ConfigError(f"recipe must be one of {', '.join(INT8_RECIPES)}, got {recipe!r}")
    try:
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:
        raise MissingExtraError(exc.name or "onnxruntime", extra) from None
    graph = onnx.load(str(fp32), load_external_data=False).graph
    weights = {init.name for init in graph.initializer}
    matmuls = [n.name for n in graph.node if n.op_type == "MatMul" and len(n.input) == 2 and n.input[1] in weights]
    keep = [name for name in matmuls if INT8_RECIPES[recipe].search(name)]
    with _quiet_root_logger():
        quantize_dynamic(
            str(fp32), str(int8), per_channel=True, weight_type=QuantType.QInt8,
            op_types_to_quantize=["MatMul"], nodes_to_exclude=keep,
        )
    embeddings = quantize_embedding_tables(int8)
    return {
        "recipe": recipe,
        "method": "onnxruntime quantize_dynamic",
        "weights": "int8 symmetric, per output channel",
        "activations": "uint8, per tensor, computed at run time",
        "ops": "MatMul",
        "kept_fp32": keep,
        "embedding_tables": f"int8 symmetric, one scale per row: {', '.join(embeddings) or 'none'}",
        "graph": preoptimize(int8),
    }


def preoptimize(path: Path) -> str:
    """Save the graph as onnxruntime optimises it at the extended level (fusions, constant folding).

    The result still runs only on onnxruntime (it uses com.microsoft fused ops) but is portable
    across CPUs; loading it skips the fusion passes (about 50 ms of a 0.5 s cold start).
    """
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(path.with_suffix(".opt.onnx"))
    options.log_severity_level = 3
    ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    os.replace(path.with_suffix(".opt.onnx"), path)
    return f"pre-optimised by onnxruntime {ort.__version__} (extended level)"


def quantize_embedding_tables(path: Path, *, min_rows: int = 1024) -> list[str]:
    """Store large embedding tables as int8 rows with one scale per row (rewrites ``path``).

    ``Gather(table, ids)`` becomes ``Cast(Gather(table_int8, ids)) * Gather(scales, ids)``: only
    the looked-up rows are dequantised at run time, so the table shrinks 4× at no speed cost.

    Returns:
        The names of the rewritten tables.
    """
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(path))
    graph = model.graph
    tables = {init.name: init for init in graph.initializer}
    done: list[str] = []
    nodes = []
    for node in graph.node:
        table = tables.get(node.input[0]) if node.op_type == "Gather" else None
        if (
            table is None
            or table.data_type != onnx.TensorProto.FLOAT
            or len(table.dims) != 2
            or table.dims[0] < min_rows
            or any(a.name == "axis" and a.i != 0 for a in node.attribute)
        ):
            nodes.append(node)
            continue
        weights = numpy_helper.to_array(table).astype(np.float32)
        scales = np.abs(weights).max(axis=1, keepdims=True) / 127.0
        scales[scales == 0] = 1.0
        quantized = np.clip(np.rint(weights / scales), -127, 127).astype(np.int8)
        base = table.name
        graph.initializer.remove(table)
        graph.initializer.extend([numpy_helper.from_array(quantized, f"{base}_int8"),
                                  numpy_helper.from_array(scales.astype(np.float32), f"{base}_row_scale")])
        ids, out = node.input[1], node.output[0]
        nodes += [
            helper.make_node("Gather", [f"{base}_int8", ids], [f"{out}_int8"], name=f"{node.name}_int8"),
            helper.make_node("Cast", [f"{out}_int8"], [f"{out}_float"], name=f"{node.name}_cast",
                             to=onnx.TensorProto.FLOAT),
            helper.make_node("Gather", [f"{base}_row_scale", ids], [f"{out}_scale"], name=f"{node.name}_scale"),
            helper.make_node("Mul", [f"{out}_float", f"{out}_scale"], [out], name=f"{node.name}_dequantize"),
        ]
        done.append(base)
    if done:
        del graph.node[:]
        graph.node.extend(nodes)
        onnx.save(model, str(path))
    return done
