"""A tiny random BERT checkpoint written inside the tests (model.safetensors + config.json +
tokenizer.json, as transformers saves one), a numpy forward pass that gives its exact expected
outputs, and a catalog entry that builds it. No torch, no download."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np

from tiny_onnx import VOCAB, write_tokenizer

CONFIG = {"architectures": ["BertForMaskedLM"], "model_type": "bert", "vocab_size": len(VOCAB), "hidden_size": 8,
          "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 16, "max_position_embeddings": 32,
          "type_vocab_size": 2, "layer_norm_eps": 1e-12, "hidden_act": "gelu", "pad_token_id": 0}


def tensors(*, seed: int = 0, mlm: bool = True, legacy: bool = False) -> dict[str, np.ndarray]:
    """Random weights under the names transformers writes (``bert.`` prefix and, with ``legacy``,
    LayerNorm ``gamma``/``beta``, as older BertForMaskedLM files have them)."""
    rng = np.random.default_rng(seed)
    h, i, v = CONFIG["hidden_size"], CONFIG["intermediate_size"], CONFIG["vocab_size"]

    def r(*shape: int) -> np.ndarray:
        return (rng.normal(size=shape) * 0.5).astype(np.float32)

    out = {"embeddings.word_embeddings.weight": r(v, h), "embeddings.position_embeddings.weight": r(32, h),
           "embeddings.token_type_embeddings.weight": r(2, h), "embeddings.LayerNorm.weight": 1 + r(h) * 0.1,
           "embeddings.LayerNorm.bias": r(h) * 0.1, "embeddings.position_ids": np.arange(32, dtype=np.int64)[None]}
    for n in range(CONFIG["num_hidden_layers"]):
        p = f"encoder.layer.{n}."
        for name in ("query", "key", "value"):
            out[f"{p}attention.self.{name}.weight"], out[f"{p}attention.self.{name}.bias"] = r(h, h), r(h)
        out.update({f"{p}attention.output.dense.weight": r(h, h), f"{p}attention.output.dense.bias": r(h),
                    f"{p}attention.output.LayerNorm.weight": 1 + r(h) * 0.1, f"{p}attention.output.LayerNorm.bias": r(h),
                    f"{p}intermediate.dense.weight": r(i, h), f"{p}intermediate.dense.bias": r(i),
                    f"{p}output.dense.weight": r(h, i), f"{p}output.dense.bias": r(h),
                    f"{p}output.LayerNorm.weight": 1 + r(h) * 0.1, f"{p}output.LayerNorm.bias": r(h)})
    if mlm:
        out = {f"bert.{k}": a for k, a in out.items()}
        out.update({"cls.predictions.transform.dense.weight": r(h, h), "cls.predictions.transform.dense.bias": r(h),
                    "cls.predictions.transform.LayerNorm.weight": 1 + r(h) * 0.1,
                    "cls.predictions.transform.LayerNorm.bias": r(h), "cls.predictions.bias": r(v)})
    if legacy:
        out = {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): a
               for k, a in out.items()}
    return out


def write_checkpoint(folder: Path, weights: dict[str, np.ndarray], *, config: dict | None = None) -> Path:
    """``folder`` with model.safetensors, config.json and tokenizer.json (the tokenizer pads and
    truncates, as shipped ones do)."""
    from safetensors.numpy import save_file

    folder.mkdir(parents=True, exist_ok=True)
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})
    (folder / "config.json").write_text(json.dumps(config or CONFIG))
    write_tokenizer(folder / "tokenizer.json")
    return folder


def _canonical(weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    out = {}
    for name, array in weights.items():
        name = name.removeprefix("bert.").replace("LayerNorm.gamma", "LayerNorm.weight")
        out[name.replace("LayerNorm.beta", "LayerNorm.bias")] = array.astype(np.float64)
    return out


def forward(weights: dict[str, np.ndarray], ids: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
    """BERT in float64 numpy: ``last_hidden_state`` and, with an MLM head, ``logits`` and ``sparse``."""
    t = _canonical(weights)
    heads, eps = CONFIG["num_attention_heads"], CONFIG["layer_norm_eps"]
    erf = np.vectorize(math.erf)

    def norm(x: np.ndarray, key: str) -> np.ndarray:
        mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + eps) * t[f"{key}.weight"] + t[f"{key}.bias"]

    def linear(x: np.ndarray, key: str) -> np.ndarray:
        return x @ t[f"{key}.weight"].T + t[f"{key}.bias"]

    def gelu(x: np.ndarray) -> np.ndarray:
        return 0.5 * x * (1 + erf(x / math.sqrt(2)))

    batch, seq = ids.shape
    x = t["embeddings.word_embeddings.weight"][ids] + t["embeddings.position_embeddings.weight"][:seq][None] \
        + t["embeddings.token_type_embeddings.weight"][0]
    x = norm(x, "embeddings.LayerNorm")
    size = x.shape[-1] // heads
    blocked = np.where(mask[:, None, None, :] > 0, 0.0, -1e30)
    for n in range(CONFIG["num_hidden_layers"]):
        p = f"encoder.layer.{n}"
        q, k, v = (linear(x, f"{p}.attention.self.{m}").reshape(batch, seq, heads, size).transpose(0, 2, 1, 3)
                   for m in ("query", "key", "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(size) + blocked
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, -1)
        x = norm(linear(context, f"{p}.attention.output.dense") + x, f"{p}.attention.output.LayerNorm")
        x = norm(linear(gelu(linear(x, f"{p}.intermediate.dense")), f"{p}.output.dense") + x, f"{p}.output.LayerNorm")
    out = {"last_hidden_state": x}
    if "cls.predictions.bias" in t:
        y = norm(gelu(linear(x, "cls.predictions.transform.dense")), "cls.predictions.transform.LayerNorm")
        logits = y @ t["embeddings.word_embeddings.weight"].T + t["cls.predictions.bias"]
        out["logits"] = logits
        out["sparse"] = (np.log1p(np.maximum(logits, 0)) * mask[:, :, None]).max(axis=1)
    return out


def part(package: str, module: str, path: Path, root: Path) -> dict:
    return {"package": package, "module": module, "path": path.relative_to(root / module).as_posix(),
            "size": path.stat().st_size, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


def catalog_entry(name: str, role: str, site: Path, module: str, *, variants: tuple[str, ...] = ()) -> dict:
    """A catalog entry that builds the checkpoint under ``site/module/model`` (an importable folder)."""
    folder = site / module / "model"
    files = {role_: part(f"{module.replace('_', '-')}==1.0", module, folder / file_name, site)
             for role_, file_name in (("weights", "model.safetensors"), ("config", "config.json"),
                                      ("tokenizer", "tokenizer.json"))}
    return {"name": name, "id": f"Tiny/{name}", "role": role, "package": files["weights"]["package"], "module": module,
            "licence": "apache-2.0", "export": f"meteora-edge export encoder {name}",
            "weights": {"path": files["weights"]["path"], "size": files["weights"]["size"],
                        "sha256": files["weights"]["sha256"]},
            "settings": {"dimension": CONFIG["hidden_size"], "max_length": 16, "pooling": "mean", "normalize": True},
            "onnx": {"build": {"architecture": "bert", "head": "mlm" if role == "sparse_encoder" else "none",
                               "variants": list(variants)}, "files": files}}
