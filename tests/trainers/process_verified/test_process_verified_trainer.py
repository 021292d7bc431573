"""ProcessVerifiedGRPOTrainer (prover="lean") on CPU with the tiny policy and the stand-in Lean REPL.

Completions are fixed by a `rollout_func` (TRL's hook for custom generation), so every verdict is known: the
stand-in answers a generic pass, or what a `--script` row forces for a marker in the proof (an error at a given
position, no answer to `#print axioms`, a hang, a crash, garbage). The (B, T) advantages the loss receives are checked
against values computed here by hand: g from the verdicts, A_out from GRPO's formula, phi from the paper's rules, and
the token at which each tactic begins from the tokenizer's own offset mapping (not from trl_verigate's decoding).
"""

import os
import statistics

import pytest
import torch
from datasets import Dataset

from tests.fake_checker import checker_command
from tests.fake_repl import stand_in_config
from tests.launch import rollout_of_texts
from trl_verigate.lean_server import LeanServer
from trl_verigate.rewards.process import ProcessVerdict  # noqa: E402
from trl_verigate.trainers.process_verified import ProcessVerifiedConfig, ProcessVerifiedGRPOTrainer  # noqa: E402

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

G = 4
D1, D2 = -0.05, -0.1
IMPORTS_ONLY = "import Mathlib\nimport Aesop"
UNI = "theorem uni_le (n : ℕ) (h : 0 < n) : n ≤ n * n → True := by"
TWO = "theorem two_plus : (2 : Nat) + 2 = 4 := by"
PROMPTS = {UNI: "Complete the following Lean 4 code:\n\n```lean4\n" + UNI, TWO: "Prove:\n```lean4\n" + TWO}
# Shape (b): reasoning with Unicode, then a block that restates UNI with other whitespace and its own header lines
# (dropped: the trusted header is used).
BLOCK = (
    "Since n ≤ n * n for 0 < n → the goal is trivial.\n```lean4\nimport Mathlib\nopen Nat renaming succ → s\n\n"
    "theorem uni_le (n : ℕ)  (h : 0 < n) :\n    n ≤ n * n → True := by\n  intro hle\n  exact trivial\n```"
)
COMPLETIONS = {
    UNI: [
        "\n  intro hle\n  trivial\n```",  # passes: phi = [1, 1]
        "\n  norm_num\n  nlinarith [sq_nonneg (n - 1)]\n  simp\n```",  # error in tactic 1: [d1, d2, d2]
        BLOCK,  # shape (b), passes: [1, 1]
        "\n  intro incomplete_marker\n```",  # "unsolved goals" at `by`: incomplete, [d1]
    ],
    TWO: [
        "\n  simp [hang_marker]\n```",  # timeout: g = 0, no tactics
        "",  # no proof at all
        "\n  exact bad_lemma_marker\n  rfl\n```",  # error in tactic 0: [d2, d2]
        "\n  simp [crash_marker]\n```",  # the REPL dies: crashed
    ],
}
EXPECTED_PHI = {UNI: [[1.0, 1.0], [D1, D2, D2], [1.0, 1.0], [D1]], TWO: [[], [], [D2, D2], []]}
EXPECTED_G = {UNI: [1.0, 0.0, 1.0, 0.0], TWO: [0.0, 0.0, 0.0, 0.0]}
EXPECTED_STATUS = {UNI: ["passed", "failed", "passed", "failed"], TWO: ["timeout", "failed", "failed", "crashed"]}
# Error positions are the REPL's: line 1 is the statement, the proof follows after "\n".
SCRIPT = [
    {
        "match": "nlinarith [sq_nonneg",
        "response": {
            "env": 0,
            "messages": [
                {
                    "severity": "error",
                    "pos": {"line": 4, "column": 2},
                    "endPos": {"line": 4, "column": 31},
                    "data": "linarith failed",
                }
            ],
        },
    },
    # An incomplete proof: Lean reports "unsolved goals" at the statement's `by`, before the proof body.
    {
        "match": "incomplete_marker",
        "response": {
            "env": 0,
            "messages": [
                {
                    "severity": "error",
                    "pos": {"line": 1, "column": UNI.index(":= by") + 3},
                    "endPos": {"line": 1, "column": UNI.index(":= by") + 5},
                    "data": "unsolved goals\nn : ℕ\nh : 0 < n\nhle : n ≤ n * n\n⊢ True",
                }
            ],
        },
    },
    {
        "match": "bad_lemma_marker",
        "response": {
            "env": 0,
            "messages": [
                {
                    "severity": "error",
                    "pos": {"line": 3, "column": 8},
                    "endPos": {"line": 3, "column": 24},
                    "data": "unknown identifier 'bad_lemma_marker'",
                }
            ],
        },
    },
    {"match": "hang_marker", "behaviour": "hang"},
    {"match": "crash_marker", "behaviour": "crash"},
    {"match": "garbage_marker", "behaviour": "garbage"},
]


