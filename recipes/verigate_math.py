"""VeriGate GRPO on math word problems: verifier reward, PRM fallback for all-wrong groups.

    accelerate launch --quiet --config_file recipes/accelerate/zero2.yaml recipes/verigate_math.py \
        --config recipes/verigate_math.yaml [--any_field value ...]

Every field of `MathScriptArguments`, `VeriGateConfig` and TRL's `ModelConfig` can be set in the YAML or overridden
on the command line.
"""

import os
from dataclasses import dataclass, field

from datasets import load_dataset
from recipe_tools import (
    LOCAL_DATA_SUFFIXES,
    RecipeParser,
    add_pass_at_k_callback,
    check_dataset_name,
    check_model_name,
    check_policy_dtype,
    load_local_json,
    run_recipe,
    summarize_run,
    track_progress,
)
from trl import ModelConfig, ScriptArguments, get_peft_config, get_quantization_config

from trl_verigate import MathAccuracyReward, PassAtKArguments, VeriGateConfig, VeriGateGRPOTrainer, accuracy_reward
from trl_verigate.cli_parser import one_line
from trl_verigate.rewards.prm_setup import check_prm_checkpoint

# Blank-line separated steps are what the PRM scores one by one (`step_separator` defaults to "\n\n"), and
# \boxed{} is what `accuracy_reward` extracts, so the prompt asks for exactly those two things.
DEFAULT_SYSTEM_PROMPT = (
    "Solve the problem step by step. Separate consecutive reasoning steps with a blank line, "
    "and put the final answer in \\boxed{}."
)


@dataclass
class MathScriptArguments(ScriptArguments):
    question_field: str = field(default="problem", metadata={"help": "Dataset column holding the question."})
    answer_field: str = field(
        default="solution",
        metadata={
            "help": "Dataset column holding the gold answer: a solution ending in \\boxed{} (MATH), a `#### N` "
            "solution (GSM8K) or a bare answer. It reaches `accuracy_reward` as `answer` if named `answer`, "
            "else as `solution`."
        },
    )
    dataset_test_split: str = field(
        default="test",
        metadata={
            "help": "Dataset split to evaluate on (when `eval_strategy` is not `no`), or the path of a local "
            ".json/.jsonl file with the same columns, loaded as the eval set. A local `dataset_name` file has only "
            "the train split, so with one, evaluation needs such a path."
        },
    )
    max_train_samples: int | None = field(default=None, metadata={"help": "Keep only the first N training rows."})
    system_prompt: str = field(default=DEFAULT_SYSTEM_PROMPT, metadata={"help": "System message of every prompt."})
    allow_unboxed_answers: bool = field(
        default=False,
        metadata={
            "help": "Against a \\boxed{} gold answer, also score a completion without \\boxed{} by its last number. "
            "Off by default: that number is most often a truncated completion's intermediate result. GSM8K `#### N` "
            "gold always takes the last number."
        },
    )


def math_reward(args: MathScriptArguments) -> MathAccuracyReward:
    """`accuracy_reward`, or one that also reads unboxed answers against boxed gold (`allow_unboxed_answers`)."""
    return MathAccuracyReward(allow_unboxed_answers=True) if args.allow_unboxed_answers else accuracy_reward


def load_math_dataset(args: MathScriptArguments, split: str):
    """One split of a hub dataset or of a local .json/.jsonl file (which has only the train split).

    `split` may itself be the path of a local .json/.jsonl file (how `dataset_test_split` names a separate eval
    file); that file is then the whole split.
    """
    check_dataset_name(args.dataset_name)
    if split.endswith(LOCAL_DATA_SUFFIXES):
        field_name = "dataset_test_split" if split == args.dataset_test_split else "dataset_train_split"
        if not os.path.isfile(split):
            raise ValueError(
                f"`{field_name}` is {split}, a .json/.jsonl path, but there is no such file; give an existing local "
                "file or a split name of the dataset."
            )
        return load_local_json(split, field_name)["train"]
    if os.path.isfile(args.dataset_name):
        files = load_local_json(args.dataset_name, "dataset_name", split=args.dataset_train_split)
        if split not in files:
            raise ValueError(
                f"Local file {args.dataset_name} only provides the `{args.dataset_train_split}` split, not `{split}`; "
                "to evaluate, set `dataset_test_split` to a local .json/.jsonl eval file, otherwise set "
                "`eval_strategy: no`, or use a hub dataset with that split."
            )
        return files[split]
    try:
        return load_dataset(args.dataset_name, name=args.dataset_config, split=split)
    except ConnectionError as error:  # datasets' offline or unreachable hub (an OSError)
        raise ConnectionError(
            f"`dataset_name` is {args.dataset_name}: neither a local file nor a dataset the hub serves to this machine "
            f"({one_line(error)}); give a local .json/.jsonl file, or a hub id that is reachable (offline: one "
            "already in the datasets cache)"
        ) from error


