"""VeriGate over 2 CPU processes (gloo).

tests/scripts/verigate_two_process.py runs one generation+scoring step per rank and writes its local view; here the
ranks' rows are put back together in process order (TRL's gather layout) and every rank's local advantages are
compared with a single-process hand computation on the gathered rows: a group split across processes is normalized as
a whole.

tests/scripts/verigate_fsdp_prm.py loads the PRM on each rank under FSDP's CPU-RAM-efficient loading, which gives
models zero weights on every rank but local rank 0.
"""

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.launch import TESTS_DIR, free_port
from tests.scripts.verigate_reference import reference_step_advantages

SCRIPT = TESTS_DIR / "scripts" / "verigate_two_process.py"
FSDP_SCRIPT = TESTS_DIR / "scripts" / "verigate_fsdp_prm.py"
NUM_GENERATIONS = 2


def run_two_processes(script: Path, script_args: list[str], out_dir: Path, **extra_env: str) -> list[dict]:
    """Run `script` on 2 gloo processes with torchrun; each rank writes OUT_DIR/rank<r>.json, returned in rank order."""
    port = free_port()
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1", **extra_env}
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_addr",
        "127.0.0.1",
        "--master_port",
        str(port),
        str(script),
        *script_args,
        str(out_dir),
    ]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"2-process run failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return [json.loads((out_dir / f"rank{rank}.json").read_text()) for rank in range(2)]


@pytest.fixture(scope="module")
def rank_records(tiny_models, tmp_path_factory):
    return run_two_processes(SCRIPT, [tiny_models["policy"]], tmp_path_factory.mktemp("two_process"))


@pytest.mark.slow
def test_split_group_gets_globally_normalized_advantages(rank_records):
    rank0, rank1 = rank_records
    assert (rank0["rank"], rank1["rank"]) == (0, 1)
    prompts = rank0["prompts"] + rank1["prompts"]
    rewards = rank0["rewards"] + rank1["rewards"]
    groups = [list(range(start, start + NUM_GENERATIONS)) for start in range(0, len(prompts), NUM_GENERATIONS)]
    assert all(len({prompts[row] for row in group}) == 1 for group in groups), "rows must be grouped by prompt"
    local_size = len(rank0["prompts"])
    split_groups = [group for group in groups if {row // local_size for row in group} == {0, 1}]
    assert split_groups, "the scenario needs a group whose completions sit on both processes"
    assert any(prompts[group[0]].startswith("Hard") for group in split_groups), "a gated group must be split"

    # Each rank sent only its own gated completions to the PRM, in row order.
    scores_by_row = {}
    for rank, record in enumerate(rank_records):
        gated_rows = [
            rank * local_size + row for row, prompt in enumerate(record["prompts"]) if prompt.startswith("Hard")
        ]
        scored = [scores for call in record["prm_calls"] for scores in call["scores"]]
        assert len(scored) == len(gated_rows)
        scores_by_row.update(zip(gated_rows, scored, strict=True))

    advantages = [torch.tensor(record["advantages"]) for record in rank_records]
    masks = [torch.tensor(record["completion_mask"]) for record in rank_records]
    step_ids = [torch.tensor(record["step_ids"]) for record in rank_records]
    checked_gated = checked_plain = 0
    for group in groups:
        if prompts[group[0]].startswith("Hard"):
            step_advantages = reference_step_advantages([scores_by_row[row] for row in group], "verigate")
            for position, row in enumerate(group):
                rank, local_row = divmod(row, local_size)
                ids, mask = step_ids[rank][local_row], masks[rank][local_row]
                expected = torch.tensor(
                    [
                        step_advantages[position][step] if keep and step >= 0 else 0.0
                        for step, keep in zip(ids.tolist(), mask.tolist(), strict=True)
                    ]
                )
                torch.testing.assert_close(advantages[rank][local_row], expected, rtol=1e-5, atol=1e-6)
                assert expected.abs().sum() > 0
                checked_gated += 1
        else:  # plain GRPO: (r - group mean) / (group std + 1e-4), broadcast over the completion's tokens
            group_rewards = [rewards[row] for row in group]
            mean, std = statistics.fmean(group_rewards), statistics.stdev(group_rewards)
            for row in group:
                rank, local_row = divmod(row, local_size)
                expected = (rewards[row] - mean) / (std + 1e-4) * masks[rank][local_row].float()
                torch.testing.assert_close(advantages[rank][local_row], expected, rtol=1e-5, atol=1e-6)
                checked_plain += 1
    assert checked_gated == 4 and checked_plain == 2

    # Metrics are global: identical on both ranks.
    for name in (
        "verigate/gate_rate",
        "verigate/prm_completions_scored",
        "verigate/steps_per_completion",
        "verigate/gated_truncated_fraction",
    ):
        assert rank0["metrics"][name] == rank1["metrics"][name]
    assert rank0["metrics"]["verigate/gated_truncated_fraction"] == [0.0]  # every completion ends with EOS
    assert rank0["metrics"]["verigate/prm_completions_scored"] == [4.0]
    assert rank0["metrics"]["verigate/gate_rate"] == [pytest.approx(2 / 3)]


@pytest.mark.slow
def test_prm_has_real_weights_on_every_rank_under_fsdp_cpu_ram_efficient_loading(tiny_models, tmp_path):
    rank0, rank1 = run_two_processes(
        FSDP_SCRIPT,
        [tiny_models["prm_qwen_math"]],
        tmp_path,
        ACCELERATE_USE_FSDP="true",
        FSDP_CPU_RAM_EFFICIENT_LOADING="true",
    )
    assert (rank0["rank"], rank1["rank"]) == (0, 1)
    # The variable stays set for everything else the process loads (the policy is meant to be broadcast by FSDP).
    assert rank1["efficient_loading_env"] == "true"
    # Zero weights make every logit 0 and every step score softmax([0, 0])[1] = 0.5.
    assert rank1["prm_abs_sum"] > 0
    assert all(score != 0.5 for row in rank1["scores"] for score in row)
    assert rank1["prm_abs_sum"] == rank0["prm_abs_sum"]
    assert rank1["scores"] == rank0["scores"]
