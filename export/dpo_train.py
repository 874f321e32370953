"""DPO training of the rationale generator (extra ``train``: torch, transformers, trl, peft, datasets).

Rows come from ``meteora-edge dpo-prepare``. Each is rendered to text exactly as the runtime
prompts the model: with the tokenizer's chat template when it has one (a template that
rejects the system role gets it merged into the first user turn, as
:class:`~meteora_edge.LocalLLM` does), else in the runtime's plain layout (turns joined by a
blank line, BOS first). ``trl.DPOTrainer`` then trains with METEORA's settings: beta 0.05,
3 epochs, learning rate 3e-5, cosine schedule, batch 1, gradient accumulation 2. With LoRA
the adapter is merged before saving, so ``meteora-edge export llm`` converts the result
like any Hugging Face causal LM. The output folder appears only when training succeeded.

Example:
    >>> from meteora_edge.export.dpo_train import DPOTrainingConfig, train_dpo
    >>> report = train_dpo("dpo/train.jsonl", "SmolLM2-135M-Instruct", "trained",
    ...                    config=DPOTrainingConfig(lora=True, max_steps=50))          # doctest: +SKIP
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from meteora_edge.training.dpo_files import read_pairs
from meteora_edge.errors import ConfigError, InputError, MissingExtraError, ModelError

__all__ = ["DPOTrainingConfig", "render_pair", "train_dpo", "REPORT_NAME"]

logger = logging.getLogger(__name__)

REPORT_NAME = "dpo_train.json"


@dataclass(frozen=True)
class DPOTrainingConfig:
    """Training settings; the defaults are METEORA's. Pass them by keyword.

    Args:
        beta: DPO temperature (how far the policy may move from the reference).
        epochs: passes over the train rows (ignored when ``max_steps`` is set).
        learning_rate: peak AdamW learning rate, cosine-decayed.
        batch_size: rows per device step.
        gradient_accumulation: steps per optimiser update.
        max_steps: stop after this many optimiser updates (None: run the epochs).
        lora: train a LoRA adapter (merged into the weights before saving) instead of all weights.
        lora_r / lora_alpha / lora_dropout: the adapter's rank, scale and dropout.
        max_length: cut prompt + completion to this many tokens, keeping the end (None: no cut).
        seed: initialisation and data order.
        threads: torch CPU threads (None: torch's default).

    Raises:
        ConfigError: a value out of range.
    """

    beta: float = 0.05
    epochs: float = 3.0
    learning_rate: float = 3e-5
    batch_size: int = 1
    gradient_accumulation: int = 2
    max_steps: int | None = None
    lora: bool = False
    lora_r: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.05
    max_length: int | None = None
    seed: int = 42
    threads: int | None = None

    def __post_init__(self) -> None:
        positive = {"beta": self.beta, "epochs": self.epochs, "learning_rate": self.learning_rate}
        for name, value in positive.items():
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
                raise ConfigError(f"{name} must be a positive number, got {value!r}")
        counts = {"batch_size": self.batch_size, "gradient_accumulation": self.gradient_accumulation,
                  "lora_r": self.lora_r, "lora_alpha": self.lora_alpha}
        optional = {"max_steps": self.max_steps, "max_length": self.max_length, "threads": self.threads}
        for name, value in {**counts, **{k: v for k, v in optional.items() if v is not None}}.items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if not isinstance(self.lora_dropout, (int, float)) or not 0.0 <= self.lora_dropout < 1.0:
            raise ConfigError(f"lora_dropout must be in [0, 1), got {self.lora_dropout!r}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise ConfigError(f"seed must be an integer, got {self.seed!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- rendering ---------------------------------------------------------------------------


def _template(tokenizer: Any, messages: list[dict[str, str]], *, generation_prompt: bool) -> str:
    try:
        return str(tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt))
    except Exception as first:  # templates raise freely (e.g. "system role not supported")
        if len(messages) > 1 and messages[0]["role"] == "system":
            merged = [{"role": messages[1]["role"], "content": messages[0]["content"] + messages[1]["content"]}] + messages[2:]
            try:
                return str(tokenizer.apply_chat_template(merged, tokenize=False, add_generation_prompt=generation_prompt))
            except Exception:
                pass
        raise ModelError(f"the tokenizer's chat template failed on a DPO prompt: {first}") from None


def render_pair(row: Mapping[str, Any], tokenizer: Any) -> dict[str, str]:
    """One DPO row as the texts the model sees: ``prompt`` and the ``chosen``/``rejected`` continuations.

    Rows of plain strings pass through unchanged. Chat rows use the tokenizer's chat
    template (the continuation is what the template adds after the generation prompt,
    end-of-turn marker included), or the runtime's plain layout when there is no template.

    Raises:
        ModelError: the chat template fails on the row.
    """
    prompt, chosen, rejected = row["prompt"], row["chosen"], row["rejected"]
    if isinstance(prompt, str):
        return {"prompt": prompt, "chosen": chosen, "rejected": rejected}
    if getattr(tokenizer, "chat_template", None):
        prompt_text = _template(tokenizer, prompt, generation_prompt=True)
        full_chosen = _template(tokenizer, prompt + chosen, generation_prompt=False)
        full_rejected = _template(tokenizer, prompt + rejected, generation_prompt=False)
        shared = len(os.path.commonprefix([prompt_text, full_chosen, full_rejected]))
        return {"prompt": prompt_text[:shared], "chosen": full_chosen[shared:], "rejected": full_rejected[shared:]}
    bos = tokenizer.bos_token if getattr(tokenizer, "add_bos_token", False) and tokenizer.bos_token else ""
    return {
        "prompt": bos + "\n\n".join(m["content"] for m in prompt),
        "chosen": "\n\n" + "".join(m["content"] for m in chosen),
        "rejected": "\n\n" + "".join(m["content"] for m in rejected),
    }


# -- training ----------------------------------------------------------------------------


def _heavy() -> dict[str, Any]:
    modules: dict[str, Any] = {}
    for name in ("torch", "transformers", "datasets", "trl"):
        try:
            modules[name] = __import__(name)
        except ImportError:
            raise MissingExtraError(name, "train") from None
    return modules


def _gguf_source(source: Path) -> bool:
    """Whether ``source`` is a GGUF file (loaded and dequantised by transformers) rather than a model folder.

    Raises:
        InputError: neither a folder with config.json nor a ``.gguf`` file.
    """
    if source.is_file() and source.suffix.lower() == ".gguf":
        return True
    if not (source / "config.json").is_file():
        raise InputError(f"{source} is neither a Hugging Face causal LM folder (config.json) nor a .gguf file; give one")
    return False


def _check_output(output_dir: Path, overwrite: bool) -> None:
    if output_dir.exists():
        if not output_dir.is_dir():
            raise InputError(f"--output-dir {output_dir} is a file; give a folder")
        if any(output_dir.iterdir()) and not overwrite:
            raise InputError(f"--output-dir {output_dir} is not empty; give a new folder or pass --overwrite")
    if not output_dir.parent.is_dir():
        raise InputError(f"cannot create {output_dir}: folder {output_dir.parent} does not exist")


def _dataset(datasets: Any, rows: Sequence[Mapping[str, Any]], tokenizer: Any) -> Any:
    return datasets.Dataset.from_list([render_pair(row, tokenizer) for row in rows])


def train_dpo(
    train_file: str | os.PathLike[str],
    model_dir: str | os.PathLike[str],
    output_dir: str | os.PathLike[str],
    *,
    validation_file: str | os.PathLike[str] | None = None,
    config: DPOTrainingConfig | None = None,
    overwrite: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Train a local Hugging Face causal LM with DPO and save it (with its tokenizer) to ``output_dir``.

    Args:
        train_file: DPO rows (``train.jsonl`` from ``dpo-prepare``).
        model_dir: the Hugging Face model folder to start from, or a ``.gguf`` file (transformers
            dequantises its weights to float32; llama and qwen2 architectures, extra ``train``
            with the ``gguf`` package); never modified, nothing downloaded.
        output_dir: where the trained model goes; created only when training succeeded.
        validation_file: rows to report the DPO loss and reward accuracy on after training.
        config: the settings (default: METEORA's).
        overwrite: replace a non-empty ``output_dir``.
        progress: called with (optimiser step, total steps) after each update.

    Returns:
        The report also saved as ``dpo_train.json`` in ``output_dir``: steps, seconds, losses,
        validation metrics and the settings.

    Raises:
        InputError: unreadable rows, an empty train file, a model that is neither a folder with
            config.json nor a .gguf file, an unusable output folder.
        ConfigError: a bad setting.
        MissingExtraError: torch, transformers, trl, datasets (peft for LoRA, gguf for a GGUF) is missing.
        ModelError: the model or tokenizer cannot be loaded, or training failed.
    """
    config = config if config is not None else DPOTrainingConfig()
    if not isinstance(config, DPOTrainingConfig):
        raise ConfigError(f"config must be a DPOTrainingConfig, got {type(config).__name__}")
    train_rows = read_pairs(train_file)
    validation_rows = read_pairs(validation_file) if validation_file is not None else []
    source, out = Path(model_dir), Path(output_dir)
    gguf_file = _gguf_source(source)
    _check_output(out, overwrite)
    m = _heavy()
    torch, transformers = m["torch"], m["transformers"]
    peft_config = None
    if config.lora:
        try:
            import peft
        except ImportError:
            raise MissingExtraError("peft", "train") from None
        peft_config = peft.LoraConfig(r=config.lora_r, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
                                      target_modules="all-linear", task_type="CAUSAL_LM")
    if config.threads is not None:
        torch.set_num_threads(config.threads)
    transformers.set_seed(config.seed)
    folder, where = (source.parent, {"gguf_file": source.name}) if gguf_file else (source, {})
    if gguf_file:
        try:
            import gguf  # noqa: F401  (transformers reads and dequantises GGUF tensors with it)
        except ImportError:
            raise MissingExtraError("gguf", "train") from None
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True, **where)
        model = transformers.AutoModelForCausalLM.from_pretrained(folder, local_files_only=True, dtype=torch.float32, **where)
    except (OSError, ValueError, KeyError, NotImplementedError) as exc:
        raise ModelError(f"cannot load the model or tokenizer from {source}: {' '.join(str(exc).split())[:300]}") from None
    train_set = _dataset(m["datasets"], train_rows, tokenizer)
    eval_set = _dataset(m["datasets"], validation_rows, tokenizer) if validation_rows else None
    report = {"model": str(source), "train_file": str(train_file), "train_pairs": len(train_rows),
              "validation_file": str(validation_file) if validation_file is not None else None,
              "validation_pairs": len(validation_rows)}
    bars_were_off = m["datasets"].are_progress_bars_disabled()
    m["datasets"].disable_progress_bars()  # the library never prints; progress goes to the callback
    try:
        report = _train(m, model, tokenizer, train_set, eval_set, peft_config, config, report, source, out, progress)
    finally:
        if not bars_were_off:
            m["datasets"].enable_progress_bars()
    logger.info("DPO: %d steps in %.1fs, loss %.4f -> %s", report["steps"], report["seconds"], report["train_loss"], out)
    return report


