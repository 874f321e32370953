"""``meteora-edge dpo-derive | dpo-prepare | dpo-train``: preference data and DPO training of the generator."""

from __future__ import annotations

import json
import sys

import click

from meteora_edge.fileio import escape_line_separators, write_text_atomic

from .encoder_option import bundle_option, cache_option, encoder_from_options, precision_option, threads_option
from .output import check_output_dir, check_output_path


@click.command("dpo-derive")
@click.option("--hotpot", "hotpot_file", required=True, help="HotpotQA-format JSON (Hugging Face datasets layout).")
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False), help="JSONL of labelled-candidate records.")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Only the first N questions.")
@click.option("--expansion-window", type=click.IntRange(min=0), default=0, show_default=True,
              help="ECSE neighbour expansion over the question's sentences.")
@bundle_option
@threads_option
@precision_option
@cache_option
def dpo_derive(hotpot_file: str, output: str, limit: int | None, expansion_window: int,
               bundle: str | None, threads: int, precision: str) -> None:
    """Write candidate rationale sets per question, each with the sentences ECSE selected and the gold ones."""
    from meteora_edge.training.dpo_derive import derive_candidates

    check_output_path(output, inputs=[("--hotpot", hotpot_file)])
    encoder = encoder_from_options(bundle, threads, precision)
    records = derive_candidates(hotpot_file, encoder=encoder, expansion_window=expansion_window, limit=limit)
    write_text_atomic(output, "".join(escape_line_separators(json.dumps(r, ensure_ascii=False)) + "\n" for r in records))
    candidates = sum(len(r["candidates"]) for r in records)
    click.echo(f"wrote {output}: {len(records)} questions, {candidates} candidate rationale sets", err=True)


@click.command("dpo-prepare")
@click.option("--input", "input_file", required=True,
              help="Records (JSON list or JSONL): explicit preferences or labelled candidates, in this package's or METEORA's keys.")
@click.option("--sample-shots", default=None,
              help="The generator's few-shot examples: JSON, JSONL or text, in METEORA's forms [the shipped ones].")
@click.option("--output-dir", required=True, type=click.Path(file_okay=False), help="Folder for train/validation/test JSONL.")
@click.option("--train-ratio", type=float, default=0.8, show_default=True)
@click.option("--validation-ratio", type=float, default=0.1, show_default=True)
@click.option("--test-ratio", type=float, default=0.1, show_default=True)
@click.option("--seed", type=int, default=42, show_default=True, help="Shuffles the records before splitting.")
@click.option("--num-rationales", type=int, default=3, show_default=True, help="Rationales the generator is asked for.")
@click.option("--domain", default=None, help="Subject named in the generator prompt (as the generator's domain=).")
@click.option("--no-flag-instructions", is_flag=True, help="Prompt and completions without Flag Instructions.")
@click.option("--oracle-evidence", is_flag=True, help="List the gold chunk texts in every prompt.")
@click.option("--min-margin", type=float, default=0.2, show_default=True,
              help="A candidate that hits gold is rejected when its F1 is this far below the best.")
