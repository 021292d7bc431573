"""What the Lean and Coq process-verified GRPO recipes share: their script arguments, the checks and datasets before
any model loads, and the training run.

`recipes/lean_process_grpo.py` and `recipes/coq_process_grpo.py` each build one `ProcessVerifiedRecipe` from their
config and trainer classes, prompt template and prover command checks; this module is not a recipe itself.
"""

from collections.abc import Callable
from dataclasses import dataclass, field

from recipe_tools import (
    RecipeParser,
    add_pass_at_k_callback,
    check_dataset_name,
    check_model_name,
    check_policy_dtype,
    process_summary,
    run_recipe,
    summarize_run,
)
from trl import ModelConfig, ScriptArguments, get_peft_config, get_quantization_config
from verigate_math import load_prompt_splits, set_model_init_kwargs, train_and_save

from trl_verigate import PassAtKArguments
from trl_verigate.rewards.lean_proofs import format_prompt


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


@dataclass(frozen=True)
class ProcessVerifiedRecipe:
    """One prover's recipe: ``config_class`` and ``trainer_class`` fix the prover, ``prompt_template`` is its default
    prompt, ``check_commands(training_args)`` refuses prover programs that cannot run."""

    config_class: type
    trainer_class: type
    prompt_template: str
    check_commands: Callable

    def parse_args(self, args: list[str] | None = None):
        parser = RecipeParser((ProcessScriptArguments, self.config_class, ModelConfig, PassAtKArguments))
        return parser.parse_args_and_config(args)

    def to_prompts(self, dataset, args: ProcessScriptArguments, statement_field: str = "formal_statement"):
        """Add the `prompt` column; the other columns stay, so the proof reward gets the trusted statement and
        header."""
        if statement_field not in dataset.column_names:
            raise ValueError(
                f"Dataset {args.dataset_name} has no column `{statement_field}`; its columns are "
                f"{dataset.column_names}. Set `--statement_field` to the column holding the theorem statement."
            )
        if args.split_filter is not None:
            dataset = dataset.filter(lambda row: row.get("split") == args.split_filter)
        if args.max_train_samples is not None:
            dataset = dataset.select(range(min(args.max_train_samples, len(dataset))))
        template = args.prompt_template or self.prompt_template
        return dataset.map(lambda row: {"prompt": format_prompt(row, template, args.conversational)})

    def prepare(self, script_args, training_args, model_args: ModelConfig, pass_at_k_args=None):
        """Every check of the input, then the (train, eval) datasets; nothing here loads a model or starts a prover."""
        check_dataset_name(script_args.dataset_name)
        check_policy_dtype(training_args, model_args)
        check_model_name(model_args.model_name_or_path, revision=model_args.model_revision)
        self.check_commands(training_args)
        set_model_init_kwargs(training_args, model_args)
        statement_field = training_args.statement_field
        return load_prompt_splits(
            script_args, training_args, lambda dataset: self.to_prompts(dataset, script_args, statement_field)
        )

    def train(self, script_args, training_args, model_args: ModelConfig, pass_at_k_args=None, *, prepared):
        train_dataset, eval_dataset = prepared
        trainer = self.trainer_class(
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
                prompt_template=script_args.prompt_template or self.prompt_template,
                conversational=script_args.conversational,
            )
        train_and_save(trainer, training_args, script_args.dataset_name)
        if trainer.accelerator.is_main_process:
            summary = process_summary(training_args.prover)
            summarize_run(trainer.state.log_history, training_args.output_dir, training_args.report_to, summary=summary)

    def main(self, *args):
        self.train(*args, prepared=self.prepare(*args))

    def run(self) -> None:
        """The script's entry point: bad input is one line and exit status 2 (`recipe_tools.run_recipe`)."""
        run_recipe(self.parse_args, self.prepare, self.train)
