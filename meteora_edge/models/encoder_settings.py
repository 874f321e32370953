"""What a bundle's encoder component settles before its model runs: the settings read from the
manifest and checked, the embedding cache a caller asked for, whether a variant quantises its
activations per batch, and the key its vectors are cached under."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Union

from ..errors import BundleError, ConfigError
from .embedding_cache import EmbeddingCache, cache_wanted_by_env, default_cache
from .onnx_session import onnxruntime_version

__all__ = ["POOLINGS", "CacheSetting", "cache_key", "dynamic_activations", "encoder_settings", "positive_int",
           "resolve_cache"]

POOLINGS = ("mean", "cls")
# a cache argument: None = only when the environment asks (METEORA_EDGE_CACHE names a folder or
# "on"), True = the default cache (METEORA_EDGE_CACHE / the user cache folder, unless "off"),
# False = none, a folder, or an EmbeddingCache
CacheSetting = Union[bool, None, str, "os.PathLike[str]", EmbeddingCache]


def positive_int(name: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")
    return value


def cache_key(model_sha256: str, tokenizer_sha256: str, settings: Mapping[str, Any]) -> str:
    """A short hash of everything that decides a vector (kept out of the index identity, which
    must not change when onnxruntime is upgraded)."""
    parts = {
        "model": model_sha256, "tokenizer": tokenizer_sha256, "onnxruntime": onnxruntime_version(),
        **{k: settings.get(k) for k in ("max_length", "pooling", "normalize", "pad_id")},
        **({"isolated": True} if settings.get("isolated") else {}),  # one text a run: other vectors than batched
    }
    return "onnx-" + hashlib.sha256(json.dumps(parts, sort_keys=True).encode("utf-8")).hexdigest()[:32]


def dynamic_activations(settings: Mapping[str, Any], variant: str) -> bool:
    """Whether ``variant`` quantises activations at run time, one scale per tensor (so per batch):
    what its manifest record says, else what every int8 variant exported so far does."""
    record = (settings.get("quantization") or {}).get(variant)
    if isinstance(record, Mapping) and isinstance(record.get("activations"), str):
        said = record["activations"]
        return "run time" in said and "per tensor" in said
    return variant != "fp32"


def resolve_cache(setting: CacheSetting) -> EmbeddingCache | None:
    if setting is None:
        return default_cache() if cache_wanted_by_env() else None
    if setting is True:
        return default_cache()
    if setting is False:
        return None
    if isinstance(setting, EmbeddingCache):
        return setting
    if isinstance(setting, (str, os.PathLike)):
        return EmbeddingCache(setting)
    raise ConfigError(f"cache must be True, False, a folder or an EmbeddingCache, got {type(setting).__name__}")


def encoder_settings(raw: Mapping[str, Any], root: Path) -> dict[str, Any]:
    """The constructor keywords from a manifest's encoder settings, checked."""
    settings: dict[str, Any] = {}
    try:
        settings["max_length"] = positive_int("max_length", raw.get("max_length", 256))
        if raw.get("dimension") is not None:
            settings["dimension"] = positive_int("dimension", raw["dimension"])
    except ConfigError as exc:
        raise BundleError(f"encoder settings of {root}: {exc}; re-export the bundle") from None
    pooling = raw.get("pooling", "mean")
    if pooling not in POOLINGS:
        raise BundleError(f"encoder settings of {root}: unknown pooling {pooling!r}; this version reads {POOLINGS}")
    settings["pooling"] = pooling
    settings["normalize"] = bool(raw.get("normalize", True))
    pad_id = raw.get("pad_id", 0)
    if not isinstance(pad_id, int) or isinstance(pad_id, bool) or pad_id < 0:
        raise BundleError(f"encoder settings of {root}: pad_id must be a non-negative integer, got {pad_id!r}")
    settings["pad_id"] = pad_id
    return settings
