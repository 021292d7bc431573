"""ES on two gloo processes: members split across ranks, only rewards gathered, and after the run the weights are
bitwise equal on both ranks and equal to a one-process run with the same seeds and rewards."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.launch import TESTS_DIR, free_port

SCRIPT = TESTS_DIR / "scripts" / "es_two_process.py"


def run(command, out_dir: Path, **extra_env):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_DATASETS_CACHE": str(out_dir / "datasets_cache"), **extra_env}
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{command} failed:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"


@pytest.fixture(scope="module")
def runs(tiny_models, tmp_path_factory):
    two = tmp_path_factory.mktemp("es_two_processes")
    one = tmp_path_factory.mktemp("es_one_process")
    port = free_port()
    launcher = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    launcher += ["--master_addr", "127.0.0.1", "--master_port", str(port)]
    run([*launcher, str(SCRIPT), tiny_models["policy"], str(two)], two)
    run([sys.executable, str(SCRIPT), tiny_models["policy"], str(one)], one)
    return two, one


def load(out_dir: Path, rank: int):
    return load_file(str(out_dir / f"rank{rank}.safetensors")), json.loads((out_dir / f"rank{rank}.json").read_text())


@pytest.mark.slow
def test_two_ranks_split_the_members_and_end_bitwise_equal_to_one_process(runs):
    two, one = runs
    weights0, record0 = load(two, 0)
    weights1, record1 = load(two, 1)
    reference, reference_record = load(one, 0)
    assert (record0["num_processes"], record1["num_processes"], reference_record["num_processes"]) == (2, 2, 1)
    # 4 members over 2 ranks: each rank generates for 2 members per iteration, the lone process for all 4.
    assert len(record0["generated_prompts"]) == len(record1["generated_prompts"]) == 2 * 2
    assert len(reference_record["generated_prompts"]) == 4 * 2
    # Every member of an iteration answers the same prompts, on every rank.
    assert (
        record0["generated_prompts"][:2]
        == record1["generated_prompts"][:2]
        == reference_record["generated_prompts"][:4:2]
    )
    assert record0["history"] == record1["history"] == reference_record["history"]
    assert any(entry["update_norm"] > 0 for entry in record0["history"]), "the run must have moved the weights"
    for name, value in reference.items():
        assert torch.equal(weights0[name], weights1[name]), name
        assert torch.equal(weights0[name], value), name


@pytest.mark.slow
def test_a_population_that_does_not_divide_evenly_pads_the_last_rank(tiny_models, tmp_path):
    """P = 3 on 2 ranks: rank 0 evaluates members 0 and 1, rank 1 member 2 plus a discarded padding generation."""
    two, one = tmp_path / "two", tmp_path / "one"
    two.mkdir(), one.mkdir()
    population = {"ES_POPULATION": "3", "ES_ANTITHETIC": "false"}
    launcher = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    launcher += ["--master_addr", "127.0.0.1", "--master_port", str(free_port())]
    run([*launcher, str(SCRIPT), tiny_models["policy"], str(two)], two, **population)
    run([sys.executable, str(SCRIPT), tiny_models["policy"], str(one)], one, **population)
    weights0, record0 = load(two, 0)
    weights1, record1 = load(two, 1)
    reference, reference_record = load(one, 0)
    assert len(record0["generated_prompts"]) == len(record1["generated_prompts"]) == 2 * 2
    assert len(reference_record["generated_prompts"]) == 3 * 2
    assert [len(entry["rewards"]) for entry in record0["history"]] == [3, 3]
    assert record0["history"] == record1["history"] == reference_record["history"]
    for name, value in reference.items():
        assert torch.equal(weights0[name], weights1[name]), name
        assert torch.equal(weights0[name], value), name


@pytest.mark.slow
def test_a_vllm_tensor_parallel_group_evaluates_one_member_at_a_time(tiny_models, tmp_path):
    """vllm_tensor_parallel_size 2 on 2 processes: the engine is made of both processes' shards, so both must hold the
    same member when it generates; each process generates half of every member's completions."""
    launcher = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    launcher += ["--master_addr", "127.0.0.1", "--master_port", str(free_port())]
    script = TESTS_DIR / "scripts" / "es_vllm_tensor_parallel.py"
    run([*launcher, str(script), tiny_models["policy"], str(tmp_path)], tmp_path)
    records = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in range(2)]
    for record in records:
        assert record["held"] == [0, 1, 2, 3], "the engine generated with a mix of members' shards"
        assert record["completions_per_generation"] == [2] * 4  # 2 prompts x 2 generations, half on each process
    assert records[0]["history"] == records[1]["history"]
    assert len(records[0]["history"][0]["rewards"]) == 4
