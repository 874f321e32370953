"""Put a language model into a bundle as GGUF: convert a Hugging Face causal LM, or import a GGUF.

Conversion uses llama.cpp's own ``convert_hf_to_gguf.py``, taken at export time from a
llama.cpp checkout (``llama_cpp_dir``) or from the llama-cpp-python source distribution
fetched with pip (cached under ``~/.cache/meteora-edge``); none of it lives in this
repository. It runs in a subprocess with the current Python, with that checkout's own
``gguf-py`` first on the path. The F16 result is then quantised through llama-cpp-python's
``llama_model_quantize`` (also in a subprocess: llama.cpp writes to stderr and may abort).

Importing an existing GGUF needs neither torch nor llama-cpp-python: the file is checked,
its metadata read in pure Python, copied into the bundle and hashed into the manifest.
Every file lands under a temporary name and is renamed into place; the manifest is updated
atomically last.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from meteora_edge.models.bundle import Bundle, Component, add_component, file_entry
from meteora_edge.errors import ConfigError, InputError, ModelError
from meteora_edge.models.llm_file import check_gguf_complete, context_length, licence_of, quant_name, read_gguf_metadata
from meteora_edge.models.llm_model import DEFAULT_CONTEXT_SIZE

__all__ = ["QUANTS", "LLAMA_CPP_PYTHON_VERSION", "export_llm", "import_gguf", "fetch_converter", "converter_cache_dir",
           "quantize_gguf"]

logger = logging.getLogger(__name__)

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
QUANTS = {"F16": 1, "Q8_0": 7, "Q4_K_M": 15}  # llama_ftype values
_CONVERTER = "convert_hf_to_gguf.py"
_CONVERTER_PARTS = (_CONVERTER, "conversion/", "gguf-py/")
# Rewrite a GGUF (argv[1]) into argv[3] with the tokenizer.* metadata of argv[2], under the
# converter's own gguf-py; every other key and every tensor is copied unchanged.
_RETOKENIZE = """
import sys
import gguf
target, source = gguf.GGUFReader(sys.argv[1]), gguf.GGUFReader(sys.argv[2])
def tokens(reader):
    field = reader.fields.get("tokenizer.ggml.tokens")
    return None if field is None else len(field.data)
if None not in (tokens(target), tokens(source)) and tokens(target) != tokens(source):
    sys.exit(f"the tokenizer GGUF has {tokens(source)} tokens, the converted model {tokens(target)}")
writer = gguf.GGUFWriter(sys.argv[3], arch=target.fields["general.architecture"].contents(), endianess=target.endianess)
def copy(field):
    kind = field.types[0]
    writer.add_key_value(field.name, field.contents(), kind,
                         sub_type=field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None)
for field in target.fields.values():
    if not field.name.startswith(("GGUF.", "tokenizer.")) and field.name != "general.architecture":
        copy(field)
for field in source.fields.values():
    if field.name.startswith("tokenizer."):
        copy(field)
for tensor in target.tensors:
    writer.add_tensor_info(tensor.name, tensor.data.shape, tensor.data.dtype, tensor.data.nbytes, tensor.tensor_type)
writer.write_header_to_file()
writer.write_kv_data_to_file()
writer.write_ti_data_to_file()
for tensor in target.tensors:
    writer.write_tensor_data(tensor.data, tensor_endianess=target.endianess)
