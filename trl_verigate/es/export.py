"""Rebuild an ES-trained model from its base plus es_state.json: `reconstruct` and `trl-verigate es-export`.

trl-verigate es-export --state outputs/run/checkpoint-200/es_state.json --output exported/
"""

from __future__ import annotations

import argparse
import os
import sys

from trl_verigate.cli_parser import OneLineErrorParser

# torch and the ES modules are imported inside the functions: `trl-verigate --help` must stay cheap.

PEFT_REFUSAL = (
    "this es_state.json records a PEFT run: the perturbed parameters are adapters whose initial values are not in the "
    "state, so the model cannot be rebuilt from the base model. The checkpoint already holds the trained adapter "
    "(TRL saves it with every checkpoint): load it with PeftModel.from_pretrained(base_model, CHECKPOINT_DIR), and "
    "call merge_and_unload() on it for a full model"
)


def reconstruct(state, model=None, base_model: str | None = None, progress: bool = False):
    """The trained model: the base weights with the recorded history replayed on an fp32 master.

    `state` is an es_state.json path (or its checkpoint directory) or the loaded dict. `model`, if given, must hold
    the base weights and is modified in place; otherwise the base is loaded with `AutoModelForCausalLM` from
    `base_model` or the state's `base_model.name_or_path` (at its revision and dtype). The base parameters' hash must
    match the one recorded at training time.
    """
    import torch

    from trl_verigate.es.state import parameters_sha256, read_state, replay_history
    from trl_verigate.es.update import make_master, write_master

    if not isinstance(state, dict):
        state = read_state(os.fspath(state))
    base = state["base_model"]
    if base.get("peft"):
        raise ValueError(PEFT_REFUSAL)
    if model is None:
        from transformers import AutoModelForCausalLM

        source = base_model or base["name_or_path"]
        if source is None:
            raise ValueError("the state names no base model; pass base_model= (or --base-model)")
        model = AutoModelForCausalLM.from_pretrained(
            source, revision=base.get("revision"), dtype=getattr(torch, base["dtype"])
        )
    named = dict(model.named_parameters())
    missing = [name for name in state["parameters"] if name not in named]
    if missing:
        raise ValueError(f"the base model has no parameter(s) {missing[:5]} recorded in the ES state")
    params = {name: named[name] for name in state["parameters"]}
    if parameters_sha256(params) != base["parameters_sha256"]:
        raise ValueError(
            "the base model's weights differ from the ones ES trained from (parameters_sha256 mismatch); load the "
            "recorded base model and revision"
        )
    master = make_master(params)
    replay_history(master, state["history"], state["weight_decay"], progress=progress)
    write_master(params, master)
    return model


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register `es-export` on the `trl-verigate` command's subparsers."""
    parser = subparsers.add_parser(
        "es-export",
        help="rebuild an ES-trained model from its base and es_state.json",
        description="Rebuild an ES-trained model from its base model plus the (seeds, rewards) history in "
        "es_state.json, and save_pretrained it.",
    )
    parser.add_argument("--state", required=True, help="es_state.json, or the checkpoint directory holding it")
    parser.add_argument("--output", required=True, help="directory to save_pretrained the model (and tokenizer) into")
    parser.add_argument(
        "--base-model",
        default=None,
        help="base model path/id instead of the recorded one (default: the one es_state.json records)",
    )
    parser.set_defaults(func=run)
    return parser


def looks_local(name: str | None) -> bool:
    """A path rather than a hub id: absolute, relative with ./ or ../, or under ~."""
    return bool(name) and name.startswith(("/", "./", "../", "~"))


def run(args: argparse.Namespace) -> int:
    from trl_verigate.es.state import read_state

    try:
        state = read_state(args.state)
    except FileNotFoundError as error:
        message = f"{error.filename} does not exist; give an es_state.json or the checkpoint directory holding one"
        print(f"es-export: --state {args.state}: {message}", file=sys.stderr)
        return 2
    except (OSError, ValueError, KeyError) as error:  # unreadable, not JSON, or not an ES state
        print(f"es-export: --state {args.state}: {error}", file=sys.stderr)
        return 2
    if state["base_model"].get("peft"):  # refused before any model loads
        print(f"es-export: {PEFT_REFUSAL}", file=sys.stderr)
        return 2
    source = args.base_model or state["base_model"]["name_or_path"]
    if looks_local(source) and not os.path.isdir(os.path.expanduser(source)):
        flag = "--base-model" if args.base_model else "the state's base_model.name_or_path"
        print(f"es-export: {flag} {source}: no such directory; give the base model ES trained from", file=sys.stderr)
        return 2
    try:
        model = reconstruct(state, base_model=args.base_model, progress=True)
    except ValueError as error:  # no base model named, or not the weights ES trained from
        print(f"es-export: {error}", file=sys.stderr)
        return 2
    model.save_pretrained(args.output)
    try:
        from transformers import AutoTokenizer

        AutoTokenizer.from_pretrained(source, revision=state["base_model"].get("revision")).save_pretrained(args.output)
    except (OSError, ValueError) as error:  # a base without a tokenizer still exports its weights
        print(f"no tokenizer saved ({error})")
    print(f"rebuilt {len(state['history'])} ES iterations onto {source}; saved to {args.output}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = OneLineErrorParser(prog="trl-verigate")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