@click.option("--max-pairs-per-query", type=int, default=4, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def dpo_prepare(input_file: str, sample_shots: str | None, output_dir: str, train_ratio: float, validation_ratio: float,
                test_ratio: float, seed: int, num_rationales: int, domain: str | None, no_flag_instructions: bool,
                oracle_evidence: bool, min_margin: float, max_pairs_per_query: int, as_json: bool) -> None:
    """Build DPO preference pairs with the generator's prompt and split them by query."""
    from meteora_edge.training.dpo_data import prepare_preferences
    from meteora_edge.training.dpo_files import read_records, write_splits
    from meteora_edge.selection.llm_generator import load_sample_shots

    check_output_dir(output_dir)
    records = read_records(input_file)
    shots = load_sample_shots(sample_shots)
    data = prepare_preferences(
        records, sample_shots=shots, num_rationales=num_rationales, domain=domain or None,
        include_flag_instructions=not no_flag_instructions, oracle_evidence=oracle_evidence, min_margin=min_margin,
        max_pairs_per_query=max_pairs_per_query, train_ratio=train_ratio, validation_ratio=validation_ratio,
        test_ratio=test_ratio, seed=seed,
    )
    write_splits(data, output_dir)
    summary = data.summary
    if as_json:
        click.echo(json.dumps(summary, indent=2))
    else:
        pairs = summary["pairs"]
        click.echo(f"wrote {output_dir}: train {pairs['train']}, validation {pairs['validation']}, test {pairs['test']} "
                   f"pairs from {summary['records_with_pairs']} of {summary['records']} records")


@click.command("dpo-train")
@click.option("--train", "train_file", required=True, help="DPO rows (train.jsonl from dpo-prepare).")
@click.option("--validation", "validation_file", default=None, help="Rows to report loss and reward accuracy on.")
@click.option("--model", "model_dir", required=True, type=click.Path(),
              help="Hugging Face causal LM folder, or a .gguf file (llama/qwen2; dequantised), to start from.")
@click.option("--output-dir", required=True, type=click.Path(file_okay=False), help="Where the trained model is saved.")
@click.option("--lora", is_flag=True, help="Train a LoRA adapter and merge it before saving.")
@click.option("--lora-r", type=int, default=8, show_default=True)
@click.option("--lora-alpha", type=int, default=16, show_default=True)
@click.option("--epochs", type=float, default=3.0, show_default=True)
@click.option("--max-steps", type=int, default=None, help="Stop after N optimiser updates [run the epochs].")
@click.option("--beta", type=float, default=0.05, show_default=True)
@click.option("--learning-rate", type=float, default=3e-5, show_default=True)
@click.option("--batch-size", type=int, default=1, show_default=True)
@click.option("--gradient-accumulation", type=int, default=2, show_default=True)
@click.option("--max-length", type=int, default=None, help="Cut prompt + completion to N tokens [no cut].")
@click.option("--seed", type=int, default=42, show_default=True)
@click.option("--threads", type=int, default=None, help="torch CPU threads [torch's default].")
@click.option("--overwrite", is_flag=True, help="Replace a non-empty --output-dir.")
def dpo_train(train_file: str, validation_file: str | None, model_dir: str, output_dir: str, lora: bool, lora_r: int,
              lora_alpha: int, epochs: float, max_steps: int | None, beta: float, learning_rate: float, batch_size: int,
              gradient_accumulation: int, max_length: int | None, seed: int, threads: int | None, overwrite: bool) -> None:
    """Train the rationale generator with DPO (extra 'train'); then 'meteora-edge export llm' makes the GGUF."""
    from meteora_edge.export.dpo_train import DPOTrainingConfig, train_dpo

    config = DPOTrainingConfig(
        beta=beta, epochs=epochs, learning_rate=learning_rate, batch_size=batch_size,
        gradient_accumulation=gradient_accumulation, max_steps=max_steps, lora=lora, lora_r=lora_r,
        lora_alpha=lora_alpha, max_length=max_length, seed=seed, threads=threads,
    )
    bar = None

    def progress(step: int, total: int) -> None:  # the bar appears with the first step, not before a failure
        nonlocal bar
        if bar is None:
            bar = click.progressbar(length=total, label="training", file=sys.stderr, show_pos=True)
            bar.__enter__()
        bar.update(step - bar.pos)

    try:
        report = train_dpo(train_file, model_dir, output_dir, validation_file=validation_file, config=config,
                           overwrite=overwrite, progress=progress)
    finally:
        if bar is not None:
            bar.__exit__(None, None, None)
    line = f"wrote {output_dir}: {report['steps']} steps in {report['seconds']:.1f}s, train loss {report['train_loss']:.4f}"
    accuracy = report["validation"].get("eval_rewards/accuracies")
    if accuracy is not None:
        line += f", validation reward accuracy {accuracy:.2f}"
    click.echo(line)
