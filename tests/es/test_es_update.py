"""Population seeds, fitness shaping, the ES update against hand computation, and bit-exact perturb/restore."""

import math

import pytest
import torch

from trl_verigate.es import (
    es_noise,
    es_update,
    make_master,
    perturb,
    population_seeds,
    shape_fitness,
    write_master,
)
from trl_verigate.es import update as update_module
from trl_verigate.es.state import history_entry, replay_history


def test_population_seeds_are_deterministic_antithetic_pairs():
    members = population_seeds(42, 3, 6, antithetic=True)
    assert members == population_seeds(42, 3, 6, antithetic=True)
    assert [sign for _, sign in members] == [1, -1, 1, -1, 1, -1]
    assert [members[2 * j][0] for j in range(3)] == [members[2 * j + 1][0] for j in range(3)]
    assert len({seed for seed, _ in members}) == 3
    assert all(0 <= seed < 2**31 for seed, _ in members)
    assert population_seeds(42, 4, 6, True) != members  # another iteration
    assert population_seeds(43, 3, 6, True) != members  # another base seed
    plain = population_seeds(42, 3, 5, antithetic=False)
    assert [sign for _, sign in plain] == [1] * 5 and len({seed for seed, _ in plain}) == 5


def test_odd_population_with_antithetic_is_refused():
    with pytest.raises(ValueError, match="odd.*antithetic"):
        population_seeds(0, 0, 5, antithetic=True)


def test_zscore_fitness_uses_the_population_std():
    # r = [1, 2, 3, 6]: mean 3, population variance (4 + 1 + 0 + 9) / 4 = 3.5.
    fitness = shape_fitness([1.0, 2.0, 3.0, 6.0], "zscore")
    std = math.sqrt(3.5)
    assert fitness.tolist() == pytest.approx([-2 / (std + 1e-8), -1 / (std + 1e-8), 0.0, 3 / (std + 1e-8)], abs=1e-12)


def test_centered_rank_fitness_averages_ties():
    # r = [0.5, 0.1, 0.5, 0.9]: ascending ranks 0.1 -> 0, the two 0.5s share (1 + 2)/2 = 1.5, 0.9 -> 3; P - 1 = 3.
    fitness = shape_fitness([0.5, 0.1, 0.5, 0.9], "centered_rank")
    assert fitness.tolist() == pytest.approx([1.5 / 3 - 0.5, -0.5, 1.5 / 3 - 0.5, 0.5])


def test_no_shaping_and_equal_rewards():
    assert shape_fitness([0.25, -1.0], "none").tolist() == [0.25, -1.0]
    assert shape_fitness([0.7, 0.7, 0.7], "zscore").tolist() == [0.0, 0.0, 0.0]
    assert shape_fitness([0.7, 0.7, 0.7], "centered_rank").tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="fitness_shaping must be one of"):
        shape_fitness([1.0], "rank")


def two_tensor_master():
    return {"a.weight": torch.tensor([[0.5, -1.0], [2.0, 0.25]]), "b.bias": torch.tensor([0.1, 0.2, 0.3])}


@pytest.mark.parametrize("mode", ["zscore", "centered_rank", "none"])
@pytest.mark.parametrize("antithetic", [True, False])
def test_update_matches_a_hand_computation_on_two_tensors(mode, antithetic):
    master = two_tensor_master()
    initial = {name: value.double() for name, value in master.items()}
    members = population_seeds(7, 0, 4, antithetic)
    rewards = [0.0, 1.0, 0.25, 0.5]
    fitness = shape_fitness(rewards, mode).tolist()
    alpha, weight_decay = 0.1, 0.5
    norm = es_update(master, members, fitness, alpha, weight_decay)
    squared = 0.0
    for name, theta in initial.items():
        # θ ← θ(1 − α wd); θ ← θ + α/P Σ_i F_i sign_i ε(s_i), in float64 here.
        step = sum(
            f * sign * es_noise(seed, name, theta.shape).double()
            for (seed, sign), f in zip(members, fitness, strict=True)
        )
        step = alpha / len(members) * step
        expected = theta * (1 - alpha * weight_decay) + step
        assert torch.allclose(master[name].double(), expected, rtol=0, atol=1e-6), name
        squared += float(step.square().sum())
    assert norm == pytest.approx(math.sqrt(squared), rel=1e-5)


