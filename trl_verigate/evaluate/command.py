"""`trl-verigate evaluate lean|coq|math`: the arguments, checked before any model loads, and the run.

    trl-verigate evaluate lean --model OUT_DIR --dataset minif2f.jsonl --split test --n 64 --k 1,8,32,64 \\
        --lean-repl-command "lake env /path/to/repl" --lean-project-dir /path/to/project --output results/
    trl-verigate evaluate coq --model OUT_DIR --dataset coq_test.jsonl --n 8 --k 1,8 --output results/
    trl-verigate evaluate math --model OUT_DIR --dataset HuggingFaceH4/MATH-500 --n 4 --k 1,4 --output results/

A bad flag is one line naming it (exit status 2); the run ends by printing its output folder.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from trl_verigate.cli_parser import DefaultsHelpFormatter
from trl_verigate.coq.config import DEFAULT_HEADER
from trl_verigate.evaluate.generation import (
    BACKENDS,
    MODEL_SAMPLING_FIELDS,
    HFBackend,
    SamplingConfig,
    VLLMBackend,
    check_attempts,
    import_vllm,
    model_sampling_defaults,
)
from trl_verigate.evaluate.metrics import check_ks
from trl_verigate.evaluate.outputs import (
    PLOT_FILE,
    SAMPLES_FILE,
    SUMMARY_FILE,
    check_output_dir,
    check_same_run,
    read_samples,
    record_run,
)
from trl_verigate.evaluate.plot import check_matplotlib
from trl_verigate.evaluate.problems import (
    DEFAULT_MATH_SYSTEM_PROMPT,
    MATH_FORMATS,
    coq_problems,
    lean_problems,
    math_problems,
    select_rows,
)
from trl_verigate.evaluate.runner import Evaluation, evaluate
from trl_verigate.rewards.coq import COQ_PROMPT_TEMPLATE
from trl_verigate.rewards.lean_proofs import COMPLETION_FORMATS, DEFAULT_PROMPT_TEMPLATE

# Prover papers check each proof with a long limit (DeepSeek-Prover and Kimina report evaluations where a
# verification may run minutes); training uses 15 s to keep steps short. A short limit here would count slow but
# correct proofs as failures and understate pass@k.
DEFAULT_LEAN_TIMEOUT_S = 300.0
# The same reasoning for Coq; proofs over nat with lia take well under a second, a minute leaves room for heavier ones.
DEFAULT_COQ_TIMEOUT_S = 60.0
# Proofs in flight per remote server.
_PROOFS_PER_SERVER = 8
_HEALTH_TIMEOUT_S = 10.0
# What a hub id looks like (huggingface_hub's `validate_repo_id`: `name` or `owner/name`). Anything else given as
# --model is a path, and must be a folder here.
_HUB_ID = re.compile(r"[\w.-]+(/[\w.-]+)?")


def parse_ks(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError as error:
        raise ValueError(f"--k {text}: give comma-separated whole numbers, e.g. --k 1,8,32") from error


def _add_common(parser: argparse.ArgumentParser, split_default: str, max_new_tokens: int) -> None:
    parser.add_argument("--model", required=True, help="model folder (e.g. a training run's output_dir) or hub id")
    parser.add_argument("--dataset", required=True, help="local .json/.jsonl file, dataset folder, or hub id")
    parser.add_argument("--dataset-config", default=None, help="hub dataset configuration name")
    parser.add_argument(
        "--split",
        default=split_default,
        help="dataset split, or the value of the rows' `split` column to keep; the run says which rows it picked",
    )
    parser.add_argument("--limit", type=int, default=None, help="evaluate only the first N problems")
    parser.add_argument("--n", type=int, default=1, help="attempts sampled per problem")
    parser.add_argument("--k", default="1", help="comma-separated k of pass@k, each <= --n (e.g. 1,8,32,64)")
    parser.add_argument("--output", required=True, help="folder for samples.jsonl, summary.json, pass_at_k.png")
    parser.add_argument("--backend", choices=BACKENDS, default="hf", help="hf: transformers generate; vllm: vLLM")
    parser.add_argument("--tensor-parallel-size", type=int, default=1, help="vLLM: GPUs per model")
    parser.add_argument("--batch-size", type=int, default=16, help="hf: sequences per generate call")
    parser.add_argument(
        "--chunk-size",
        type=int,
        default=256,
        help="attempts per backend call (hf scores each --batch-size batch as it is decoded, vllm the whole call)",
    )
    parser.add_argument("--dtype", default="auto", help="hf: torch dtype to load the model in")
    parser.add_argument(
        "--temperature", type=float, default=1.0, help="sampling temperature (under 1e-5, 0 included: greedy)"
    )
    parser.add_argument("--top-p", type=float, default=0.95, help="nucleus sampling mass")
    from_model = "default: the model's generation_config.json, else off"
    parser.add_argument("--top-k", type=int, default=None, help=f"top-k sampling, 0: off ({from_model})")
    parser.add_argument("--min-p", type=float, default=None, help=f"min-p sampling, 0: off ({from_model})")
    parser.add_argument("--repetition-penalty", type=float, default=None, help=f"1: off ({from_model})")
    parser.add_argument("--max-new-tokens", type=int, default=max_new_tokens, help="completion length limit")
    parser.add_argument("--seed", type=int, default=0, help="sampling and bootstrap seed")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def _add_proof_options(parser: argparse.ArgumentParser, prompt_template: str) -> None:
    parser.add_argument("--prompt-template", default=prompt_template, help="format string over row columns")
    parser.add_argument("--conversational", action="store_true", help="send the prompt through the chat template")
    parser.add_argument("--statement-field", default="formal_statement", help="column of the trusted statement")


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register `evaluate lean`, `evaluate coq` and `evaluate math` on the `trl-verigate` command's subparsers."""
    summary = "pass@k of a Lean or Coq prover, or accuracy, maj@k and pass@k on math problems"
    parser = subparsers.add_parser("evaluate", help=summary, description=summary[0].upper() + summary[1:] + ".")
    tasks = parser.add_subparsers(dest="task", required=True, metavar="TASK")
    formatter = {"formatter_class": DefaultsHelpFormatter}

    lean = tasks.add_parser("lean", help="pass@k on DeepSeek-format Lean problems (miniF2F, ProofNet)", **formatter)
    _add_common(lean, "test", 2048)
    _add_proof_options(lean, DEFAULT_PROMPT_TEMPLATE)
    lean.add_argument("--completion-format", choices=COMPLETION_FORMATS, default="auto", help="proof shape")
    lean.add_argument(
        "--lean-repl-command",
        default=None,
        help='REPL argv, e.g. "lake env /path/to/repl" (default: $TRL_VERIGATE_LEAN_REPL, else a built repl near the project)',
    )
    lean.add_argument(
        "--lean-project-dir",
        default=None,
        help="Lean project the REPL runs in (default: $TRL_VERIGATE_LEAN_PROJECT, else the working directory)",
    )
    lean.add_argument(
        "--lean-server-urls",
        nargs="+",
        default=None,
        help="trl-verigate lean-server URLs instead of a local pool (default: a local pool)",
    )
    lean.add_argument("--lean-workers", type=int, default=None, help="local REPL processes (default: cores - 1)")
    lean.add_argument(
        "--lean-timeout",
        type=float,
        default=DEFAULT_LEAN_TIMEOUT_S,
        help="seconds per proof (as prover papers evaluate; training uses 15)",
    )
    lean.add_argument("--lean-memory-limit-mb", type=int, default=8192, help="address-space limit per REPL, MiB")
    lean.set_defaults(func=run, parser=lean)

    coq = tasks.add_parser(
        "coq", help="pass@k on Coq statements (`Theorem name : T.` rows) with coqidetop", **formatter
    )
    _add_common(coq, "test", 1024)
    _add_proof_options(coq, COQ_PROMPT_TEMPLATE)
    coq.add_argument(
        "--coq-command",
        default=None,
        help="coqidetop argv with its protocol options (default: coqidetop.opt or coqidetop from PATH)",
    )
    coq.add_argument("--coq-header", default=None, help=f"header of rows without one (default: {DEFAULT_HEADER!r})")
    coq.add_argument("--coq-workers", type=int, default=None, help="coqidetop processes (default: cores - 1)")
    coq.add_argument("--coq-timeout", type=float, default=DEFAULT_COQ_TIMEOUT_S, help="seconds per proof")
    coq.add_argument("--coq-memory-limit-mb", type=int, default=2048, help="address-space limit per worker, MiB")
    coq.add_argument(
        "--coq-recheck", choices=("coqchk", "none"), default="coqchk", help="recheck every pass with coqc + coqchk"
    )
    coq.add_argument(
        "--coq-print-assumptions",
        choices=("always", "sample", "never"),
        default="always",
        help="run `Print Assumptions` on every pass, a sample, or none",
    )
    coq.add_argument("--coq-sandbox", choices=("auto", "bwrap", "none"), default="auto", help="bubblewrap sandbox")
    coq.set_defaults(func=run, parser=coq)

    math = tasks.add_parser("math", help="accuracy, maj@k and pass@k on MATH-500, MATH or GSM8K rows", **formatter)
    _add_common(math, "test", 1024)
    math.add_argument("--format", choices=MATH_FORMATS, default="auto", help="row format (auto: from the columns)")
    math.add_argument("--system-prompt", default=DEFAULT_MATH_SYSTEM_PROMPT, help='system message ("": none)')
    math.add_argument("--math-timeout", type=float, default=5.0, help="seconds to parse and compare one answer")
    math.set_defaults(func=run, parser=math)
    return parser


