"""The trainers refuse a dataset without a `prompt` column at construction, before any model loads: the model here
is a hub id that does not exist, so reaching the load would fail otherwise."""

import sys

import pytest
from datasets import Dataset

from tests.launch import REPO_ROOT
from trl_verigate import (
    CoqProcessConfig,
    CoqProcessGRPOTrainer,
    ESConfig,
    ESTrainer,
    LeanProcessConfig,
    LeanProcessGRPOTrainer,
    VeriGateConfig,
    VeriGateGRPOTrainer,
)

NO_MODEL = "nobody/no-such-model"
CPU = {"report_to": "none", "use_cpu": True, "bf16": False}
ROWS = Dataset.from_list([{"question": "1 + 1?", "answer": "2"}])


def reward(completions, **kwargs):
    return [0.0] * len(completions)


def build(trainer_name, tmp_path, **datasets):
    if trainer_name == "verigate":
        args = VeriGateConfig(str(tmp_path), gate="none", **CPU)
        return VeriGateGRPOTrainer(NO_MODEL, [reward], args, **datasets)
    if trainer_name == "lean_process":
        args = LeanProcessConfig(str(tmp_path), lean_server_urls=["http://127.0.0.1:9"], **CPU)
        return LeanProcessGRPOTrainer(NO_MODEL, args=args, process_oracle=object(), **datasets)
    return ESTrainer(NO_MODEL, [reward], ESConfig(str(tmp_path), **CPU), **datasets)


@pytest.mark.parametrize("trainer_name", ["verigate", "lean_process", "es"])
@pytest.mark.parametrize("dataset_name", ["train_dataset", "eval_dataset"])
def test_a_dataset_without_prompt_is_refused_naming_the_column(trainer_name, dataset_name, tmp_path):
    datasets = {"train_dataset": Dataset.from_list([{"prompt": "1 + 1?"}]), dataset_name: ROWS}
    with pytest.raises(ValueError, match=rf"^{dataset_name} has no `prompt` column \(its columns are \['answer', "):
        build(trainer_name, tmp_path, **datasets)


@pytest.mark.parametrize("prover", ["lean", "coq"])
def test_a_verifier_that_cannot_run_a_trivial_proof_is_refused_at_construction(prover, tmp_path):
    # A project folder that does not exist: every proof would be `error`, and training would go on without reward.
    missing = str(tmp_path / "no-such-project")
    if prover == "lean":
        from trl_verigate.lean_server import LeanServer, LeanServerConfig

        repl = [sys.executable, str(REPO_ROOT / "tests" / "fake_repl.py"), "--no-transcripts"]
        verifier = LeanServer(LeanServerConfig(repl_command=repl, project_dir=missing, workers=1, sandbox="none"))
        trainer_class, args = LeanProcessGRPOTrainer, LeanProcessConfig(str(tmp_path), **CPU)
    else:
        from trl_verigate.coq import CoqServer, CoqServerConfig

        verifier = CoqServer(CoqServerConfig(project_dir=missing, workers=1, sandbox="none"))
        trainer_class, args = CoqProcessGRPOTrainer, CoqProcessConfig(str(tmp_path), **CPU)
    train_dataset = Dataset.from_list([{"prompt": "p", "formal_statement": "s"}])
    try:
        with pytest.raises(RuntimeError, match=r"lean-doctor|coq-doctor") as error:
            trainer_class(NO_MODEL, args=args, train_dataset=train_dataset, verifier=verifier)
        assert "the verifier cannot run a trivial proof (error: " in str(error.value)
    finally:
        verifier.close()
