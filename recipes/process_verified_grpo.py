"""Process-verified GRPO for theorem proving: the prover's verdict as outcome reward and tactic-level credit.

    accelerate launch --config_file recipes/accelerate/zero2.yaml recipes/process_verified_grpo.py \
        --config recipes/lean_process_grpo.yaml [--any_field value ...]
    accelerate launch --config_file recipes/accelerate/zero2.yaml recipes/process_verified_grpo.py \
        --config recipes/coq_process_grpo.yaml

Lean rows in DeepSeek-Prover-V1.5's format (`name`, `split`, `informal_prefix`, `formal_statement`, `goal`, `header`);
Coq rows with `formal_statement` (`Theorem name : T.`) and an optional `header` (`Require Import …`). From the hub or
a local .json/.jsonl file. Every field of `ProcessScriptArguments`, `ProcessVerifiedConfig` and TRL's `ModelConfig`
can be set in the YAML or overridden on the command line.
"""

from dataclasses import dataclass, field

from recipe_tools import (
    RecipeParser,
    add_pass_at_k_callback,
    check_command,
    check_dataset_name,
    check_model_name,
    check_policy_dtype,
    process_summary,
    run_recipe,
    summarize_run,
)
from trl import ModelConfig, ScriptArguments, get_peft_config, get_quantization_config
from verigate_math import load_prompt_splits, set_model_init_kwargs, train_and_save

from trl_verigate import PassAtKArguments, ProcessVerifiedConfig, ProcessVerifiedGRPOTrainer
from trl_verigate.coq.config import default_coqidetop_command
from trl_verigate.rewards.coq import COQ_PROMPT_TEMPLATE
from trl_verigate.rewards.lean_proofs import DEFAULT_PROMPT_TEMPLATE, format_prompt

PROMPT_TEMPLATES = {"lean": DEFAULT_PROMPT_TEMPLATE, "coq": COQ_PROMPT_TEMPLATE}


@dataclass
class ProcessScriptArguments(ScriptArguments):
    prompt_template: str | None = field(
        default=None,
        metadata={
            "help": "Python format string over the row's columns (e.g. {header}, {formal_statement}). None: the "
            "prover's default, the statement inside an open ```lean4 or ```coq fence."
        },
    )
    conversational: bool = field(
        default=False,
        metadata={
            "help": "Send the prompt as a user message through the chat template (Kimina-Prover, DeepSeek-Prover-V2) "
            "instead of as raw text (DeepSeek-Prover-V1.5, STP)."
        },
    )
    split_filter: str | None = field(
        default=None,
        metadata={"help": "Keep only rows whose `split` column equals this (miniF2F rows are 'valid' or 'test')."},
    )
    dataset_test_split: str = field(
        default="test",
        metadata={"help": "Eval split name, or a local .json/.jsonl eval file (used when `eval_strategy` is not no)."},
    )
    max_train_samples: int | None = field(default=None, metadata={"help": "Keep only the first N training rows."})


def to_prompts(dataset, args: ProcessScriptArguments, statement_field: str = "formal_statement", prover: str = "lean"):
    """Add the `prompt` column; the other columns stay, so the proof reward gets the trusted statement and header."""
    if statement_field not in dataset.column_names:
        raise ValueError(
            f"Dataset {args.dataset_name} has no column `{statement_field}`; its columns are {dataset.column_names}. "
            "Set `--statement_field` to the column holding the theorem statement."
        )
    if args.split_filter is not None:
        dataset = dataset.filter(lambda row: row.get("split") == args.split_filter)
    if args.max_train_samples is not None:
        dataset = dataset.select(range(min(args.max_train_samples, len(dataset))))

    template = args.prompt_template or PROMPT_TEMPLATES[prover]

    def convert(row):
        return {"prompt": format_prompt(row, template, args.conversational)}

    return dataset.map(convert)


def check_prover_commands(training_args: ProcessVerifiedConfig) -> None:
    """The local prover's programs must run: the Lean REPL's argv, or coqidetop and the coqc/coqchk recheck."""
    if training_args.prover == "lean":
        check_command(
            training_args.lean_repl_command, "lean_repl_command", "[lake, env, /path/to/repl/.lake/build/bin/repl]"
        )
        return
    check_command(training_args.coq_command or default_coqidetop_command(), "coq_command", "[coqidetop.opt, ...]")
    for program in ("coqc", "coqchk"):  # CoqServer's coqchk recheck compiles and checks every pass
        check_command([program], f"{program} (the coqchk recheck)", "apt-get install coq")


def prepare(
    script_args: ProcessScriptArguments,
    training_args: ProcessVerifiedConfig,
    model_args: ModelConfig,
    pass_at_k_args: PassAtKArguments | None = None,
):
    """Every check of the input, then the (train, eval) datasets; nothing here loads a model or starts a prover."""
    check_dataset_name(script_args.dataset_name)
    check_policy_dtype(training_args, model_args)
    check_model_name(model_args.model_name_or_path, revision=model_args.model_revision)
    check_prover_commands(training_args)
    set_model_init_kwargs(training_args, model_args)
    statement_field = training_args.statement_field
    prover = training_args.prover
    return load_prompt_splits(
        script_args, training_args, lambda dataset: to_prompts(dataset, script_args, statement_field, prover)
    )


def train(
    script_args: ProcessScriptArguments,
    training_args: ProcessVerifiedConfig,
    model_args: ModelConfig,
    pass_at_k_args: PassAtKArguments | None = None,
    *,
    prepared,
):
    train_dataset, eval_dataset = prepared
    prover = training_args.prover
    trainer = ProcessVerifiedGRPOTrainer(
        model=model_args.model_name_or_path,
        args=training_args,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        quantization_config=get_quantization_config(model_args),
        peft_config=get_peft_config(model_args),
    )
    if pass_at_k_args is not None:
        add_pass_at_k_callback(
            trainer,
            pass_at_k_args,
            verifier=trainer.proof_reward.oracle.verifier,
            prompt_template=script_args.prompt_template or PROMPT_TEMPLATES[prover],
            conversational=script_args.conversational,
        )
    train_and_save(trainer, training_args, script_args.dataset_name)
    if trainer.accelerator.is_main_process:
        summary = process_summary(prover)
        summarize_run(trainer.state.log_history, training_args.output_dir, training_args.report_to, summary=summary)


def main(*args):
    train(*args, prepared=prepare(*args))


def parse_args(args: list[str] | None = None):
    return RecipeParser(
        (ProcessScriptArguments, ProcessVerifiedConfig, ModelConfig, PassAtKArguments)
    ).parse_args_and_config(args)


if __name__ == "__main__":
    run_recipe(parse_args, prepare, train)
