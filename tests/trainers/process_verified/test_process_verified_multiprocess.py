"""ProcessVerifiedGRPOTrainer over 2 CPU processes (gloo): a group split across processes gets A_proc against its whole
group's mean g and A_out from GRPO over the whole group; checked against a hand computation on the gathered rows."""

import json
import os
import statistics
import subprocess
import sys

import pytest
import torch
from transformers import AutoTokenizer

from tests.launch import TESTS_DIR, free_port

SCRIPT = TESTS_DIR / "scripts" / "lean_process_two_process.py"
G = 2
D1, D2 = -0.05, -0.1
# PROOFS[0] passes with tactics "norm_num", "omega"; PROOFS[1] fails at its tactic 1 of 3.
TACTICS = [["norm_num", "omega"], ["norm_num", "linarith [fail_marker]", "simp"]]
PHI = [[1.0, 1.0], [D1, D2, D2]]
G_OF = [1.0, 0.0]


@pytest.fixture(scope="module")
def rank_records(tiny_models, tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("lean_two_process")
    port = free_port()
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1"]
    command += ["--master_port", str(port), str(SCRIPT), tiny_models["policy"], str(out_dir)]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"2-process run failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return [json.loads((out_dir / f"rank{rank}.json").read_text()) for rank in range(2)]


@pytest.mark.slow
def test_split_group_gets_whole_group_advantages(rank_records, tiny_models):
    tokenizer = AutoTokenizer.from_pretrained(tiny_models["policy"])
    statements = rank_records[0]["statements"] + rank_records[1]["statements"]
    completions = rank_records[0]["completions"] + rank_records[1]["completions"]
    local = len(rank_records[0]["statements"])
    groups = [list(range(start, start + G)) for start in range(0, len(statements), G)]
    assert all(len({statements[row] for row in group}) == 1 for group in groups)
    assert any({row // local for row in group} == {0, 1} for group in groups), "a group must be split"
    for rank, record in enumerate(rank_records):
        advantages = torch.tensor(record["advantages"])
        for local_row in range(local):
            row = rank * local + local_row
            k = row % G  # position in its group: PROOFS[k]
            g = [G_OF[position] for position in range(G)]
            a_out = (G_OF[k] - statistics.mean(g)) / (statistics.stdev(g) + 1e-4)
            completion = completions[row]
            encoding = tokenizer(completion, add_special_tokens=False, return_offsets_mapping=True)
            expected = [0.0] * advantages.shape[1]
            for t in range(len(encoding["input_ids"]) + 1):
                expected[t] = a_out
            position = 0
            for tactic, score in zip(TACTICS[k], PHI[k], strict=True):
                start = completion.index(tactic, position)
                position = start + len(tactic)
                first = next(i for i, (_, end) in enumerate(encoding["offset_mapping"]) if end > start)
                expected[first] += score - statistics.mean(g)
            assert torch.allclose(advantages[local_row], torch.tensor(expected), atol=1e-5), (rank, local_row)
    for record in rank_records:  # metrics are over all processes, so every rank logs the same values
        assert record["metrics"]["lean/pass_rate"] == pytest.approx(0.5)
        assert record["metrics"]["lean/status/failed"] == pytest.approx(0.5)
        assert record["metrics"]["lean/first_error_relative"] == pytest.approx(1 / 3)