def load_prompt_splits(script_args, training_args, to_prompts):
    """(train, eval) datasets through `to_prompts`; eval is None unless the run evaluates (`eval_strategy`). Both
    are loaded before either is converted, so a bad eval file is refused before any progress is printed."""
    train_dataset = load_math_dataset(script_args, script_args.dataset_train_split)
    if training_args.eval_strategy == "no":
        return to_prompts(train_dataset), None
    eval_dataset = load_math_dataset(script_args, script_args.dataset_test_split)
    return to_prompts(train_dataset), to_prompts(eval_dataset)


def to_prompts(dataset, args: MathScriptArguments):
    """Conversational prompts plus one gold column, named after its format so `accuracy_reward` parses it right."""
    for name, column in (("question_field", args.question_field), ("answer_field", args.answer_field)):
        if column not in dataset.column_names:
            raise ValueError(
                f"Dataset {args.dataset_name} has no column `{column}` (set by `{name}`); its columns are "
                f"{dataset.column_names}. Set `--{name}` to the right one."
            )
    gold_column = "answer" if args.answer_field == "answer" else "solution"

    def convert(example):
        prompt = [
            {"role": "system", "content": args.system_prompt},
            {"role": "user", "content": example[args.question_field]},
        ]
        return {"prompt": prompt, gold_column: example[args.answer_field]}

    if args.max_train_samples is not None:
        dataset = dataset.select(range(min(args.max_train_samples, len(dataset))))
    return dataset.map(convert, remove_columns=dataset.column_names)


def set_model_init_kwargs(training_args, model_args: ModelConfig) -> None:
    """Load the policy as `model_args` says (revision, attention, dtype); explicit `model_init_kwargs` win."""
    training_args.model_init_kwargs = {
        "revision": model_args.model_revision,
        "attn_implementation": model_args.attn_implementation,
        "dtype": model_args.dtype,
        **(training_args.model_init_kwargs or {}),
    }


def train_and_save(trainer, training_args, dataset_name: str | None) -> None:
    track_progress(trainer)
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    trainer.save_model(training_args.output_dir)
    trainer.accelerator.print(f"Model saved to {training_args.output_dir}")
    if training_args.push_to_hub:
        trainer.push_to_hub(dataset_name=dataset_name)


def prepare(
    script_args: MathScriptArguments,
    training_args: VeriGateConfig,
    model_args: ModelConfig,
    pass_at_k_args: PassAtKArguments | None = None,
):
    """Every check of the input, then the (train, eval) datasets; nothing here loads a model."""
    check_dataset_name(script_args.dataset_name)
    check_policy_dtype(training_args, model_args)
    check_model_name(model_args.model_name_or_path, revision=model_args.model_revision)
    if training_args.gate != "none" and training_args.prm_type != "symbolic":
        check_prm_checkpoint(training_args.prm_model_name_or_path, training_args.prm_type)
    set_model_init_kwargs(training_args, model_args)
    return load_prompt_splits(script_args, training_args, lambda dataset: to_prompts(dataset, script_args))


def train(
    script_args: MathScriptArguments,
    training_args: VeriGateConfig,
    model_args: ModelConfig,
    pass_at_k_args: PassAtKArguments | None = None,
    *,
    prepared,
):
    train_dataset, eval_dataset = prepared
    trainer = VeriGateGRPOTrainer(
        model=model_args.model_name_or_path,
        reward_funcs=[math_reward(script_args)],
        args=training_args,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        quantization_config=get_quantization_config(model_args),
        peft_config=get_peft_config(model_args),
    )
    if pass_at_k_args is not None:
        add_pass_at_k_callback(trainer, pass_at_k_args)
    train_and_save(trainer, training_args, script_args.dataset_name)
    if trainer.accelerator.is_main_process:
        summarize_run(trainer.state.log_history, training_args.output_dir, training_args.report_to)


def main(*args):
    train(*args, prepared=prepare(*args))


def parse_args(args: list[str] | None = None):
    return RecipeParser((MathScriptArguments, VeriGateConfig, ModelConfig, PassAtKArguments)).parse_args_and_config(
        args
    )


if __name__ == "__main__":
    run_recipe(parse_args, prepare, train)
