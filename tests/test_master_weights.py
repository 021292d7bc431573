"""No pure-bf16 AdamW without DeepSpeed or FSDP, whatever sets the dtype (issue 28 point 2).

`load_dtype`'s prediction is checked against the dtype transformers actually loads for each way of setting it, the
recipe check against each of those ways, and the trainers' own check against a model passed as an object."""

import json
import shutil
from types import SimpleNamespace

import pytest
import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM
from trl import ModelConfig

from tests.launch import load_recipe
from trl_verigate import VeriGateConfig, VeriGateGRPOTrainer
from trl_verigate.master_weights import load_dtype

recipe_tools = load_recipe("recipe_tools")


@pytest.fixture(autouse=True)
def no_launcher(monkeypatch):
    for variable in ("ACCELERATE_USE_DEEPSPEED", "ACCELERATE_USE_FSDP"):
        monkeypatch.delenv(variable, raising=False)


@pytest.fixture(scope="module")
def checkpoints(tiny_models, tmp_path_factory):
    """The tiny policy saved in bf16 (config.json says so) and a copy whose config.json records no dtype."""
    folder = tmp_path_factory.mktemp("checkpoints")
    bf16 = folder / "bf16"
    AutoModelForCausalLM.from_pretrained(tiny_models["policy"], dtype=torch.bfloat16).save_pretrained(bf16)
    undeclared = folder / "undeclared"
    shutil.copytree(bf16, undeclared)
    config = json.loads((undeclared / "config.json").read_text())
    config.pop("dtype", None), config.pop("torch_dtype", None)
    (undeclared / "config.json").write_text(json.dumps(config))
    return {"fp32": tiny_models["policy"], "bf16": str(bf16), "undeclared": str(undeclared)}


KWARGS = [
    {},
    {"dtype": "bfloat16"},
    {"torch_dtype": "bfloat16"},
    {"dtype": None, "torch_dtype": "bfloat16"},
    {"dtype": "float32", "torch_dtype": "bfloat16"},
    {"dtype": "auto"},
    {"torch_dtype": "auto"},
    {"dtype": torch.bfloat16},
]


@pytest.mark.parametrize("name", ["fp32", "bf16", "undeclared"])
@pytest.mark.parametrize("kwargs", KWARGS, ids=str)
def test_load_dtype_predicts_what_from_pretrained_loads(checkpoints, name, kwargs):
    loaded = AutoModelForCausalLM.from_pretrained(checkpoints[name], **kwargs).dtype
    predicted, setting = load_dtype(checkpoints[name], kwargs)
    assert predicted == str(loaded).removeprefix("torch."), setting


def test_the_recipe_check_refuses_every_field_that_loads_bf16(checkpoints):
    training = SimpleNamespace(deepspeed=None, fsdp=[], learning_rate=1e-6, model_init_kwargs=None)
    fp32_flag = ModelConfig(model_name_or_path=checkpoints["fp32"], dtype="float32")
    recipe_tools.check_policy_dtype(training, fp32_flag)
    # The bypass of issue 28: --dtype float32 checked, model_init_kwargs.dtype loaded.
    training.model_init_kwargs = {"dtype": "bfloat16"}
    with pytest.raises(ValueError, match=r"^model_init_kwargs.dtype=bfloat16 without DeepSpeed or FSDP trains"):
        recipe_tools.check_policy_dtype(training, fp32_flag)
    # auto in model_init_kwargs, on a checkpoint stored in bf16 with or without a dtype in its config.json.
    for name in ("bf16", "undeclared"):
        training.model_init_kwargs = {"dtype": "auto"}
        with pytest.raises(ValueError, match=r"^model_init_kwargs.dtype=auto \(the checkpoint's dtype\) without"):
            recipe_tools.check_policy_dtype(training, ModelConfig(model_name_or_path=checkpoints[name]))
    # --dtype auto or unset on a bf16 checkpoint.
    training.model_init_kwargs = None
    with pytest.raises(ValueError, match=r"^dtype=auto without DeepSpeed or FSDP trains bfloat16"):
        recipe_tools.check_policy_dtype(training, ModelConfig(model_name_or_path=checkpoints["bf16"], dtype="auto"))
    # torch_dtype alone does not decide when --dtype is set (transformers takes dtype first) ...
    training.model_init_kwargs = {"torch_dtype": "bfloat16"}
    recipe_tools.check_policy_dtype(training, fp32_flag)
    # ... and does when dtype is None.
    with pytest.raises(ValueError, match=r"^model_init_kwargs.torch_dtype=bfloat16 without"):
        recipe_tools.check_policy_dtype(training, ModelConfig(model_name_or_path=checkpoints["fp32"], dtype=None))
    # What keeps an fp32 master passes.
    training.model_init_kwargs = {"dtype": "bfloat16"}
    recipe_tools.check_policy_dtype(
        SimpleNamespace(**{**vars(training), "deepspeed": {"zero_optimization": {}}}), fp32_flag
    )
    recipe_tools.check_policy_dtype(SimpleNamespace(**{**vars(training), "fsdp": ["full_shard"]}), fp32_flag)


def verigate(model, tmp_path, **kwargs):
    args = VeriGateConfig(
        output_dir=str(tmp_path / "out"), use_cpu=True, gate="none", per_device_train_batch_size=2, num_generations=2,
        max_completion_length=4, report_to="none", save_strategy="no",
    )  # fmt: skip
    dataset = Dataset.from_list([{"prompt": "1 + 1 ="}] * 2)
    return VeriGateGRPOTrainer(model=model, reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
                               args=args, train_dataset=dataset, **kwargs)  # fmt: skip


def test_the_trainer_refuses_bf16_weights_it_would_step_whatever_loaded_them(checkpoints, tmp_path):
    from peft import LoraConfig

    # A model passed as an object: no setting to read, the parameters tell.
    model = AutoModelForCausalLM.from_pretrained(checkpoints["fp32"], dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"^the policy trains bfloat16 parameters \(e.g. model\.embed_tokens\.weight"):
        verigate(model, tmp_path)
    # PEFT trains fp32 adapters over the bf16 base: nothing to refuse.
    lora = LoraConfig(r=4, target_modules=["q_proj"], task_type="CAUSAL_LM")
    trainer = verigate(AutoModelForCausalLM.from_pretrained(checkpoints["fp32"], dtype=torch.bfloat16), tmp_path,
                       peft_config=lora)  # fmt: skip
    assert {p.dtype for p in trainer.model.parameters() if p.requires_grad} == {torch.float32}
    verigate(checkpoints["fp32"], tmp_path)