def fixed_rollout(prompts, trainer):
    """Completion k of a group is COMPLETIONS[statement][k]; rows arrive grouped, G per prompt."""
    by_prompt = {prompt: statement for statement, prompt in PROMPTS.items()}
    texts = [COMPLETIONS[by_prompt[prompt]][row % G] for row, prompt in enumerate(prompts)]
    return rollout_of_texts(trainer.processing_class, prompts, texts)


@pytest.fixture(scope="module")
def lean_server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lean")
    # The header's imports only: no preamble before the statement, so SCRIPT's lines are the REPL's as written.
    config = stand_in_config(folder, script=SCRIPT, workers=2, timeout=2.0, header=IMPORTS_ONLY)
    with LeanServer(config) as server:
        yield server


def dataset(statements=(UNI, TWO)):
    return Dataset.from_dict(
        {
            "prompt": [PROMPTS[s] for s in statements],
            "formal_statement": list(statements),
            "header": ["" for _ in statements],  # empty: the server's default header
        }
    )


def make_trainer(tiny_models, tmp_path, lean_server, reward_funcs=None, rollout=fixed_rollout, **overrides):
    args = ProcessVerifiedConfig(
        output_dir=str(tmp_path / "out"),
        **{
            "per_device_train_batch_size": 2 * G,
            "num_generations": G,
            "max_completion_length": 64,
            "learning_rate": 1e-5,
            "beta": 0.0,
            "report_to": "none",
            "use_cpu": True,
            "seed": 0,
            "save_strategy": "no",
            "logging_steps": 1,
            "max_steps": 1,
            "prover_timeout": 2.0,
            **overrides,
        },
    )
    trainer = ProcessVerifiedGRPOTrainer(
        model=tiny_models["policy"],
        reward_funcs=reward_funcs,
        args=args,
        train_dataset=dataset(),
        rollout_func=rollout,
        verifier=lean_server,
    )
    trainer.model.train()
    return trainer


def score_batch(trainer, statements=(UNI, TWO)):
    inputs = [row for row in dataset(statements) for _ in range(G)]
    return trainer._generate_and_score_completions(inputs)


def first_token_of(tokenizer, text: str, char_start: int) -> int:
    """The token whose offset-mapping range holds character `char_start` (the tokenizer's own offsets)."""
    offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    return next(index for index, (_, end) in enumerate(offsets) if end > char_start)


def tactic_starts(completion: str, tactics: list[str]) -> list[int]:
    """Character starts of the tactics, found in order in the completion's proof."""
    starts, position = [], completion.find(":= by") + 5 if "```lean4" in completion else 0
    for tactic in tactics:
        position = completion.index(tactic, position)
        starts.append(position)
        position += len(tactic)
    return starts


TACTICS = {
    UNI: [
        ["intro hle", "trivial"],
        ["norm_num", "nlinarith [sq_nonneg (n - 1)]", "simp"],
        ["intro hle", "exact trivial"],
        ["intro incomplete_marker"],
    ],
    TWO: [[], [], ["exact bad_lemma_marker", "rfl"], []],
}


