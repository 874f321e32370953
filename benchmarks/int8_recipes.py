"""Which int8 recipe pays on this CPU: build candidate quantisations of a bundle's fp32 encoder
(torch-free, onnxruntime.quantization) and compare them side by side in one process.

Each recipe is written to a temporary folder; then every query (a HotpotQA dev question and 40
candidate sentences, as in select_latency.py) is embedded by every recipe in turn (interleaved, so
a busy neighbour hurts all alike). Printed per recipe: p50 per query, sentences/s, the ratio to the
bundle's ``int8-dot`` and the min/mean cosine to fp32 over the dev sentences. Retrieval F1 is not
measured here (run benchmarks/encoder_variants.py on a bundle holding the winner).

    python benchmarks/int8_recipes.py [--bundle models/bundles/default] [--threads 1] [--queries 10]
    python benchmarks/int8_recipes.py --recipes all,dot-u8,nbits8   # a subset

``nbits8``/``nbits4`` (MatMulNBits, int8 compute with block-wise activation scales) need the
``onnx_ir`` package; they are skipped without it.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _machine import machine_header

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "hotpotqa_distractor_dev50.json"
DOT_KEEP = r"/layer\.[01]/output/dense/"  # what the bundle's int8-dot keeps in fp32
# name: (what it is, quantize_dynamic options); "fused" runs onnxruntime's BERT optimizer first
RECIPES = {
    "all": ("every MatMul int8, s8 weights per channel", {}),
    "dot-u8": ("int8-dot with u8 weights (u8u8 kernels)", {"keep": DOT_KEEP, "u8": True}),
    "dot-reduce-range": ("int8-dot with 7-bit weights", {"keep": DOT_KEEP, "reduce_range": True}),
    "dot-per-tensor": ("int8-dot with one weight scale per tensor", {"keep": DOT_KEEP, "per_channel": False}),
    "fused-qattention": ("BERT optimizer (fused Attention/SkipLayerNorm/BiasGelu), then MatMul+Attention int8",
                         {"fused": True, "ops": ("MatMul", "Attention")}),
    "fused-dot": ("BERT optimizer, then int8-dot's MatMuls (Attention stays fp32)", {"fused": True, "keep": DOT_KEEP}),
    "nbits8": ("MatMulNBits 8-bit, block 32, accuracy level 4 (int8 compute)", {"nbits": 8}),
    "nbits4": ("MatMulNBits 4-bit, block 32, accuracy level 4 (int8 compute)", {"nbits": 4}),
}


def _fused(fp32: Path, out: Path) -> Path:
    from onnxruntime.transformers import optimizer

    model = optimizer.optimize_model(str(fp32), model_type="bert", num_heads=12, hidden_size=384, opt_level=0,
                                     use_gpu=False)
    model.save_model_to_file(str(out))
    return out


def build(recipe: str, fp32: Path, folder: Path) -> Path:
    """Write one recipe's model into ``folder`` (embedding table and graph as the export does them)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from export.encoder import _preoptimize, _quantize_embedding_tables

    options = RECIPES[recipe][1]
    out = folder / f"{recipe}.onnx"
    if "nbits" in options:
        from onnxruntime.quantization.matmul_nbits_quantizer import DefaultWeightOnlyQuantConfig, MatMulNBitsQuantizer

        bits = options["nbits"]
        config = DefaultWeightOnlyQuantConfig(block_size=32, is_symmetric=True, accuracy_level=4, bits=bits)
        quantizer = MatMulNBitsQuantizer(onnx.load(str(fp32)), bits=bits, block_size=32, is_symmetric=True,
                                         accuracy_level=4, algo_config=config)
        quantizer.process()
        quantizer.model.save_model_to_file(str(out), use_external_data_format=False)
    else:
        source = _fused(fp32, folder / "fused-fp32.onnx") if options.get("fused") else fp32
        graph = onnx.load(str(source), load_external_data=False).graph
        weights = {init.name for init in graph.initializer}
        keep = [n.name for n in graph.node if n.op_type == "MatMul" and len(n.input) == 2 and n.input[1] in weights
                and options.get("keep") and re.search(options["keep"], n.name)]
        quantize_dynamic(str(source), str(out), per_channel=options.get("per_channel", True),
                         reduce_range=options.get("reduce_range", False),
                         weight_type=QuantType.QUInt8 if options.get("u8") else QuantType.QInt8,
                         op_types_to_quantize=list(options.get("ops", ("MatMul",))), nodes_to_exclude=keep,
                         extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    _quantize_embedding_tables(out)
    _preoptimize(out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle", default=str(ROOT / "models" / "bundles" / "default"))
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--recipes", default=",".join(RECIPES), help="Comma-separated names [all of them].")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--queries", type=int, default=10, help="Timed queries per model.")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from select_latency import queries

    from meteora_edge.models.bundle import Bundle
    from meteora_edge.models.onnx_encoder import OnnxEncoder

    recipes = args.recipes.split(",")
    unknown = [r for r in recipes if r not in RECIPES]
    if unknown:
        raise SystemExit(f"unknown recipe {unknown[0]!r}; choose from {', '.join(RECIPES)}")
    bundle = Bundle.load(args.bundle)
    comp = bundle.component("encoder")
    settings = {k: comp.settings[k] for k in ("max_length", "pooling", "normalize", "pad_id")}
    fp32, tokenizer = bundle.file("encoder", "fp32"), bundle.file("encoder", "tokenizer")
    print(machine_header(("numpy", "onnxruntime", "onnx", "meteora-edge")))
    models = {"fp32": fp32, **({"int8-dot": bundle.file("encoder", "int8-dot")} if "int8-dot" in comp.files else {})}
    with tempfile.TemporaryDirectory(prefix="int8-recipes-") as tmp:
        for recipe in recipes:
            if "nbits" in RECIPES[recipe][1] and not _has("onnx_ir"):
                print(f"{recipe}: skipped (pip install onnx_ir)")
                continue
            models[recipe] = build(recipe, fp32, Path(tmp))
        encoders = {name: OnnxEncoder(path, tokenizer, threads=args.threads, **settings) for name, path in models.items()}
        work = queries(Path(args.data), 40)
        sentences = [s for _, group in work for s in group][:600]
        ref = encoders["fp32"].encode(sentences)
        cosines = {name: (e.encode(sentences) * ref).sum(axis=1) for name, e in encoders.items()}
        times: dict[str, list[float]] = {name: [] for name in encoders}
        for question, group in work[1:args.queries + 1]:
            for name, encoder in encoders.items():
                t0 = time.perf_counter()
                encoder.encode([question, *group])
                times[name].append(time.perf_counter() - t0)
    base = statistics.median(times.get("int8-dot", times["fp32"]))
    print(f"\n{len(times['fp32'])} queries of 41 texts, {args.threads} thread(s), interleaved; cosine over "
          f"{len(sentences)} dev sentences\n")
    print(f"{'model':<18} {'p50 ms':>8} {'sent/s':>7} {'vs int8-dot':>11} {'cos min':>8} {'cos mean':>9}  recipe")
    for name, rows in times.items():
        p50 = statistics.median(rows)
        what = RECIPES[name][0] if name in RECIPES else "the bundle's"
        print(f"{name:<18} {p50 * 1000:>8.1f} {41 / p50:>7.1f} {base / p50:>10.2f}x {cosines[name].min():>8.4f} "
              f"{cosines[name].mean():>9.4f}  {what}")


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


if __name__ == "__main__":
    main()