def _check_reachable(urls: list[str]) -> None:
    """At least one server must answer `/health` now: with none, every attempt of the run would be an `error` row
    (a fault mid-run is still only that attempt's status)."""
    import httpx

    failures = []
    for url in urls:
        try:
            httpx.get(f"{url.rstrip('/')}/health", timeout=_HEALTH_TIMEOUT_S).raise_for_status()
            return
        except httpx.HTTPError as error:
            failures.append(f"{url}: {type(error).__name__}: {error}")
    raise ValueError(
        f"--lean-server-urls: no server answers /health ({'; '.join(failures)}); start `trl-verigate lean-server` "
        "there or fix the URLs"
    )


def _lean_verifier(args: argparse.Namespace):
    """The verifier and how many proofs it takes at once: a `LeanClient` for --lean-server-urls, else a (not yet
    started) `LeanServer` over the REPL of --lean-repl-command."""
    from trl_verigate.lean_server import LeanClient, LeanServer, LeanServerConfig

    if not args.lean_timeout > 0:
        raise ValueError(f"--lean-timeout must be > 0 seconds, got {args.lean_timeout}")
    if args.lean_server_urls:
        if args.lean_repl_command:
            raise ValueError("--lean-server-urls and --lean-repl-command: give one (remote servers or a local pool)")
        client = LeanClient(args.lean_server_urls, timeout=args.lean_timeout)
        _check_reachable(args.lean_server_urls)
        return client, _PROOFS_PER_SERVER * len(args.lean_server_urls)
    from trl_verigate.lean_server.cli.options import resolve_project_dir, resolve_repl_command
    from trl_verigate.prover_pool.checks import program_problem

    project_dir = resolve_project_dir(args.lean_project_dir)
    repl_command = resolve_repl_command(args.lean_repl_command, project_dir)
    if repl_command is None:
        raise ValueError(
            '--lean-repl-command: no Lean REPL given or found; pass --lean-repl-command "lake env /path/to/repl" '
            "with --lean-project-dir, or --lean-server-urls (see `trl-verigate lean-doctor`)"
        )
    problem = program_problem(repl_command)
    if problem is not None:
        raise ValueError(
            f"--lean-repl-command {shlex.join(repl_command)} {problem}; give a built REPL, e.g. "
            '"lake env /path/to/repl/.lake/build/bin/repl" (see `trl-verigate lean-doctor`)'
        )
    settings = {"workers": args.lean_workers} if args.lean_workers is not None else {}
    config = LeanServerConfig(
        repl_command=repl_command,
        project_dir=str(project_dir),
        timeout=args.lean_timeout,
        memory_limit_mb=args.lean_memory_limit_mb,
        **settings,
    )
    return LeanServer(config), config.workers