def expected_advantages(tokenizer, output, statements=(UNI, TWO), coef=1.0, assignment="first", phi=None):
    phi = phi or EXPECTED_PHI
    rows = []
    width = output["completion_ids"].shape[1]
    for statement in statements:
        g = EXPECTED_G[statement]
        mean, std = statistics.mean(g), statistics.stdev(g)
        for k, completion in enumerate(COMPLETIONS[statement]):
            a_out = (g[k] - mean) / (std + 1e-4)
            ids = tokenizer(completion, add_special_tokens=False)["input_ids"]
            row = [0.0] * width
            for t in range(len(ids) + 1):  # the completion's tokens and its EOS
                row[t] = a_out
            for tactic, start, score in zip(
                TACTICS[statement][k], tactic_starts(completion, TACTICS[statement][k]), phi[statement][k], strict=True
            ):
                a_proc = coef * (score - mean)
                first = first_token_of(tokenizer, completion, start)
                last = first_token_of(tokenizer, completion, start + len(tactic) - 1)
                chosen = {"first": [first], "last": [last], "all": range(first, last + 1)}[assignment]
                for t in chosen:
                    row[t] += a_proc
            rows.append(row)
    return torch.tensor(rows)


def test_exact_token_advantages_against_hand_computation(tiny_models, tmp_path, lean_server, tokenizer):
    trainer = make_trainer(tiny_models, tmp_path, lean_server)
    output = score_batch(trainer)
    advantages = output["advantages"]
    assert advantages.shape == output["completion_ids"].shape
    expected = expected_advantages(tokenizer, output)
    assert torch.allclose(advantages, expected, atol=1e-5), ((advantages - expected).abs() > 1e-5).nonzero().tolist()
    # Padding stays 0 and the logged per-completion advantage is the token mean the loss uses.
    assert (advantages[output["completion_mask"] == 0] == 0).all()
    logged = list(trainer._logs["advantages"])[-2 * G :]
    means = (expected.sum(dim=1) / output["completion_mask"].sum(dim=1)).tolist()
    assert logged == pytest.approx(means, abs=1e-5)


def test_metrics_statuses_and_failures(tiny_models, tmp_path, lean_server):
    trainer = make_trainer(tiny_models, tmp_path, lean_server)
    score_batch(trainer)
    metrics = {name: values[-1] for name, values in trainer._metrics["train"].items()}
    statuses = EXPECTED_STATUS[UNI] + EXPECTED_STATUS[TWO]
    assert metrics["lean/pass_rate"] == pytest.approx(2 / 8)
    for status in ("passed", "failed", "timeout", "crashed", "rejected", "error"):
        assert metrics[f"lean/status/{status}"] == pytest.approx(statuses.count(status) / 8), status
    assert metrics["lean/tactics_per_proof"] == pytest.approx((2 + 3 + 2 + 1 + 0 + 0 + 2 + 0) / 8)
    assert metrics["lean/empty_fraction"] == pytest.approx(3 / 8)  # the timeout, the empty completion, the crash
    # Failed proofs with tactics: first_error/num_tactics = 1/3, 1/1 (incomplete), 0/2.
    assert metrics["lean/first_error_relative"] == pytest.approx((1 / 3 + 1 + 0) / 3)
    assert metrics["lean/frac_zero_std_outcome"] == pytest.approx(0.5)  # TWO's group is all 0
    assert metrics["lean/verification_failures"] == 2  # the timeout and the crash
    assert trainer.proof_reward.failures == 2
    assert metrics["lean/verify_seconds"] > 0 and metrics["lean/proofs_per_second"] > 0
    assert 0.0 <= metrics["lean/verify_hidden_fraction"] <= 1.0
    assert metrics["rewards/lean_proof/mean"] == pytest.approx(2 / 8)
    assert metrics["lean/rechecked_fraction"] == 0.0  # this server has no recheck backend


