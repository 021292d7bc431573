"""Ctrl-C (or SIGTERM) during a recipe is one line and exit status 130 (143): the step reached, the last complete checkpoint and the
flag that resumes from it; or, before training begins, that loading was interrupted. Each test runs a real process
and sends it SIGINT once it says it is ready."""

import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.launch import REPO_ROOT, load_recipe, offline_env, write_tiny_recipe_config

# A recipe whose `prepare` or `train` stands in for loading or training: it reports progress as a trainer would
# (TRAINING_PROGRESS is what `train_and_save` adds to the trainer), prints READY and waits for the signal. It waits
# in short sleeps, as a training loop keeps running Python: a signal the kernel hands to another thread (torch's)
# reaches the main thread's handler only when that thread next runs Python, not during one long sleep.
SCRIPT = textwrap.dedent("""\
    import sys, time
    from pathlib import Path
    from types import SimpleNamespace
    sys.path.insert(0, "recipes")
    import recipe_tools

    stage, output_dir = sys.argv[1], Path(sys.argv[2])

    def wait_for_the_signal():
        for _ in range(600):
            time.sleep(0.1)

    def prepare():
        if stage == "loading":
            print("READY", flush=True)
            wait_for_the_signal()

    def train(prepared):
        progress = recipe_tools.TRAINING_PROGRESS
        progress.on_train_begin(SimpleNamespace(output_dir=str(output_dir)), SimpleNamespace(global_step=0), None)
        (output_dir / "checkpoint-2").mkdir(parents=True)
        (output_dir / "checkpoint-2" / "trainer_state.json").write_text("{}")
        (output_dir / "checkpoint-10").mkdir()  # cut off while saving: no trainer_state.json
        for step in range(1, 12):
            progress.on_step_end(None, SimpleNamespace(global_step=step), None)
        print("READY", flush=True)
        wait_for_the_signal()

    recipe_tools.run_recipe(lambda argv: (), prepare, train, argv=[])
""")


def interrupt_when_ready(
    command, *, signum=signal.SIGINT, as_a_terminal: bool = False, **kwargs
) -> subprocess.CompletedProcess:
    """Start ``command``, wait for READY, send ``signum``. ``as_a_terminal``: to the whole process group, as Ctrl-C
    in a terminal does (a launcher and its child both receive it)."""
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=as_a_terminal, **kwargs
    )
    for line in process.stdout:
        if "READY" in line:
            break
    if as_a_terminal:
        os.killpg(process.pid, signum)
    else:
        process.send_signal(signum)
    stdout, stderr = process.communicate(timeout=120)
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def test_an_interrupt_during_training_names_the_step_and_the_last_complete_checkpoint(tmp_path):
    result = interrupt_when_ready([sys.executable, "-c", SCRIPT, "training", str(tmp_path)], cwd=REPO_ROOT)
    checkpoint = tmp_path / "checkpoint-2"
    expected = (
        f"interrupted at step 11; last complete checkpoint: {checkpoint}; resume with "
        f"`--resume_from_checkpoint {checkpoint}`\n"
    )
    assert (result.returncode, result.stderr) == (130, expected)


def test_ctrl_c_under_accelerate_launch_prints_the_same_line_last_and_no_traceback(tmp_path):
    """accelerate's launcher answers Ctrl-C by sending its child SIGTERM at once: the recipe treats it as the same
    interrupt, so the line still comes out, after accelerate's own output, and no traceback. The launcher's own
    status is accelerate's: 130 when its KeyboardInterrupt is handled first, 1 (`--quiet`, a failed child) when the
    child's exit reaches it first; both happen on a loaded machine."""
    script = tmp_path / "recipe.py"
    script.write_text(SCRIPT)
    accelerate = [sys.executable, "-m", "accelerate.commands.launch", "--quiet"]
    command = [*accelerate, "--config_file", "recipes/accelerate/cpu.yaml", str(script), "training", str(tmp_path)]
    result = interrupt_when_ready(command, as_a_terminal=True, cwd=REPO_ROOT)
    checkpoint = tmp_path / "checkpoint-2"
    assert result.returncode in (130, 1), result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.stderr.strip().splitlines()[-1] == (
        f"interrupted at step 11; last complete checkpoint: {checkpoint}; resume with "
        f"`--resume_from_checkpoint {checkpoint}`"
    )