def _coq_verifier(args: argparse.Namespace):
    """A (not yet started) `CoqServer` for the flags, and how many proofs it takes at once; its programs must run."""
    from trl_verigate.coq import CoqServer, CoqServerConfig
    from trl_verigate.prover_pool.checks import program_problem

    if not args.coq_timeout > 0:
        raise ValueError(f"--coq-timeout must be > 0 seconds, got {args.coq_timeout}")
    settings = {
        "timeout": args.coq_timeout,
        "memory_limit_mb": args.coq_memory_limit_mb,
        "recheck": args.coq_recheck,
        "print_assumptions": args.coq_print_assumptions,
        "sandbox": args.coq_sandbox,
    }
    if args.coq_command:
        settings["coqidetop_command"] = shlex.split(args.coq_command)
    if args.coq_header is not None:
        settings["header"] = args.coq_header
    if args.coq_workers is not None:
        settings["workers"] = args.coq_workers
    try:
        config = CoqServerConfig(**settings)
    except (TypeError, ValueError) as error:
        raise ValueError(f"--coq-*: {error}") from error
    programs = [("--coq-command", config.coqidetop_command)]
    if config.recheck == "coqchk":
        programs += [("--coq-recheck coqchk", config.coqc_command), ("--coq-recheck coqchk", config.coqchk_command)]
    for flag, argv in programs:
        problem = program_problem(argv)
        if problem is not None:
            raise ValueError(
                f"{flag}: {shlex.join(argv)} {problem}; install Coq 8.16 (`apt-get install coq`, then "
                "`trl-verigate coq-doctor`) or give the program's path"
            )
    return CoqServer(config), config.workers


