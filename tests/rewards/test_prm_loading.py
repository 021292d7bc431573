"""How the model PRMs load: refusing all-zero weights (FSDP CPU-RAM-efficient loading on ranks other than 0) and
the dtype they load in."""

import pytest
import torch
import torch.distributed as dist
from transformers import AutoModelForCausalLM, AutoModelForTokenClassification, AutoTokenizer

from trl_verigate.rewards.prm import MathShepherdPRM, Qwen2ForProcessRewardModel, QwenMathPRM, TokenClassificationPRM

BACKENDS = {
    "prm_qwen_math": (QwenMathPRM, Qwen2ForProcessRewardModel),
    "prm_math_shepherd": (MathShepherdPRM, AutoModelForCausalLM),
    "prm_token_classification": (TokenClassificationPRM, AutoModelForTokenClassification),
}


@pytest.mark.parametrize("key", sorted(BACKENDS))
def test_a_checkpoint_of_zeros_is_refused(tiny_models, tmp_path, key):
    scorer_class, model_class = BACKENDS[key]
    model = model_class.from_pretrained(tiny_models[key])
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.zero_()
    model.save_pretrained(tmp_path)
    AutoTokenizer.from_pretrained(tiny_models[key]).save_pretrained(tmp_path)
    with pytest.raises(ValueError) as raised:
        scorer_class(str(tmp_path), device="cpu")
    message = str(raised.value)
    assert "every parameter equal to zero" in message and str(tmp_path) in message
    assert "weight files hold only zeros" in message


@pytest.fixture
def fsdp_cpu_ram_efficient_loading_on_local_rank(monkeypatch, tmp_path):
    """One gloo process that transformers takes for local rank `LOCAL_RANK` of an FSDP job with CPU-RAM-efficient
    loading, the environment `accelerate launch` sets up for `fsdp_cpu_ram_efficient_loading: true`."""
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    monkeypatch.setenv("FSDP_CPU_RAM_EFFICIENT_LOADING", "true")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        yield lambda local_rank: monkeypatch.setenv("LOCAL_RANK", str(local_rank))
    finally:
        dist.destroy_process_group()


def test_fsdp_cpu_ram_efficient_loading_zeros_are_refused_on_other_ranks(
    tiny_models, fsdp_cpu_ram_efficient_loading_on_local_rank
):
    path = tiny_models["prm_qwen_math"]
    set_local_rank = fsdp_cpu_ram_efficient_loading_on_local_rank
    set_local_rank(1)
    # The reproduction itself: transformers hands local rank 1 a model of zeros.
    zeros = Qwen2ForProcessRewardModel.from_pretrained(path)
    assert sum(parameter.abs().sum().item() for parameter in zeros.parameters()) == 0
    with pytest.raises(ValueError) as raised:
        QwenMathPRM(path, device="cpu")
    message = str(raised.value)
    assert "every parameter equal to zero" in message and "would score 0.5" in message
    assert "fsdp_cpu_ram_efficient_loading: false" in message and "FSDP_CPU_RAM_EFFICIENT_LOADING=false" in message

    # Local rank 0 gets the checkpoint's weights and loads.
    set_local_rank(0)
    scorer = QwenMathPRM(path, device="cpu")
    assert sum(parameter.abs().sum().item() for parameter in scorer.model.parameters()) > 0


@pytest.fixture(scope="module")
def bf16_qwen_prm(tiny_models, tmp_path_factory):
    """The tiny Qwen PRM saved in bfloat16, so its config.json records dtype bfloat16 like the released 7B PRM."""
    target = tmp_path_factory.mktemp("bf16_prm")
    Qwen2ForProcessRewardModel.from_pretrained(tiny_models["prm_qwen_math"]).to(torch.bfloat16).save_pretrained(target)
    AutoTokenizer.from_pretrained(tiny_models["prm_qwen_math"]).save_pretrained(target)
    return str(target)


@pytest.mark.parametrize(("torch_dtype", "expected"), [(None, torch.bfloat16), ("auto", torch.bfloat16)])
def test_an_unset_dtype_loads_the_checkpoints_own_dtype(bf16_qwen_prm, torch_dtype, expected):
    scorer = QwenMathPRM(bf16_qwen_prm, device="cpu", torch_dtype=torch_dtype)
    assert {parameter.dtype for parameter in scorer.model.parameters()} == {expected}


def test_an_explicit_dtype_overrides_the_checkpoints(bf16_qwen_prm):
    scorer = QwenMathPRM(bf16_qwen_prm, device="cpu", torch_dtype="float32")
    assert {parameter.dtype for parameter in scorer.model.parameters()} == {torch.float32}