def _train(m: dict[str, Any], model: Any, tokenizer: Any, train_set: Any, eval_set: Any, peft_config: Any,
           config: DPOTrainingConfig, about: dict[str, Any], source: Path, out: Path,
           progress: Callable[[int, int], None] | None) -> dict[str, Any]:
    """Run DPOTrainer in a scratch folder beside ``out``; move the saved model into place at the end."""
    transformers, trl = m["transformers"], m["trl"]
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=f".{out.name}.dpo.") as work:
        args = trl.DPOConfig(
            output_dir=str(Path(work) / "trainer"),
            beta=config.beta,
            num_train_epochs=config.epochs,
            max_steps=config.max_steps if config.max_steps is not None else -1,
            learning_rate=config.learning_rate,
            lr_scheduler_type="cosine",
            per_device_train_batch_size=config.batch_size,
            per_device_eval_batch_size=config.batch_size,
            gradient_accumulation_steps=config.gradient_accumulation,
            max_prompt_length=None,
            max_completion_length=None,
            max_length=config.max_length,
            seed=config.seed,
            data_seed=config.seed,
            use_cpu=True,
            bf16=False,
            fp16=False,
            gradient_checkpointing=False,
            logging_steps=1,
            save_strategy="no",
            eval_strategy="no",
            report_to="none",
            disable_tqdm=True,
            dataloader_num_workers=0,
        )
        trainer = trl.DPOTrainer(model=model, ref_model=None, args=args, train_dataset=train_set, eval_dataset=eval_set,
                                 processing_class=tokenizer, peft_config=peft_config)
        history = _quiet(trainer, transformers, progress)
        started = time.perf_counter()
        try:
            result = trainer.train()
        except (RuntimeError, ValueError) as exc:
            raise ModelError(f"DPO training failed: {' '.join(str(exc).split())[:300]}") from None
        seconds = time.perf_counter() - started
        evaluation = trainer.evaluate() if eval_set is not None else {}
        trained = trainer.model.merge_and_unload() if config.lora else trainer.model
        report = {
            **about,
            "steps": int(result.global_step),
            "seconds": round(seconds, 3),
            "train_loss": float(result.training_loss),
            "log": history,
            "validation": {k: float(v) for k, v in evaluation.items() if isinstance(v, (int, float))},
            "config": config.to_dict(),
            "versions": {name: getattr(m[name], "__version__", "?") for name in ("torch", "transformers", "trl")},
        }
        staging = Path(work) / "model"
        trained.save_pretrained(staging, safe_serialization=True)
        tokenizer.save_pretrained(staging)
        _keep_sentencepiece(source, staging)
        (staging / REPORT_NAME).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        if out.exists():
            shutil.rmtree(out)
        os.replace(staging, out)
    return report