def test_rechecked_fraction_counts_the_passes_a_checker_saw(tiny_models, tmp_path):
    # The stand-in checker accepts both of UNI's passes; every REPL pass went through it.
    config = stand_in_config(
        tmp_path,
        script=SCRIPT,
        workers=2,
        timeout=2.0,
        header=IMPORTS_ONLY,
        recheck="passed",
        recheck_command=checker_command(),
    )
    with LeanServer(config) as server:
        trainer = make_trainer(tiny_models, tmp_path, server)
        score_batch(trainer)
    metrics = {name: values[-1] for name, values in trainer._metrics["train"].items()}
    assert metrics["lean/pass_rate"] == pytest.approx(2 / 8)
    assert metrics["lean/rechecked_fraction"] == 1.0


@pytest.mark.parametrize("assignment", ["all", "last"])
def test_assignment_modes(tiny_models, tmp_path, lean_server, tokenizer, assignment):
    trainer = make_trainer(tiny_models, tmp_path, lean_server, process_token_assignment=assignment)
    output = score_batch(trainer)
    expected = expected_advantages(tokenizer, output, assignment=assignment)
    assert torch.allclose(output["advantages"], expected, atol=1e-5)


def test_without_first_error_propagation_only_error_tactics_get_d2(tiny_models, tmp_path, lean_server, tokenizer):
    trainer = make_trainer(tiny_models, tmp_path, lean_server, first_error_propagation=False)
    output = score_batch(trainer)
    # The error message starts in tactic 1 of UNI's second completion only: simp after it gets d1.
    phi = {UNI: [[1.0, 1.0], [D1, D2, D1], [1.0, 1.0], [D1]], TWO: [[], [], [D2, D1], []]}
    expected = expected_advantages(tokenizer, output, phi=phi)
    assert torch.allclose(output["advantages"], expected, atol=1e-5)


def test_coefficient_zero_is_outcome_only_grpo(tiny_models, tmp_path, lean_server, tokenizer):
    trainer = make_trainer(tiny_models, tmp_path, lean_server, process_advantage_coef=0.0)
    output = score_batch(trainer)
    expected = expected_advantages(tokenizer, output, coef=0.0)
    assert torch.allclose(output["advantages"], expected, atol=1e-5)


def length_penalty(completions, **kwargs):
    return [-0.01 * len(completion) for completion in completions]


def test_extra_reward_enters_a_out_but_not_the_process_mean(tiny_models, tmp_path, lean_server, tokenizer):
    trainer = make_trainer(tiny_models, tmp_path, lean_server, reward_funcs=[length_penalty])
    assert trainer.reward_func_names == ["lean_proof", "length_penalty"]
    output = score_batch(trainer)
    # A_out from the summed rewards (TRL); A_proc still phi - mean(g).
    rows, width = [], output["completion_ids"].shape[1]
    for statement in (UNI, TWO):
        g = EXPECTED_G[statement]
        total = [g[k] - 0.01 * len(c) for k, c in enumerate(COMPLETIONS[statement])]
        mean, std = statistics.mean(total), statistics.stdev(total)
        for k, completion in enumerate(COMPLETIONS[statement]):
            ids = tokenizer(completion, add_special_tokens=False)["input_ids"]
            row = [(total[k] - mean) / (std + 1e-4) if t <= len(ids) else 0.0 for t in range(width)]
            for start, score in zip(
                tactic_starts(completion, TACTICS[statement][k]), EXPECTED_PHI[statement][k], strict=True
            ):
                row[first_token_of(tokenizer, completion, start)] += score - statistics.mean(g)
            rows.append(row)
    assert torch.allclose(output["advantages"], torch.tensor(rows), atol=1e-4)


