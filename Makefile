# Every target works on a fresh machine: `make test` and `make demo` install first when needed.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export WANDB_MODE := offline
export TOKENIZERS_PARALLELISM := false
TINY_DIR ?= .tiny

.PHONY: install test test-fast test-lean warm-starts demo demo-lean demo-lean-audit demo-es demo-coq experiment bench bench-peers gpu-check lint docs tiny clean

$(STAMP): setup.cfg pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# torch first: the build pip's configuration provides when it is a CPU one (offline from a local wheel directory),
	# the CUDA build where an NVIDIA driver is, else PyTorch's CPU index; scripts/torch_pip_args.py says which and why.
	$(PIP) install -q $$($(PY) scripts/torch_pip_args.py)
	$(PIP) install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

$(TINY_DIR)/.built: $(STAMP) trl_verigate/tiny.py
	$(PY) -m trl_verigate.tiny $(TINY_DIR)
	touch $@

tiny: $(TINY_DIR)/.built

# Two pytest-xdist workers, each taking whole test files: much of the suite waits on processes (Coq, the stand-in
# REPL, servers, launchers), so two overlap well even on 2 cores. TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= 2
test: $(STAMP)
	$(PY) -m pytest -q -ra -n $(TEST_WORKERS) --dist loadfile tests

test-fast: $(STAMP)
	$(PY) -m pytest -q -ra -m "not slow" tests

# Needs a real Lean REPL: TRL_VERIGATE_LEAN_REPL=/path/to/repl TRL_VERIGATE_LEAN_PROJECT=/path/to/project make test-lean
# Add TRL_VERIGATE_RECHECK_COMMAND='trl-verigate lean-recheck --backend replay --project-dir /path/to/project' for the recheck tests.
test-lean: $(STAMP)
	$(PY) -m pytest -q -ra tests/lean_server/service/test_real_lean.py tests/trainers/lean_process/test_lean_process_real.py

# Every demo ends with a per-step table, a plot and where the model, metrics and checkpoints went.
# `accelerate launch --quiet`: bad input makes a recipe print one line and exit 2; without --quiet accelerate adds its
# own CalledProcessError traceback, with it accelerate exits 1 and the recipe's line is the last one printed.
LAUNCH := $(VENV)/bin/accelerate launch --quiet --config_file recipes/accelerate/cpu.yaml

# Each demo's policy is the tiny one warm-started by SFT on that demo's prompts, shipped in recipes/tiny/warm/KIND
# with its provenance.json (the random policy alone earns no reward and shows nothing). `make warm-starts` rebuilds
# them with recipes/tiny/warm_start.py.
WARM_KINDS := math coq lean
warm-starts: $(TINY_DIR)/.built
	for kind in $(WARM_KINDS); do $(PY) recipes/tiny/warm_start.py $$kind --base $(TINY_DIR)/policy || exit 1; done

demo: $(STAMP) $(TINY_DIR)/.built
	$(LAUNCH) recipes/verigate_math.py --config recipes/tiny/verigate_math.yaml

# Lean process GRPO on CPU against the stand-in REPL; prints the lean/* metrics of every step.
demo-lean: $(STAMP)
	@echo "demo-lean: against the STAND-IN Lean REPL (tests/fake_repl.py), not Lean: it passes every proof the precheck lets through."
	TRL_EXPERIMENTAL_SILENCE=1 $(LAUNCH) recipes/lean_process_grpo.py --config recipes/tiny/lean_process_grpo.yaml
	@echo "demo-lean: the passes above are the stand-in's (omega passes, sorry is rejected by the precheck); only real Lean (make test-lean) checks proofs."

# demo-lean with the audit sample on: the stand-in checker (tests/fake_checker.py) plays a kernel that refuses the
# stand-in REPL's `omega` passes, a "hack" the REPL accepts; the run shows lean/recheck_overturned and escalation.
AUDIT_CHECKER := $(VENV)/bin/python tests/fake_checker.py --refuse omega
demo-lean-audit: $(STAMP)
	@echo "demo-lean-audit: STAND-IN REPL and STAND-IN checker: the checker overturns every omega pass the REPL gives."
	TRL_EXPERIMENTAL_SILENCE=1 $(LAUNCH) recipes/lean_process_grpo.py --config recipes/tiny/lean_process_grpo.yaml \
		--lean_recheck sample --lean_recheck_sample_rate 0.25 --lean_recheck_command "$(AUDIT_CHECKER)" \
		--output_dir outputs/tiny-lean-process-grpo-audit

demo-es: $(STAMP)
	@echo "demo-es: ES against the STAND-IN Lean REPL (tests/fake_repl.py), not Lean: it passes every proof the precheck lets through."
	$(LAUNCH) recipes/es.py --config recipes/tiny/es.yaml

# Process GRPO on CPU against real Coq (coqidetop + coqchk); prints the coq/* metrics of every step.
demo-coq: $(STAMP)
	TRL_EXPERIMENTAL_SILENCE=1 $(LAUNCH) recipes/coq_process_grpo.py --config recipes/tiny/coq_process_grpo.yaml

# GRPO vs VeriGate vs process-verified GRPO vs ES on toy arithmetic, with the decisions registered in
# docs/experiments.md; writes outputs/experiments/toy_arithmetic/{results.json,results.md,held_out.png,training.png,
# decisions.png}. Resumable: rerun after a kill. EXPERIMENT_ARGS=--quick for the smoke-test preset (under 10 min).
EXPERIMENT_ARGS ?=
experiment: $(STAMP)
	$(PY) -m experiments.toy_arithmetic.launch $(EXPERIMENT_ARGS)

bench: $(STAMP) $(TINY_DIR)/.built
	$(PY) bench/verigate_overhead.py
	$(PY) bench/lean_server_overhead.py
	$(PY) bench/lean_grpo_loop.py
	$(PY) bench/es_overhead.py
	$(PY) bench/token_offsets.py

# lean_server against kimina-lean-server and LeanInteract on the same stand-in REPL; installs the peers (bench-only).
bench-peers: $(STAMP)
	$(PIP) install -q -r bench/requirements-peers.txt
	$(PY) bench/lean_peers.py

# The first thing to run on a new cluster: the GPU paths (trainer steps, PRMs in fp32/bf16, PEFT sync drift, ES cost,
# ES/VeriGate/evaluate on vLLM, ZeRO-3 PRM) on one GPU in at most 10 minutes, a PASS/FAIL/SKIP table (docs/gpu.md).
# Offline and without installing anything: it runs wherever the package imports (this venv if built, else python3),
# on models it builds locally; MODEL=/path/to/model checks a local policy, MODEL=org/name downloads that one.
# Without a GPU it says so and exits 0.
MODEL ?=
GPU_CHECK_PY := $(if $(wildcard $(PY)),$(PY),python3)
gpu-check:
	$(if $(MODEL),HF_HUB_OFFLINE=0 TRANSFORMERS_OFFLINE=0,) $(GPU_CHECK_PY) -m trl_verigate.gpu_check $(if $(MODEL),--model $(MODEL),)

lint: $(STAMP)
	$(VENV)/bin/ruff check trl_verigate tests bench recipes experiments scripts
	$(VENV)/bin/ruff format --check trl_verigate tests bench recipes experiments scripts

# The docs site (mkdocs.yml, docs/) into site/; `make test` checks the same strict build (tests/docs/test_docs_examples.py).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

clean:
	rm -rf $(VENV) $(TINY_DIR) build site *.egg-info