def _keep_sentencepiece(source: Path, staging: Path) -> None:
    """Leave ``tokenizer.model`` only when it is a sentencepiece model (llama.cpp's converter reads it).

    A tokenizer loaded from a GGUF file saves that whole GGUF as its ``tokenizer.model``; the
    converter would then fail to parse it as sentencepiece, and ``tokenizer.json`` holds the
    vocabulary anyway, so the copy is removed. A Hugging Face folder's own sentencepiece file
    is carried over when the fast tokenizer did not write it.
    """
    saved = staging / "tokenizer.model"
    if saved.is_file():
        with open(saved, "rb") as handle:
            if handle.read(4) == b"GGUF":
                saved.unlink()
    model_file = source / "tokenizer.model"
    if model_file.is_file() and not saved.exists():
        shutil.copyfile(model_file, saved)


def _quiet(trainer: Any, transformers: Any, progress: Callable[[int, int], None] | None) -> list[dict[str, float]]:
    """Replace the trainer's printing callbacks with one that logs and reports progress."""
    history: list[dict[str, float]] = []
    callbacks = transformers.trainer_callback
    trainer.remove_callback(callbacks.PrinterCallback)
    trainer.remove_callback(callbacks.ProgressCallback)

    class _Log(callbacks.TrainerCallback):  # type: ignore[misc, name-defined]
        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
            entry = {k: float(v) for k, v in (logs or {}).items() if isinstance(v, (int, float))}
            entry["step"] = float(state.global_step)
            history.append(entry)
            logger.info("step %d/%d %s", state.global_step, state.max_steps,
                        {k: round(v, 4) for k, v in entry.items() if k in ("loss", "rewards/accuracies", "rewards/margins")})

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if progress is not None:
                progress(state.global_step, state.max_steps)

    trainer.add_callback(_Log())
    return history