def test_training_survives_hang_crash_and_garbage(tiny_models, tmp_path, lean_server):
    faults = [
        "\n  simp [hang_marker]\n```",
        "\n  simp [crash_marker]\n```",
        "\n  simp [garbage_marker]\n```",
        "\n  rfl\n```",
    ]

    def faulty_rollout(prompts, trainer):
        return rollout_of_texts(trainer.processing_class, prompts, [faults[row % G] for row in range(len(prompts))])

    trainer = make_trainer(tiny_models, tmp_path, lean_server, rollout=faulty_rollout, max_steps=2)
    trainer.train()
    history = [entry for entry in trainer.state.log_history if "lean/pass_rate" in entry]
    assert len(history) == 2
    for entry in history:
        assert entry["lean/pass_rate"] == pytest.approx(0.25)  # only `rfl` passes
        assert entry["lean/verification_failures"] == 6  # hang, crash and garbage in both groups
        assert entry["lean/status/timeout"] == pytest.approx(0.25)
        assert entry["lean/status/crashed"] == pytest.approx(0.5)
    assert trainer.proof_reward.failures == 12


def test_unreachable_remote_server_gives_zero_and_counts(tiny_models, tmp_path):
    from tests.launch import refused_url
    from trl_verigate.lean_server import LeanClient

    with refused_url() as dead:
        client = LeanClient([dead], retries=0, backoff=0.0, protocol="verigate")
        trainer = make_trainer(tiny_models, tmp_path, client)
        output = score_batch(trainer)
    assert trainer.proof_reward.failures == 2 * G - 1  # every completion but the empty one reached for the server
    assert torch.equal(output["advantages"], torch.zeros_like(output["advantages"]))  # all g = 0, no tactics


def test_config_errors_name_the_field(tmp_path):
    with pytest.raises(ValueError, match="process_token_assignment"):
        ProcessVerifiedConfig(output_dir=str(tmp_path), use_cpu=True, process_token_assignment="middle")
    with pytest.raises(ValueError, match="prover_timeout"):
        ProcessVerifiedConfig(output_dir=str(tmp_path), use_cpu=True, prover_timeout=0)
    with pytest.raises(ValueError, match="not both"):
        ProcessVerifiedConfig(
            output_dir=str(tmp_path), use_cpu=True, lean_repl_command=["repl"], lean_server_urls=["http://x:1"]
        )
    config = ProcessVerifiedConfig(output_dir=str(tmp_path), use_cpu=True, lean_repl_command="lake env repl")
    assert config.lean_repl_command == ["lake", "env", "repl"]
    # A flag on the command line arrives as a one-item list; it is split the same way.
    config = ProcessVerifiedConfig(output_dir=str(tmp_path), use_cpu=True, lean_repl_command=["lake env repl"])
    assert config.lean_repl_command == ["lake", "env", "repl"]


def test_the_prover_is_lean_or_coq_and_its_fields_do_not_mix(tmp_path):
    with pytest.raises(ValueError, match="prover='isabelle' is not supported"):
        ProcessVerifiedConfig(output_dir=str(tmp_path), use_cpu=True, prover="isabelle")
    with pytest.raises(ValueError, match="prover='coq' with lean_repl_command"):
        ProcessVerifiedConfig(output_dir=str(tmp_path), use_cpu=True, prover="coq", lean_repl_command=["repl"])
    config = ProcessVerifiedConfig(output_dir=str(tmp_path), use_cpu=True, prover="coq", coq_command="coqidetop -q")
    assert config.coq_command == ["coqidetop", "-q"]