@dataclass
class Prepared:
    """What `prepare` checked and built, before any model loads."""

    evaluation: Evaluation
    sampling: SamplingConfig
    verifier: object | None  # the prover (a LeanServer or CoqServer not yet started, or a LeanClient)
    identity: dict  # what the output folder evaluates (run.json)
    split_note: str = ""  # which rows --split picked
    resume_note: str | None = None  # how a changed --n resumes the folder's attempts
    needs_model: bool = True  # False when samples.jsonl already holds every attempt (a rerun for other --k)


def _check_at_least(args: argparse.Namespace, minimum: float, *names: str) -> None:
    for name in names:
        value = getattr(args, name)
        if value is not None and not value >= minimum:
            raise ValueError(f"--{name.replace('_', '-')} must be >= {minimum}, got {value}")


def _check_dtype(name: str) -> None:
    import torch

    if name != "auto" and not isinstance(getattr(torch, name, None), torch.dtype):
        raise ValueError(f"--dtype {name}: not a torch dtype; use auto, bfloat16, float16 or float32")


def resolve_model_sampling(args: argparse.Namespace) -> dict:
    """--top-k, --min-p, --repetition-penalty where given, else what the model's generation_config.json sets (read
    without loading the model), else off: the values both backends then sample with."""
    from_model = model_sampling_defaults(args.model)
    given = {name: getattr(args, name) for name in MODEL_SAMPLING_FIELDS if getattr(args, name) is not None}
    return {**from_model, **given}


def written_as_path(model: str) -> bool:
    """Whether --model names a folder here rather than a hub id: it starts with /, . or ~, has a shape no hub id has
    (a backslash, two slashes), or its first part is a folder here (``outputs/run1`` after training into outputs/)."""
    if model.startswith(("/", ".", "~")) or not _HUB_ID.fullmatch(model):
        return True
    return "/" in model and Path(model.split("/", 1)[0]).is_dir()


def _check_flags(args: argparse.Namespace) -> None:
    """The flags that need neither the dataset nor a prover, checked."""
    _check_at_least(args, 1, "n", "limit", "batch_size", "chunk_size", "tensor_parallel_size")
    check_output_dir(args.output)
    _check_dtype(args.dtype)
    if written_as_path(args.model) and not Path(args.model).expanduser().is_dir():
        raise ValueError(
            f"--model {args.model}: no such folder ({Path(args.model).expanduser().absolute()}); give a model folder "
            "(e.g. a run's output_dir) or a hub id"
        )
    if args.task == "lean":
        _check_at_least(args, 1, "lean_workers", "lean_memory_limit_mb")
    elif args.task == "coq":
        _check_at_least(args, 1, "coq_workers", "coq_memory_limit_mb")
    elif not args.math_timeout > 0:
        raise ValueError(f"--math-timeout must be > 0 seconds, got {args.math_timeout}")


def _task_parts(args: argparse.Namespace, rows: list) -> tuple:
    """(problem set, scorer, verifier, prompt settings, scoring settings) of the task `args` names."""
    from trl_verigate.evaluate.coq_scoring import CoqScorer
    from trl_verigate.evaluate.lean_scoring import LeanScorer
    from trl_verigate.evaluate.math_scoring import MathScorer

    if args.task == "coq":
        problem_set = coq_problems(
            rows, args.prompt_template, args.conversational, args.statement_field, limit=args.limit
        )
        verifier, concurrency = _coq_verifier(args)
        scorer = CoqScorer(verifier, args.coq_timeout, args.statement_field, concurrency=concurrency)
        prompt = {"prompt_template": args.prompt_template, "conversational": args.conversational}
        scoring = {
            "statement_field": args.statement_field,
            "coq_header": verifier.config.header,
            "coq_timeout": args.coq_timeout,
            "coq_recheck": args.coq_recheck,
            "coq_print_assumptions": args.coq_print_assumptions,
        }
        return problem_set, scorer, verifier, prompt, scoring
    if args.task == "lean":
        problem_set = lean_problems(
            rows, args.prompt_template, args.conversational, args.statement_field, limit=args.limit
        )
        verifier, concurrency = _lean_verifier(args)
        scorer = LeanScorer(
            verifier, args.lean_timeout, args.completion_format, args.statement_field, concurrency=concurrency
        )
        prompt = {"prompt_template": args.prompt_template, "conversational": args.conversational}
        scoring = {
            "completion_format": args.completion_format,
            "statement_field": args.statement_field,
            "lean_timeout": args.lean_timeout,
        }
        return problem_set, scorer, verifier, prompt, scoring
    problem_set = math_problems(rows, args.format, args.system_prompt or None, limit=args.limit)
    scoring = {"format": problem_set.format, "math_timeout": args.math_timeout}
    return problem_set, MathScorer(args.math_timeout), None, {"system_prompt": args.system_prompt}, scoring


