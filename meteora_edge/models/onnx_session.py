"""The one place that builds onnxruntime sessions and tokenizers (shared by every ONNX model).

onnxruntime and tokenizers are optional (``pip install "meteora-edge[onnx]"``) and are only
imported inside these functions, so ``import meteora_edge`` stays light.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..documents import check_unicode
from ..errors import BundleError, ConfigError, MissingExtraError, ModelError

__all__ = ["OPTIMIZATION_LEVELS", "create_session", "load_tokenizer", "tokenize_batch", "check_tokenizer", "feed_for",
           "encode_padded", "pad_encodings", "onnxruntime_version", "write_tokenizer"]

logger = logging.getLogger(__name__)

OPTIMIZATION_LEVELS = ("disable", "basic", "extended", "all")
_NUMPY_TYPES = {"tensor(int64)": np.int64, "tensor(int32)": np.int32}


def _onnxruntime() -> Any:
    """onnxruntime with its telemetry off (the switch must be set before the first import)."""
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    try:
        import onnxruntime
    except ImportError:
        raise MissingExtraError("onnxruntime", "onnx") from None
    onnxruntime.disable_telemetry_events()
    return onnxruntime


def onnxruntime_version() -> str:
    """The installed onnxruntime's version (part of the embedding cache key).

    Raises:
        MissingExtraError: onnxruntime is not installed.
    """
    return str(_onnxruntime().__version__)


def create_session(
    model_path: str | os.PathLike[str], *, threads: int = 1, optimization: str = "all"
) -> Any:
    """Open an ONNX model on the CPU.

    Args:
        model_path: the ``.onnx`` file.
        threads: intra-op threads (inter-op is always 1: the graphs here are sequential).
        optimization: graph optimisation level, one of :data:`OPTIMIZATION_LEVELS`.

    Returns:
        An ``onnxruntime.InferenceSession`` on ``CPUExecutionProvider``.

    Raises:
        ConfigError: ``threads`` < 1 or an unknown optimisation level.
        MissingExtraError: onnxruntime is not installed.
        ModelError: onnxruntime cannot load the file (corrupt or not ONNX).
    """
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise ConfigError(f"threads must be a positive integer, got {threads!r}")
    if optimization not in OPTIMIZATION_LEVELS:
        raise ConfigError(f"optimization must be one of {', '.join(OPTIMIZATION_LEVELS)}, got {optimization!r}")
    ort = _onnxruntime()
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = {
        "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }[optimization]
    options.log_severity_level = 3
    try:
        session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own pybind exception types
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(f"onnxruntime cannot load {model_path}: {first[:300]}; re-export the model") from None
    logger.debug("onnx session %s: threads=%d optimization=%s", model_path, threads, optimization)
    return session


def load_tokenizer(path: str | os.PathLike[str], *, max_length: int) -> Any:
    """Load a ``tokenizer.json`` that truncates at ``max_length`` and never pads.

    Whatever truncation/padding the file declares is overridden: batches are padded
    dynamically by :func:`encode_padded`.

    Raises:
        MissingExtraError: tokenizers is not installed.
        BundleError: the file is missing or not a tokenizer.
    """
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise MissingExtraError("tokenizers", "onnx") from None
    if not Path(path).is_file():
        raise BundleError(f"tokenizer file not found: {path}; re-export the bundle")
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises plain Exception subclasses
        raise BundleError(f"cannot read tokenizer {path}: {str(exc)[:200]}; re-export the bundle") from None
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_length)
    check_tokenizer(tokenizer, path, error=BundleError)
    return tokenizer


# words no vocabulary holds whole: a tokenizer that cannot fall back to an unknown token fails here
_PROBE = "zqxjv\u2603\u10e6 \U0001f9ea qqqzzz"


def check_tokenizer(tokenizer: Any, path: object, *, error: type[Exception] = ModelError) -> None:
    """Refuse a tokenizer that cannot encode text outside its vocabulary (e.g. WordLevel without ``[UNK]``).

    Raises:
        ``error``: naming the file and the tokenizer's own message.
    """
    try:
        tokenizer.encode(_PROBE)
    except Exception as exc:  # tokenizers raises plain Exception
        raise error(f"tokenizer {path} cannot encode words outside its vocabulary ({str(exc)[:160]}); "
                    "give it an unknown token (e.g. [UNK]) or byte fallback") from None


def tokenize_batch(tokenizer: Any, inputs: list[Any], *, add_special_tokens: bool = True) -> list[Any]:
    """``tokenizer.encode_batch(inputs)`` (texts or text pairs) with every failure as one error.

    Raises:
        InputError: a text holds a lone surrogate (not valid Unicode).
        ModelError: the tokenizer refused a text.
    """
    for i, item in enumerate(inputs):
        for text in item if isinstance(item, tuple) else (item,):
            if isinstance(text, str):
                check_unicode(text, f"text {i}")
    try:
        return tokenizer.encode_batch(inputs, add_special_tokens=add_special_tokens)
    except Exception as exc:  # tokenizers raises plain Exception / TypeError
        raise ModelError(f"the tokenizer cannot encode text {str(exc)[:200]!r}; check the text and the tokenizer") from None


def encode_padded(tokenizer: Any, texts: list[str], *, pad_id: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Tokenise ``texts`` and pad to the longest: ``(input_ids, attention_mask)``, both int64."""
    return pad_encodings(tokenize_batch(tokenizer, texts), pad_id=pad_id)