def test_antithetic_pair_with_equal_rewards_cancels():
    master = two_tensor_master()
    before = {name: value.clone() for name, value in master.items()}
    seed = 99
    # The pair's fitness is equal, so F·(+ε) + F·(−ε) = 0; the other pair moves the weights.
    es_update(master, [(seed, 1), (seed, -1), (5, 1), (5, -1)], [0.3, 0.3, 1.0, -1.0], 1.0)
    for name, theta in master.items():
        expected = before[name].double() + 1.0 / 4 * 2.0 * es_noise(5, name, theta.shape).double()
        assert torch.allclose(theta.double(), expected, atol=1e-6)


def test_all_equal_rewards_change_nothing_bitwise():
    master = two_tensor_master()
    before = {name: value.clone() for name, value in master.items()}
    members = population_seeds(1, 0, 4, True)
    fitness = shape_fitness([0.5] * 4, "zscore")
    assert es_update(master, members, fitness.tolist(), 0.1, weight_decay=0.1) == 0.0
    for name in master:
        assert torch.equal(master[name], before[name])


def test_small_updates_accumulate_in_the_fp32_master_not_in_bf16():
    """An update far below bf16's resolution around 1.0 survives in the master (bf16 alone would round it away)."""
    params = {"w": torch.ones(1000, dtype=torch.bfloat16)}
    master = make_master(params)
    members = [(3, 1), (3, -1)]
    for _ in range(20):
        es_update(master, members, [1.0, -1.0], 1e-4)
        write_master(params, master)
    # Each step moves θ by 1e-4 · ε (bf16 spacing at 1.0 is 2^-7 ≈ 0.0078): fp32 keeps all of it.
    expected = 1.0 + 20 * 1e-4 * es_noise(3, "w", (1000,)).double()
    assert torch.allclose(master["w"].double(), expected, atol=1e-6)
    naive = torch.ones(1000, dtype=torch.bfloat16)
    for _ in range(20):
        naive += (1e-4 * es_noise(3, "w", (1000,))).to(torch.bfloat16)
    assert (naive == 1.0).float().mean() > 0.9  # the defect this design avoids


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_perturb_then_restore_is_bit_exact(dtype):
    generator = torch.Generator().manual_seed(0)
    params = {
        "x.weight": torch.randn(64, 32, generator=generator).to(dtype),
        "y.weight": torch.randn(64, 32, generator=generator).to(dtype),
    }
    original = {name: value.clone() for name, value in params.items()}
    master = make_master(params)
    perturb(params, master, seed=11, sign=-1, sigma=1e-2)
    for name in params:
        assert not torch.equal(params[name], original[name])
        expected = (master[name] - torch.tensor(1e-2) * es_noise(11, name, (64, 32))).to(dtype)
        assert torch.allclose(params[name].float(), expected.float(), atol=1e-6)
    write_master(params, master)
    for name in params:
        assert torch.equal(
            params[name].view(torch.int16 if dtype == torch.bfloat16 else torch.int32),
            original[name].view(torch.int16 if dtype == torch.bfloat16 else torch.int32),
        )
    # The naive restore (subtract the same noise in the model's dtype) is not exact in bf16.
    if dtype == torch.bfloat16:
        naive = {name: value.clone() for name, value in original.items()}
        for name in naive:
            noise = (1e-2 * es_noise(11, name, (64, 32))).to(dtype)
            naive[name] += noise
            naive[name] -= noise
        assert any(not torch.equal(naive[name], original[name]) for name in naive)


def f32(value: float) -> torch.Tensor:
    return torch.tensor(value, dtype=torch.float32)


def test_perturb_and_update_compute_the_documented_float32_ops_bitwise():
    """perturb: round_dtype(θ + f32(σ·sign)·ε); es_update: acc = Σ_s (acc + f32(c_s)·ε(s)), θ += f32(α/P)·acc; each
    a rounded float32 op, here written out with es_noise and plain tensor arithmetic. Parameters of fp32 (written in
    place), bf16 and a non-contiguous fp32 one (both through a float32 tensor)."""
    generator = torch.Generator().manual_seed(1)
    params = {
        "fp32.weight": torch.randn(300, 70, generator=generator),
        "bf16.weight": torch.randn(50, 33, generator=generator).to(torch.bfloat16),
        "strided.weight": torch.randn(40, 60, generator=generator).t(),
    }
    master = make_master(params)
    for sign in (1, -1):
        perturb(params, master, seed=21, sign=sign, sigma=3e-3)
        for name, param in params.items():
            expected = (master[name] + es_noise(21, name, param.shape) * f32(3e-3 * sign)).to(param.dtype)
            assert torch.equal(param, expected), name
    members, fitness = [(4, 1), (4, -1), (9, 1), (9, -1)], [0.7, -0.2, 0.1, 0.4]
    expected = {}
    for name, theta in master.items():
        accumulated = torch.zeros_like(theta)
        for seed, coefficient in ((4, 0.7 + 0.2), (9, 0.1 - 0.4)):
            accumulated = accumulated + es_noise(seed, name, theta.shape) * f32(coefficient)
        expected[name] = theta + accumulated * f32(0.05 / 4)
    es_update(master, members, fitness, 0.05)
    for name in master:
        assert torch.equal(master[name], expected[name]), name