def prepare(args: argparse.Namespace) -> Prepared:
    """Everything that can be checked without a model, checked; a ValueError names the flag to fix."""
    _check_flags(args)
    ks = check_ks(parse_ks(args.k), args.n)
    check_attempts(args.temperature, args.n)
    sampling = SamplingConfig(
        args.temperature, args.top_p, args.max_new_tokens, args.seed, **resolve_model_sampling(args)
    )
    if args.backend == "vllm":
        import_vllm()
    check_matplotlib()
    rows, split_note = select_rows(args.dataset, args.split, args.dataset_config)
    problem_set, scorer, verifier, prompt, scoring = _task_parts(args, rows)
    config = {key: value for key, value in vars(args).items() if key not in ("func", "parser")}
    evaluation = Evaluation(args.task, problem_set, scorer, args.n, ks, args.seed, args.chunk_size, config)
    # Everything that decides what an attempt's row holds: a resumed run must agree on all of it, or its rows would
    # mix two evaluations. (--n may change: see check_same_run.)
    sampled = {
        "temperature": args.temperature,
        "top_p": args.top_p,
        "max_new_tokens": args.max_new_tokens,
        **sampling.model_fields(),
    }
    identity = {
        "task": args.task,
        "model": args.model,
        "dataset_sha256": problem_set.sha256,
        **prompt,
        **sampled,
        "seed": args.seed,
        **scoring,
    }
    resume_note = check_same_run(args.output, identity, args.n)
    needs_model = True
    if (Path(args.output) / SAMPLES_FILE).exists():
        # A damaged samples.jsonl stops the run here, not after the model has loaded.
        done = {(str(row["problem_id"]), int(row["attempt"])) for row in read_samples(args.output)}
        needs_model = any((p.id, a) not in done for p in problem_set.problems for a in range(args.n))
    return Prepared(evaluation, sampling, verifier, identity, split_note, resume_note, needs_model)


def build_backend(args: argparse.Namespace, sampling: SamplingConfig):
    if args.backend == "vllm":
        return VLLMBackend.from_pretrained(args.model, sampling, tensor_parallel_size=args.tensor_parallel_size)
    return HFBackend.from_pretrained(args.model, sampling, batch_size=args.batch_size, dtype=args.dtype)


def run(args: argparse.Namespace) -> int:
    try:
        prepared = prepare(args)
    except ValueError as error:
        args.parser.error(str(error))
    print(prepared.split_note)
    if prepared.resume_note:
        print(prepared.resume_note)
    try:
        backend = build_backend(args, prepared.sampling) if prepared.needs_model else None
    except OSError as error:  # transformers' "not a folder, not on the hub, no config.json here"
        where = "" if Path(args.model).expanduser().is_dir() else "no such folder here, and as a hub id "
        args.parser.error(f"--model {args.model}: {where}cannot load it ({error})")
    record_run(args.output, prepared.identity, args.n)
    with contextlib.ExitStack() as stack:
        if hasattr(prepared.verifier, "__enter__"):  # a local pool: started here, closed after
            stack.enter_context(prepared.verifier)
        stack.callback(prepared.evaluation.scorer.close)
        try:
            evaluate(prepared.evaluation, backend, args.output, progress=not args.no_progress)
        except KeyboardInterrupt:
            saved = len(read_samples(args.output))
            print(
                f"interrupted; {saved} attempts saved in {Path(args.output) / SAMPLES_FILE}; rerun the same command "
                "to resume"
            )
            return 130
    output = Path(args.output).resolve()
    print(f"Outputs: {output} ({SAMPLES_FILE}: one row per attempt; {SUMMARY_FILE}; {PLOT_FILE})")
    return 0