writer.close()
"""
_QUANTIZE = """
import ctypes, sys
import llama_cpp
params = llama_cpp.llama_model_quantize_default_params()
params.ftype = int(sys.argv[3])
params.nthread = int(sys.argv[4])
sys.exit(llama_cpp.llama_model_quantize(sys.argv[1].encode(), sys.argv[2].encode(), ctypes.byref(params)))
"""


def _cache_dir() -> Path:
    root = os.environ.get("METEORA_EDGE_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "meteora-edge")
    return Path(root)


def _last_lines(text: str, n: int = 1) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("Writing:")]
    return " | ".join(lines[-n:]) if lines else "no output"


def _run(args: list[str], *, what: str, env: dict[str, str] | None = None, timeout: float = 3600) -> str:
    try:
        proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise ModelError(f"{what} did not finish within {timeout:.0f} s") from None
    if proc.returncode != 0:
        raise ModelError(f"{what} failed (exit {proc.returncode}): {_last_lines(proc.stderr + proc.stdout)}")
    return proc.stdout + proc.stderr


def _check_converter(root: Path) -> Path:
    if not (root / _CONVERTER).is_file() or not (root / "gguf-py" / "gguf").is_dir():
        raise InputError(
            f"{root} is not a llama.cpp checkout: it needs {_CONVERTER} and gguf-py/; "
            "point --llama-cpp at a llama.cpp source folder, or leave it out to fetch the converter with pip"
        )
    return root


def converter_cache_dir(version: str = LLAMA_CPP_PYTHON_VERSION) -> Path:
    """Where :func:`fetch_converter` keeps the converter by default.

    ``$METEORA_EDGE_CACHE/llama-cpp-convert/<version>``, else under ``~/.cache/meteora-edge``;
    ``scripts/setup-dev.sh`` fills it so that the tests never download.
    """
    return _cache_dir() / "llama-cpp-convert" / version


def fetch_converter(dest: str | os.PathLike[str] | None = None, *, version: str = LLAMA_CPP_PYTHON_VERSION) -> Path:
    """llama.cpp's HF→GGUF converter from the llama-cpp-python sdist, fetched once with pip.

    Only ``convert_hf_to_gguf.py``, its ``conversion/`` package and ``gguf-py/`` are
    extracted (the sdist's own ``gguf-py`` matches its converter; PyPI's ``gguf`` may not).

    Args:
        dest: where to keep them; default ``~/.cache/meteora-edge/llama-cpp-convert/<version>``
            (``METEORA_EDGE_CACHE`` moves the cache).
        version: the llama-cpp-python release to take the converter from.

    Returns:
        A folder laid out like a llama.cpp checkout, usable as ``llama_cpp_dir``.

    Raises:
        ModelError: pip could not download the sdist, or it lacks the converter.
    """
    target = Path(dest) if dest is not None else converter_cache_dir(version)
    if (target / ".complete").is_file():
        return _check_converter(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{target.name}.") as tmp:
        download = Path(tmp) / "sdist"
        logger.info("fetching llama-cpp-python %s source with pip (about 75 MB)", version)
        _run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
             f"llama-cpp-python=={version}", "-d", str(download), "--disable-pip-version-check", "-q"],
            what=f"pip download of llama-cpp-python=={version} (needs PyPI, or give --llama-cpp DIR)",
            timeout=1800,
        )
        archives = sorted(download.glob("llama_cpp_python-*.tar.gz"))
        if not archives:
            raise ModelError(f"pip did not produce a llama-cpp-python {version} source archive; give --llama-cpp DIR")
        staging = Path(tmp) / "convert"
        _extract_converter(archives[0], staging)
        (staging / ".complete").write_text(f"llama-cpp-python {version}\n", encoding="utf-8")
        shutil.rmtree(target, ignore_errors=True)
        os.replace(staging, target)
    return _check_converter(target)


def _extract_converter(archive: Path, staging: Path) -> None:
    """Extract the converter files from the sdist, refusing any path that leaves ``staging``."""
    found = 0
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar.getmembers():
            parts = PurePosixPath(member.name).parts
            if len(parts) < 4 or parts[1:3] != ("vendor", "llama.cpp") or not member.isfile():
                continue
            rel = PurePosixPath(*parts[3:])
            if ".." in rel.parts or not any(str(rel) == p or str(rel).startswith(p) for p in _CONVERTER_PARTS):
                continue
            out = staging.joinpath(*rel.parts)
            out.parent.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(member)
            if source is None:
                continue
            with source, open(out, "wb") as handle:
                shutil.copyfileobj(source, handle)
            found += 1
    if not (staging / _CONVERTER).is_file():
        raise ModelError(f"{archive.name} holds no vendor/llama.cpp/{_CONVERTER}; give --llama-cpp DIR")
    logger.info("extracted %d converter files from %s", found, archive.name)


def quantize_gguf(source: str | os.PathLike[str], target: str | os.PathLike[str], quant: str, *, threads: int = 1) -> Path:
    """Quantise an F16/F32 GGUF to ``quant`` with llama-cpp-python's ``llama_model_quantize``.

    Raises:
        ConfigError: an unknown ``quant``.
        ModelError: llama.cpp refused the file.
    """
    if quant not in QUANTS:
        raise ConfigError(f"quant must be one of {', '.join(QUANTS)}, got {quant!r}")
    _run([sys.executable, "-c", _QUANTIZE, str(source), str(target), str(QUANTS[quant]), str(threads)],
         what=f"quantising {Path(source).name} to {quant} (needs llama-cpp-python: pip install \"meteora-edge[llm]\")")
    return Path(target)


def _copy_atomic(source: Path, target: Path) -> None:
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    try:
        shutil.copyfile(source, tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _install(
    bundle_dir: Path,
    gguf: Path,
    *,
    move: bool,
    name: str,
    source: str,
    licence: str | None,
    context_size: int | None,
    chat_format: str | None,
    report: dict[str, Any],
) -> Component:
    metadata = check_gguf_complete(gguf).metadata  # a truncated file is refused before it is copied
    trained = context_length(metadata)
    if context_size is None:
        context_size = min(DEFAULT_CONTEXT_SIZE, trained) if trained else DEFAULT_CONTEXT_SIZE
    elif not isinstance(context_size, int) or context_size < 1:
        raise ConfigError(f"context size must be a positive integer, got {context_size!r}")
    elif trained and context_size > trained:
        raise ConfigError(f"context size {context_size} exceeds the {trained} tokens {gguf.name} was trained for; "
                          f"give --context-size {trained} or less")
    has_template = isinstance(metadata.get("tokenizer.chat_template"), str)
    if chat_format is None:
        chat_format = "gguf" if has_template else "plain"
    elif chat_format not in ("gguf", "chatml", "plain"):
        raise ConfigError(f"chat format must be gguf, chatml or plain, got {chat_format!r}")
    elif chat_format == "gguf" and not has_template:
        raise ConfigError(f"{gguf.name} has no chat template; use chat format 'plain' or 'chatml'")
    previous = Bundle.load(bundle_dir).components.get("llm") if (bundle_dir / "manifest.json").exists() else None
    relative = f"llm/{name}"
    target = bundle_dir / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    if gguf.resolve() != target.resolve():
        if move:
            os.replace(gguf, target)
        else:
            _copy_atomic(gguf, target)
    component = Component(
        kind="llm",
        files={"model": file_entry(bundle_dir, relative)},
        settings={"chat_format": chat_format, "context_size": context_size, "quant": quant_name(metadata)},
        source=source,
        licence=licence or licence_of(metadata) or "unknown (not recorded in the GGUF)",
        report={
            **report,
            "architecture": metadata.get("general.architecture"),
            "name": metadata.get("general.name"),
            "trained_context": trained,
        },
    )
    add_component(bundle_dir, "llm", component)
    if previous is not None:
        old = previous.files.get("model")
        if old is not None and old.path != relative:
            (bundle_dir / old.path).unlink(missing_ok=True)
    logger.info("bundle %s: llm component %s (%s)", bundle_dir, relative, component.settings["quant"])
    return component


def import_gguf(
    gguf: str | os.PathLike[str],
    bundle_dir: str | os.PathLike[str],
    *,
    source: str | None = None,
    licence: str | None = None,
    context_size: int | None = None,
    chat_format: str | None = None,
) -> Component:
    """Copy an existing GGUF into a bundle as its ``llm`` component (no torch, no llama.cpp).

    Args:
        gguf: the ``.gguf`` file.
        bundle_dir: the bundle (created when absent).
        source: where the model came from (default: its ``general.name`` and file name).
        licence: the weights' licence (default: the GGUF's ``general.license``).
        context_size: context the runtime uses (default: min(4096, the trained context)).
        chat_format: ``gguf`` | ``chatml`` | ``plain`` (default: ``gguf`` when the file has a template).

    Returns:
        The component written to the manifest.

    Raises:
        ModelError: the file is missing or not a readable GGUF.
        BundleError: the bundle's manifest is malformed.
        ConfigError: a bad option.
    """
    path = Path(gguf)
    metadata = read_gguf_metadata(path)
    name = metadata.get("general.name")
    return _install(
        Path(bundle_dir), path, move=False, name=path.name,
        source=source or (f"{name} ({path.name})" if isinstance(name, str) else path.name),
        licence=licence, context_size=context_size, chat_format=chat_format, report={"method": "import"},
    )


def _local_model_dir(source: str) -> Path:
    path = Path(source)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise InputError(f"{path} has no config.json; give a Hugging Face causal LM folder")
        return path
    if path.exists():
        raise InputError(f"{path} is a file; give a Hugging Face model folder, or use --gguf FILE to import a GGUF")
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise InputError(f"{source} is not a folder and huggingface_hub is not installed to download it") from None
    try:
        return Path(snapshot_download(repo_id=source, allow_patterns=["*.json", "*.safetensors", "*.model", "*.txt", "*.py"]))
    except Exception as exc:  # the hub raises many types; offline it is an error to report, not a crash
        raise InputError(f"{source} is not a local folder and could not be downloaded ({type(exc).__name__}); "
                         "download the model first and give its folder") from None


def export_llm(
    source: str,
    bundle_dir: str | os.PathLike[str],
    *,
    quant: str = "Q4_K_M",
    llama_cpp_dir: str | os.PathLike[str] | None = None,
    licence: str | None = None,
    context_size: int | None = None,
    chat_format: str | None = None,
    threads: int = 1,
    tokenizer_from: str | os.PathLike[str] | None = None,
) -> Component:
    """Convert a Hugging Face causal LM to GGUF, quantise it and add it to a bundle.

    Args:
        source: a local Hugging Face model folder (or a hub id, downloaded when online).
        bundle_dir: the bundle (created when absent).
        quant: ``F16``, ``Q8_0`` or ``Q4_K_M``.
        llama_cpp_dir: a llama.cpp checkout holding ``convert_hf_to_gguf.py``; default: fetched
            from the llama-cpp-python sdist with pip (see :func:`fetch_converter`).
        licence, context_size, chat_format: as :func:`import_gguf`.
        threads: quantisation threads.
        tokenizer_from: a GGUF whose ``tokenizer.*`` metadata replaces the converted one — for
            a model trained from that GGUF (``dpo-train --model FILE.gguf``): transformers
            rebuilds a GGUF's tokenizer in its own classes, from which the converter may write
            another kind of vocabulary (a gpt2 BPE as a llama one, whose byte tokens llama.cpp
            cannot find).

    Returns:
        The component written to the manifest.

    Raises:
        ConfigError: an unknown ``quant``.
        InputError: ``source`` or ``llama_cpp_dir`` is not usable.
        ModelError: conversion or quantisation failed (the message quotes the converter).
    """
    if quant not in QUANTS:
        raise ConfigError(f"quant must be one of {', '.join(QUANTS)}, got {quant!r}")
    model_dir = _local_model_dir(source)
    if tokenizer_from is not None:
        read_gguf_metadata(tokenizer_from)  # a missing or non-GGUF file stops here, before the converter runs
    converter = _check_converter(Path(llama_cpp_dir)) if llama_cpp_dir else fetch_converter()
    out = Path(bundle_dir)
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        return _convert_into(out, model_dir, converter, quant=quant, source=source, licence=licence,
                             context_size=context_size, chat_format=chat_format, threads=threads,
                             tokenizer_from=tokenizer_from)
    except BaseException:
        if created and not any(out.iterdir()):
            out.rmdir()  # leave no empty bundle behind
        raise


def _convert_into(
    out: Path,
    model_dir: Path,
    converter: Path,
    *,
    quant: str,
    source: str,
    licence: str | None,
    context_size: int | None,
    chat_format: str | None,
    threads: int,
    tokenizer_from: str | os.PathLike[str] | None = None,
) -> Component:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(converter / "gguf-py"), str(converter)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    with tempfile.TemporaryDirectory(dir=out, prefix=".llm-export.") as tmp:
        f16 = Path(tmp) / "model.F16.gguf"
        _run([sys.executable, str(converter / _CONVERTER), str(model_dir), "--outfile", str(f16), "--outtype", "f16"],
             what=f"llama.cpp's converter on {model_dir} (it needs the export extra: torch, transformers, sentencepiece)", env=env)
        if tokenizer_from is not None:
            converted, f16 = f16, Path(tmp) / "model.F16.tokenizer.gguf"
            _run([sys.executable, "-c", _RETOKENIZE, str(converted), str(tokenizer_from), str(f16)],
                 what=f"copying the tokenizer of {tokenizer_from}", env=env)
            converted.unlink()
        final = f16 if quant == "F16" else quantize_gguf(f16, Path(tmp) / f"model.{quant}.gguf", quant, threads=threads)
        return _install(
            out, final, move=True, name=f"{model_dir.name}.{quant}.gguf", source=source, licence=licence,
            context_size=context_size, chat_format=chat_format,
            report={"method": "convert_hf_to_gguf", "converter": str(converter), "quant_requested": quant,
                    **({"tokenizer_from": str(tokenizer_from)} if tokenizer_from is not None else {})},
        )