def test_the_master_of_a_strided_parameter_is_a_contiguous_float32_copy():
    """make_master copies every parameter into a contiguous float32 tensor (a transposed one too), which
    add_scaled_noise can write into in row-major order; the copy keeps the values, does not share the parameter's
    storage, and perturb, update and restore reach the strided parameters through it."""
    generator = torch.Generator().manual_seed(2)
    params = {
        "transposed.weight": torch.randn(30, 50, generator=generator).t(),
        "bf16.transposed": torch.randn(20, 40, generator=generator).to(torch.bfloat16).t(),
        "sliced.weight": torch.randn(30, 50, generator=generator)[:, ::2],
    }
    master = make_master(params)
    for name, param in params.items():
        theta = master[name]
        assert theta.dtype == torch.float32 and theta.is_contiguous() and theta.shape == param.shape, name
        assert torch.equal(theta, param.float()) and theta.data_ptr() != param.data_ptr(), name
    perturb(params, master, seed=3, sign=1, sigma=1e-2)
    for name, param in params.items():
        expected = master[name] + es_noise(3, name, param.shape) * torch.tensor(1e-2, dtype=torch.float32)
        assert torch.equal(param, expected.to(param.dtype)), name
    es_update(master, [(3, 1), (3, -1)], [1.0, -1.0], 0.1)
    write_master(params, master)
    for name, param in params.items():
        assert torch.equal(param, master[name].to(param.dtype)), name


def test_replay_of_the_history_equals_the_incremental_master_bitwise():
    master = two_tensor_master()
    history = []
    for iteration in range(5):
        members = population_seeds(0, iteration, 4, True)
        rewards = [float((iteration * 7 + i * 3) % 5) for i in range(4)]
        fitness = shape_fitness(rewards, "zscore").tolist()
        norm = es_update(master, members, fitness, 0.05, 0.01)
        history.append(history_entry(iteration, members, rewards, fitness, 0.05, norm))
    replayed = two_tensor_master()
    replay_history(replayed, history, 0.01)
    for name in master:
        assert torch.equal(master[name], replayed[name])


def test_the_es_export_parser_imports_without_torch():
    """cli.py registers `es-export` from trl_verigate.es.export; `trl-verigate --help` must not pay for torch."""
    import subprocess
    import sys

    code = "import sys, trl_verigate.es.export; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_perturb_restore_and_update_run_on_one_intra_op_thread_and_restore_the_count(monkeypatch):
    """The bookkeeping's ops must not wait at multi-thread barriers (see update._one_intra_op_thread); the caller's
    thread count comes back afterwards, also when an op raises."""
    seen = []

    def recording_add_scaled_noise_each(targets, seed, scale):
        seen.append(torch.get_num_threads())
        for out, addend in targets.values():
            out.copy_(addend)

    class RecordingParameter:
        device = torch.device("cpu")

        def copy_(self, source):
            seen.append(torch.get_num_threads())

    monkeypatch.setattr(update_module, "add_scaled_noise_each", recording_add_scaled_noise_each)
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        master = two_tensor_master()
        params = {name: value.clone() for name, value in master.items()}
        perturb(params, master, seed=1, sign=1, sigma=0.1)
        es_update(master, [(1, 1), (1, -1)], [1.0, -1.0], 0.1)
        write_master({"a.weight": RecordingParameter()}, {"a.weight": master["a.weight"]})
        # perturb and es_update each compute both (small) tensors' noise together: one call each, and one copy.
        assert seen == [1] * 3 and torch.get_num_threads() == 2
        with pytest.raises(ValueError):
            es_update(master, [(1, 1)], [1.0, 2.0], 0.1)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(previous)