def test_the_lean_and_coq_trainers_fix_the_prover(tiny_models, tmp_path, lean_server):
    from trl_verigate.trainers import CoqProcessConfig, CoqProcessGRPOTrainer, LeanProcessConfig, LeanProcessGRPOTrainer

    sizes = {"output_dir": str(tmp_path), "use_cpu": True, "num_generations": G, "per_device_train_batch_size": 2 * G}
    lean_config = LeanProcessConfig(**sizes)
    assert lean_config.prover == "lean" and CoqProcessConfig(**sizes).prover == "coq"
    with pytest.raises(TypeError, match="prover"):
        LeanProcessConfig(**sizes, prover="coq")  # not a field a fixed-prover config takes
    with pytest.raises(ValueError, match="prover='coq' with lean_repl_command"):
        CoqProcessConfig(**sizes, lean_repl_command=["repl"])
    trainer = LeanProcessGRPOTrainer(
        model=tiny_models["policy"], args=lean_config, train_dataset=dataset(), verifier=lean_server
    )
    assert trainer.proof_reward.oracle.verifier is lean_server and trainer.metric_prefix == "lean"
    assert trainer.proof_reward.__name__ == "lean_proof"
    with pytest.raises(TypeError, match="args must be a CoqProcessConfig, got LeanProcessConfig"):
        CoqProcessGRPOTrainer(model=tiny_models["policy"], args=lean_config, train_dataset=dataset())


def test_no_verifier_configured_raises(tiny_models, tmp_path):
    args = ProcessVerifiedConfig(
        output_dir=str(tmp_path), use_cpu=True, num_generations=2, per_device_train_batch_size=2
    )
    with pytest.raises(ValueError, match="lean_repl_command"):
        ProcessVerifiedGRPOTrainer(model=tiny_models["policy"], args=args, train_dataset=dataset())


class ArithmeticChecker:
    """A second process-oracle backend: each line "a+b=c" of a completion is a step, checked by arithmetic."""

    def verify(self, prompts, rows, completions):
        verdicts = []
        for completion in completions:
            spans, position, first_error = [], 0, None
            for index, line in enumerate(completion.split("\n")):
                spans.append((position, position + len(line)))
                left, right = line.split("=")
                if first_error is None and sum(int(x) for x in left.split("+")) != int(right):
                    first_error = index
                position += len(line) + 1
            status = "passed" if first_error is None else "failed"
            first_error = len(spans) if first_error is None else first_error
            verdicts.append(ProcessVerdict(status, tuple(spans), first_error, ()))
        return verdicts


def test_a_second_oracle_backend_plugs_in_unchanged(tiny_models, tmp_path, tokenizer):
    completions = ["1+1=2\n2+2=4", "1+1=3\n2+2=4", "2+3=5", "9+1=10\n1+1=1\n3+3=6"]

    def rollout(prompts, trainer):
        return rollout_of_texts(tokenizer, prompts, [completions[row % G] for row in range(len(prompts))])

    args = ProcessVerifiedConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=2 * G,
        num_generations=G,
        max_completion_length=32,
        beta=0.0,
        report_to="none",
        use_cpu=True,
        seed=0,
        save_strategy="no",
        max_steps=1,
    )
    trainer = ProcessVerifiedGRPOTrainer(
        model=tiny_models["policy"],
        args=args,
        train_dataset=dataset(),
        rollout_func=rollout,
        process_oracle=ArithmeticChecker(),
    )
    trainer.model.train()
    output = score_batch(trainer)
    g = [1.0, 0.0, 1.0, 0.0]
    phi = [[1.0, 1.0], [D2, D2], [1.0], [D1, D2, D2]]
    mean, std = statistics.mean(g), statistics.stdev(g)
    expected = torch.zeros_like(output["advantages"])
    for row in range(2 * G):
        k = row % G
        encoding = tokenizer(completions[k], add_special_tokens=False, return_offsets_mapping=True)
        expected[row, : len(encoding["input_ids"]) + 1] = (g[k] - mean) / (std + 1e-4)
        line_starts = [0] + [i + 1 for i, char in enumerate(completions[k]) if char == "\n"]
        for start, score in zip(line_starts, phi[k], strict=True):
            first = next(i for i, (_, end) in enumerate(encoding["offset_mapping"]) if end > start)
            expected[row, first] += score - mean
    assert torch.allclose(output["advantages"], expected, atol=1e-5)