def start_under_accelerate_env(tmp_path) -> subprocess.Popen:
    """The SCRIPT in training, with the variable accelerate's launcher sets; returns once it is READY."""
    process = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, "training", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
        env={**os.environ, "ACCELERATE_USE_CPU": "True"},
    )
    for line in process.stdout:
        if "READY" in line:
            break
    return process


def test_under_accelerate_a_ctrl_c_prints_nothing_until_the_launchers_sigterm(tmp_path):
    """The launcher drops a chunk of the child's stderr it has read when its own KeyboardInterrupt lands; it sends
    SIGTERM only once a thread copies everything, so the line waits for that SIGTERM. The exit status is the Ctrl-C's."""
    process = start_under_accelerate_env(tmp_path)
    process.send_signal(signal.SIGINT)
    written_before_sigterm, _, _ = select.select([process.stderr], [], [], 1.0)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert written_before_sigterm == []
    assert process.returncode == 130 and stderr.startswith("interrupted at step 11; "), stderr[-3000:]


def test_under_accelerate_a_ctrl_c_without_sigterm_ends_the_run_after_the_grace(tmp_path):
    process = start_under_accelerate_env(tmp_path)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130 and stderr.startswith("interrupted at step 11; "), stderr[-3000:]


def test_sigterm_is_the_same_interrupt_with_its_own_exit_status(tmp_path):
    """A scheduler's SIGTERM (or accelerate's, after Ctrl-C) prints the same line; the status is 128 + 15."""
    command = [sys.executable, "-c", SCRIPT, "training", str(tmp_path)]
    result = interrupt_when_ready(command, signum=signal.SIGTERM, cwd=REPO_ROOT)
    assert result.returncode == 143 and result.stderr.startswith("interrupted at step 11; "), result.stderr[-3000:]


def test_an_interrupt_while_loading_says_so(tmp_path):
    result = interrupt_when_ready([sys.executable, "-c", SCRIPT, "loading", str(tmp_path)], cwd=REPO_ROOT)
    assert (result.returncode, result.stderr) == (130, "interrupted while loading; nothing was trained\n")


@pytest.mark.slow
def test_an_interrupted_es_recipe_resumes_from_the_checkpoint_it_names(tiny_models, tmp_path):
    config = write_tiny_recipe_config(tiny_models, tmp_path, "es", max_steps=200, save_steps=1)
    output = tmp_path / "output"
    env = offline_env(tmp_path)
    command = [sys.executable, "-u", "recipes/es.py", "--config", str(config)]
    process = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 600
    while not (output / "checkpoint-2" / "trainer_state.json").is_file():
        assert process.poll() is None and time.monotonic() < deadline, process.stderr.read().decode()[-3000:]
        time.sleep(0.5)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=300)
    last = stderr.decode().strip().splitlines()[-1]
    assert last.startswith("interrupted at step "), stderr.decode()[-3000:]
    assert process.returncode == 130, stderr.decode()[-3000:]
    assert "Traceback" not in stderr.decode()
    assert last.startswith("interrupted at step ") and "; resume with `--resume_from_checkpoint " in last
    named = last.split("`--resume_from_checkpoint ")[1].rstrip("`")
    assert Path(named).parent.resolve() == output.resolve() and (Path(named) / "trainer_state.json").is_file()
    assert int(named.rsplit("-", 1)[1]) >= 2


def test_the_entry_point_gives_back_the_signal_handlers_it_replaced():
    """`run_recipe` may be one call in a longer process: afterwards SIGINT and SIGTERM do what they did before."""
    recipe_tools = load_recipe("recipe_tools")
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    with pytest.raises(SystemExit):
        recipe_tools.run_recipe(lambda argv: (), lambda: None, lambda prepared: sys.exit(0), argv=[])
    assert {signum: signal.getsignal(signum) for signum in before} == before
