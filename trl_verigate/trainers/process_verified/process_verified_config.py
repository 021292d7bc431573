"""`ProcessVerifiedConfig`: the prover, verification and tactic-credit fields on top of TRL's `GRPOConfig`."""

from __future__ import annotations

from dataclasses import dataclass, field

from trl import GRPOConfig

from trl_verigate.advantages import TACTIC_ASSIGNMENTS
from trl_verigate.rewards.lean_proofs import COMPLETION_FORMATS
from trl_verigate.trainers.process_verified.provers import PROVERS
from trl_verigate.trainers.utils import argv, is_number, refuse_negative_learning_rate, refuse_too_few_generations


@dataclass
class ProcessVerifiedConfig(GRPOConfig):
    r"""
    Configuration class for the `ProcessVerifiedGRPOTrainer`.

    Every `trl.GRPOConfig` parameter plus the ones below. `LeanProcessConfig` and `CoqProcessConfig` are this
    class with `prover` fixed.

    Parameters:
        prover (`str`, *optional*, defaults to `"lean"`):
            The proof assistant that verifies: `"lean"` (lean_server) or `"coq"` (coqidetop).
        lean_repl_command (`list[str]` or `None`, *optional*, defaults to `None`):
            Argv of one Lean REPL (a string is split like a shell); starts a local `LeanServer` pool.
        lean_server_urls (`list[str]` or `None`, *optional*, defaults to `None`):
            Base URLs of remote `trl-verigate lean-server`s (or kimina-lean-server): a `LeanClient`.
        lean_recheck_command (`list[str]` or `None`, *optional*, defaults to `None`):
            Argv of the checker that confirms the local pool's passes with the Lean kernel (`LeanServerConfig.
            recheck_command`, e.g. `trl-verigate lean-recheck --backend replay ...`).
        lean_recheck (`str`, *optional*, defaults to `"auto"`):
            Which passes the checker confirms (`LeanServerConfig.recheck`): `"auto"`, `"none"`, `"passed"`, `"sample"`.
        lean_recheck_sample_rate (`float`, *optional*, defaults to `0.05`):
            Share of passes the audit sample rechecks until the first overturn (`LeanServerConfig.recheck_sample_rate`).
        coq_command (`list[str]` or `None`, *optional*, defaults to `None`):
            Argv of coqidetop with its options; `None`: `coqidetop.opt` or `coqidetop` from PATH.
        prover_project_dir (`str` or `None`, *optional*, defaults to `None`):
            Directory the prover runs in: the Lean project with Mathlib built, or the Coq project.
        prover_workers (`int` or `None`, *optional*, defaults to `None`):
            Prover processes in the local pool, per training process; `None`: CPUs - 1.
        prover_timeout (`float`, *optional*, defaults to `15.0`):
            Seconds of verification per proof.
        prover_header (`str` or `None`, *optional*, defaults to `None`):
            Header for rows without a `header` value: Lean imports and options, or Coq `Require Import` sentences.
        prover_memory_limit_mb (`int` or `None`, *optional*, defaults to `8192`):
            Address-space limit of each local prover process, MiB; `None`: no limit.

        completion_format (`str`, *optional*, defaults to `"auto"`):
            Where a Lean completion's proof is: `"proof_body"`, `"fenced_block"` or `"auto"`.
        statement_field (`str`, *optional*, defaults to `"formal_statement"`):
            Dataset column of the trusted statement.
        header_field (`str`, *optional*, defaults to `"header"`):
            Dataset column of the trusted header.

        tactic_granularity (`str`, *optional*, defaults to `"outermost"`):
            Lean tactics credited: `"outermost"` (the paper) or `"all"`; Coq credits each sentence.
        partial_tactic_score (`float`, *optional*, defaults to `-0.05`):
            d1: a failed proof's tactics before the first error.
        error_tactic_score (`float`, *optional*, defaults to `-0.1`):
            d2: a failed proof's first failing tactic and those after it.
        first_error_propagation (`bool`, *optional*, defaults to `True`):
            Every tactic from the first failing one on gets d2 (the paper); `False`: only tactics an error starts in.
        process_token_assignment (`str`, *optional*, defaults to `"first"`):
            Tokens that get a tactic's process advantage: `"first"` (the paper), `"all"` or `"last"`.
        process_advantage_coef (`float`, *optional*, defaults to `1.0`):
            Multiplies A_proc: `1.0` is the paper, `0.0` is outcome-only GRPO.

        generation_chunks (`int`, *optional*, defaults to `1`):
            Generate each batch in this many chunks (transformers generation) and verify each as soon as it is decoded.
        pipelined_verification (`bool`, *optional*, defaults to `False`):
            Train on the batch generated at the step before while the next one is verified (one step off-policy).
    """

    prover: str = field(
        default="lean",
        metadata={
            "help": "The proof assistant that verifies: 'lean' (lean_server) or 'coq' (coqidetop).",
            "choices": list(PROVERS),
        },
    )
    lean_repl_command: list[str] | None = field(
        default=None,
        metadata={
            "help": "Argv of one Lean REPL, e.g. ['lake', 'env', '/path/to/repl/.lake/build/bin/repl'] (a string is "
            "split like a shell). Starts a local LeanServer pool. Unused with `lean_server_urls` or a `verifier=`."
        },
    )
    lean_server_urls: list[str] | None = field(
        default=None,
        metadata={"help": "Base URLs of remote `trl-verigate lean-server`s (or kimina-lean-server): a LeanClient."},
    )
    lean_recheck_command: list[str] | None = field(
        default=None,
        metadata={
            "help": "Argv of the checker that confirms the local pool's passes with the Lean kernel (a string is split "
            "like a shell), e.g. ['trl-verigate', 'lean-recheck', '--backend', 'replay', '--project-dir', DIR]."
        },
    )
    lean_recheck: str = field(
        default="auto",
        metadata={
            "help": "Which passes the checker confirms: 'auto' (the audit sample once `trl-verigate lean-doctor` "
            "verified the checker, else none), 'none', 'passed' (all) or 'sample' (the audit sample)."
        },
    )
    lean_recheck_sample_rate: float = field(
        default=0.05,
        metadata={
            "help": "Share of passes the audit sample rechecks; after the first overturned pass every pass is "
            "rechecked (docs/lean/soundness.md: how many steps a hack survives)."
        },
    )
    coq_command: list[str] | None = field(
        default=None,
        metadata={
            "help": "Argv of coqidetop with its options (a string is split like a shell). None: `coqidetop.opt` or "
            "`coqidetop` from PATH. Used with prover='coq'."
        },
    )
    prover_project_dir: str | None = field(
        default=None,
        metadata={"help": "Directory the prover runs in: the Lean project with Mathlib built, or the Coq project."},
    )
    prover_workers: int | None = field(
        default=None, metadata={"help": "Prover processes in the local pool, per training process. None: CPUs - 1."}
    )
    prover_timeout: float = field(
        default=15.0, metadata={"help": "Seconds of verification per proof (the paper's best for Lean: 15)."}
    )
    prover_header: str | None = field(
        default=None,
        metadata={
            "help": "Header for rows without a `header` column value: Lean imports and options (None: miniF2F's), "
            "or Coq `Require Import` sentences (None: the Coq server's default)."
        },
    )
    prover_memory_limit_mb: int | None = field(
        default=8192, metadata={"help": "Address-space limit of each local prover process, MiB. None: no limit."}
    )
    tactic_granularity: str = field(
        default="outermost",
        metadata={
            "help": "Lean tactics credited: 'outermost' (the top-level sequence, paper) or 'all' (nested too). Coq "
            "credits each sentence."
        },
    )
    completion_format: str = field(
        default="auto",
        metadata={
            "help": "Lean: 'proof_body': the completion continues the statement (DeepSeek-Prover-V1.5, STP). "
            "'fenced_block': reasoning then a ```lean4 block restating the theorem (Kimina, DeepSeek-Prover-V2). "
            "'auto': a block when the completion opens a ```lean4 fence, else a proof body. Coq reads the proof "
            "from a ```coq block, else the whole completion.",
            "choices": list(COMPLETION_FORMATS),
        },
    )
    statement_field: str = field(
        default="formal_statement",
        metadata={"help": "Dataset column of the trusted statement (Lean: ends in `:= by`; Coq: `Theorem name : T.`)."},
    )
    header_field: str = field(default="header", metadata={"help": "Dataset column of the trusted header."})
    partial_tactic_score: float = field(
        default=-0.05, metadata={"help": "d1: a failed proof's tactics before the first error."}
    )
    error_tactic_score: float = field(
        default=-0.1, metadata={"help": "d2: a failed proof's first failing tactic and all after it."}
    )
    first_error_propagation: bool = field(
        default=True,
        metadata={
            "help": "True (paper): every tactic from the first failing one on gets d2. False: a failed proof's tactic "
            "gets d2 only when an error message starts inside it, d1 otherwise."
        },
    )
    process_token_assignment: str = field(
        default="first",
        metadata={
            "help": "Tokens that get a tactic's process advantage: 'first' (its first token, paper), 'all' or 'last'.",
            "choices": list(TACTIC_ASSIGNMENTS),
        },
    )
    generation_chunks: int = field(
        default=1,
        metadata={
            "help": "Generate each batch in this many chunks (transformers generation only, not vLLM) and start "
            "verifying a chunk as soon as it is decoded, so verification overlaps the generation of the next chunks. "
            "1: verification overlaps TRL's old/ref log-prob passes and other rewards only."
        },
    )
    process_advantage_coef: float = field(
        default=1.0, metadata={"help": "Multiplies A_proc: 1.0 is the paper, 0.0 is outcome-only GRPO."}
    )
    pipelined_verification: bool = field(
        default=False,
        metadata={
            "help": "False (default, the paper): on-policy; each step generates a batch, verifies it and trains on "
            "it, so a step lasts about generation + verification. True: one step off-policy; each step generates the "
            "next batch (its old log-probs from the generating weights, its verification started at once) and trains "
            "on the batch generated at the step before, whose verification ran meanwhile, so a step lasts about "
            "max(generation + training, verification). Trade-off: the trained batch was sampled from the weights "
            "one update older; the PPO ratio and clipping against the generating weights correct for it. Data: the "
            "first step of train() waits for its own batch and trains on it, and generates the next step's batch "
            "from the same prompts, so the first step's prompts are trained twice (at steps 0 and 1, two samples of "
            "completions) and the last step's prompts are never trained. A checkpoint does not hold the batch "
            "generated ahead: resumed from checkpoint-s, the prompts of step s - 1 (generated ahead, not saved) are "
            "never trained and those of step s, the first resumed step, are trained twice. Needs num_iterations=1, "
            "steps_per_generation=gradient_accumulation_steps, generation_chunks=1 and, with vLLM, "
            "vllm_importance_sampling_correction=False."
        },
    )

    def __post_init__(self):
        refuse_too_few_generations(self)
        refuse_negative_learning_rate(self)
        super().__post_init__()
        self._check_prover_fields()
        if self.completion_format not in COMPLETION_FORMATS:
            raise ValueError(
                f"completion_format={self.completion_format!r} is not supported; use one of {list(COMPLETION_FORMATS)}."
            )
        if self.process_token_assignment not in TACTIC_ASSIGNMENTS:
            raise ValueError(
                f"process_token_assignment={self.process_token_assignment!r} is not supported; use one of "
                f"{list(TACTIC_ASSIGNMENTS)}."
            )
        if self.tactic_granularity not in ("outermost", "all"):
            raise ValueError(f"tactic_granularity={self.tactic_granularity!r} must be 'outermost' or 'all'.")
        if (
            isinstance(self.generation_chunks, bool)
            or not isinstance(self.generation_chunks, int)
            or self.generation_chunks < 1
        ):
            raise ValueError(f"generation_chunks={self.generation_chunks!r} must be a positive integer.")
        if self.pipelined_verification:
            self._check_pipelined_verification()
        for name in ("partial_tactic_score", "error_tactic_score", "process_advantage_coef"):
            if not is_number(getattr(self, name)):
                raise ValueError(f"{name}={getattr(self, name)!r} must be a number.")

    def _check_prover_fields(self) -> None:
        """Refuse a prover that is not one, another prover's settings, and pool settings out of range; split the
        commands given as strings."""
        if self.prover not in PROVERS:
            raise ValueError(f"prover={self.prover!r} is not supported; use one of {list(PROVERS)}.")
        self.coq_command = argv(self.coq_command)
        if self.prover == "coq" and (self.lean_repl_command or self.lean_server_urls):
            raise ValueError(
                "prover='coq' with lean_repl_command or lean_server_urls set: those configure Lean; drop them, or "
                "train with Lean (LeanProcessConfig)."
            )
        self.lean_repl_command = argv(self.lean_repl_command)
        self.lean_recheck_command = argv(self.lean_recheck_command)
        if isinstance(self.lean_server_urls, str):
            self.lean_server_urls = [url for url in self.lean_server_urls.replace(",", " ").split() if url]
        if self.lean_server_urls is not None and len(self.lean_server_urls) == 1 and "," in self.lean_server_urls[0]:
            self.lean_server_urls = [url.strip() for url in self.lean_server_urls[0].split(",") if url.strip()]
        if self.lean_repl_command and self.lean_server_urls:
            raise ValueError(
                "lean_repl_command and lean_server_urls are both set: give lean_repl_command for a local pool or "
                "lean_server_urls for remote servers, not both."
            )
        if not is_number(self.prover_timeout) or not self.prover_timeout > 0:
            raise ValueError(f"prover_timeout={self.prover_timeout!r} must be a positive number of seconds, e.g. 15.")
        if self.prover_workers is not None and (
            isinstance(self.prover_workers, bool) or not isinstance(self.prover_workers, int) or self.prover_workers < 1
        ):
            raise ValueError(
                f"prover_workers={self.prover_workers!r} must be a positive integer, or None for CPUs - 1."
            )

    def _check_pipelined_verification(self) -> None:
        """Refuse what one-step pipelining does not support (each generated batch trains exactly one optimizer step,
        one step after its generation)."""
        if self.num_iterations != 1:
            raise ValueError(
                f"pipelined_verification=True trains each batch once, one step after it was generated; "
                f"num_iterations={self.num_iterations} would reuse it for more updates. Set num_iterations=1 or "
                "pipelined_verification=False."
            )
        if self.steps_per_generation != self.gradient_accumulation_steps:
            raise ValueError(
                f"pipelined_verification=True generates one batch per optimizer step; steps_per_generation="
                f"{self.steps_per_generation} differs from gradient_accumulation_steps="
                f"{self.gradient_accumulation_steps}. Leave steps_per_generation (and generation_batch_size) unset or "
                "set pipelined_verification=False."
            )
        if self.generation_chunks != 1:
            raise ValueError(
                f"pipelined_verification=True already overlaps verification with the next batch's generation; "
                f"generation_chunks={self.generation_chunks} is not supported with it. Set generation_chunks=1."
            )
        if self.use_vllm and self.vllm_importance_sampling_correction:
            raise ValueError(
                "pipelined_verification=True with use_vllm needs vllm_importance_sampling_correction=False: TRL "
                "computes the vLLM correction when a batch is scored, one update after it was generated. Set "
                "vllm_importance_sampling_correction=False or pipelined_verification=False."
            )