def pad_encodings(encodings: list[Any], *, pad_id: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Pad tokenizer encodings (anything with ``.ids``) to the longest: ``(input_ids, attention_mask)``."""
    width = max((len(e.ids) for e in encodings), default=0)
    ids = np.full((len(encodings), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(encodings), width), dtype=np.int64)
    for row, enc in enumerate(encodings):
        ids[row, : len(enc.ids)] = enc.ids
        mask[row, : len(enc.ids)] = 1
    return ids, mask


def feed_for(session: Any, tensors: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Only the inputs the graph declares, in the integer type it declares.

    ``token_type_ids`` is filled with zeros when the graph wants it and none was given.

    Raises:
        ModelError: the graph needs an input nobody can supply.
    """
    feed: dict[str, np.ndarray] = {}
    for spec in session.get_inputs():
        value = tensors.get(spec.name)
        if value is None and spec.name == "token_type_ids" and "input_ids" in tensors:
            value = np.zeros_like(tensors["input_ids"])
        if value is None:
            raise ModelError(
                f"the ONNX graph needs input {spec.name!r}, which this runtime cannot supply "
                f"(it supplies {', '.join(sorted(tensors))}); export with the transformers library"
            )
        feed[spec.name] = value.astype(_NUMPY_TYPES.get(spec.type, np.int64), copy=False)
    return feed


def write_tokenizer(source: Path, target: Path, *, max_length: int, extra: str = "onnx") -> int:
    """Write ``source``'s ``tokenizer.json`` to ``target`` truncating at ``max_length`` and never
    padding (batches pad dynamically); return the pad id. Shared by the install and the export.

    Raises:
        MissingExtraError: tokenizers is not installed (``extra`` names the extra to install).
        ModelError: ``source`` is not a tokenizer file.
    """
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise MissingExtraError("tokenizers", extra) from None
    try:
        tokenizer = Tokenizer.from_file(str(source))
    except Exception as exc:  # tokenizers raises plain Exception subclasses
        raise ModelError(f"cannot read the tokenizer {source}: {str(exc)[:200]}") from None
    padding = tokenizer.padding
    candidates = [padding["pad_id"]] if padding else [tokenizer.token_to_id(t) for t in ("[PAD]", "<pad>")]
    pad_id = int(next((c for c in candidates if c is not None), 0))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_length)
    tokenizer.save(str(target))
    return pad_id