class TimedVerifier:
    """A Verifier that passes everything after `latency` seconds; records when each call started and its size."""

    def __init__(self, latency=0.0):
        import threading

        self.latency = latency
        self.calls = []
        self.lock = threading.Lock()

    def verify(self, requests, timeout=None, progress=None):
        import time

        from trl_verigate.lean_server import VerificationResult

        with self.lock:
            self.calls.append((time.perf_counter(), len(requests)))
        time.sleep(self.latency)
        return [VerificationResult(status="passed") for _ in requests]

    async def averify(self, requests, timeout=None, progress=None):
        return self.verify(requests, timeout, progress)


def test_chunked_generation_verifies_each_chunk_while_the_next_generates(tiny_models, tmp_path, monkeypatch):
    import time

    from trl import GRPOTrainer

    generation_ends = []
    original = GRPOTrainer._generate_single_turn

    def timed(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        generation_ends.append(time.perf_counter())
        return result

    monkeypatch.setattr(GRPOTrainer, "_generate_single_turn", timed)
    verifier = TimedVerifier(latency=0.2)
    trainer = make_trainer(
        tiny_models,
        tmp_path,
        verifier,
        rollout=None,
        generation_chunks=2,
        max_completion_length=8,
        completion_format="proof_body",
    )
    output = score_batch(trainer)
    assert len(generation_ends) == 2  # two chunks of 4 rows
    assert [size for _, size in verifier.calls] == [G, G]  # each chunk verified once, nothing twice
    assert verifier.calls[0][0] < generation_ends[1]  # chunk 1 was verifying while chunk 2 generated
    assert output["advantages"].shape == output["completion_ids"].shape
    assert trainer._metrics["train"]["lean/pass_rate"][-1] == 1.0


def test_verification_starts_before_the_reward_is_asked(tiny_models, tmp_path, monkeypatch):
    import time

    from trl import GRPOTrainer

    asked = []
    original = GRPOTrainer._calculate_rewards

    def timed(self, *args, **kwargs):
        asked.append(time.perf_counter())
        return original(self, *args, **kwargs)

    monkeypatch.setattr(GRPOTrainer, "_calculate_rewards", timed)
    verifier = TimedVerifier()
    trainer = make_trainer(tiny_models, tmp_path, verifier, beta=0.04)  # beta > 0: a reference pass to overlap
    score_batch(trainer)
    assert len(verifier.calls) == 1 and verifier.calls[0][1] == 2 * G - 1  # all but the empty completion, once
    assert verifier.calls[0][0] < asked[0]


def test_reward_weights_must_count_lean_proof_first(tiny_models, tmp_path):
    args = ProcessVerifiedConfig(
        output_dir=str(tmp_path), use_cpu=True, num_generations=2, per_device_train_batch_size=2, reward_weights=[0.5]
    )
    with pytest.raises(ValueError, match="lean_proof comes first"):
        ProcessVerifiedGRPOTrainer(
            model=tiny_models["policy"],
            reward_funcs=[length_penalty],
            args=args,
            train_dataset=dataset(),
            process_oracle=ArithmeticChecker(),
        )


def test_lean_server_urls_build_a_client_with_the_config(tiny_models, tmp_path):
    from trl_verigate.lean_server import LeanClient

    args = ProcessVerifiedConfig(
        output_dir=str(tmp_path),
        use_cpu=True,
        num_generations=2,
        per_device_train_batch_size=2,
        lean_server_urls="http://127.0.0.1:1,http://127.0.0.1:2",
        prover_timeout=7.0,
        prover_header="import Foo",
    )
    trainer = ProcessVerifiedGRPOTrainer(model=tiny_models["policy"], args=args, train_dataset=dataset())
    client = trainer.proof_reward.oracle.verifier
    assert isinstance(client, LeanClient)
    assert [endpoint.url for endpoint in client.endpoints] == ["http://127.0.0.1:1", "http://127.0.0.1:2"]
    assert client.timeout == 7.0 and client.config.header == "import Foo"
    assert trainer.proof_reward.oracle.default_header == "import Foo"
