"""Tests that read the real REPL transcripts skip without them, except under CI, where every one of them fails.

The transcript tests run in a subprocess on a copy of tests/ whose ../shared holds no transcripts, as in a fresh
clone, once without CI and once with CI=true.
"""

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from tests.launch import TESTS_DIR
from tests.machine import ci_is_set

MISSING = "Lean REPL transcripts not found"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def users_of_transcripts() -> list[str]:
    return sorted(
        path.relative_to(TESTS_DIR).as_posix()
        for path in TESTS_DIR.rglob("test_*.py")
        if "transcripts_dir" in path.read_text(encoding="utf-8") and path.name != Path(__file__).name
    )


@pytest.fixture(scope="module")
def clone_without_transcripts(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("fresh") / "repo"
    shutil.copytree(TESTS_DIR, root / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(TESTS_DIR.parent / "setup.cfg", root)  # markers and filters, as in the repository
    assert not (root.parent / "shared").exists()
    return root


def run_transcript_tests(root: Path, ci: str | None) -> tuple[int, dict[str, tuple[str, str]]]:
    """pytest's exit status, and {test id: (outcome, message)} for every test that did not pass."""
    env = {key: value for key, value in os.environ.items() if key != "CI"}
    if ci is not None:
        env["CI"] = ci
    report = root / f"report-{ci}.xml"
    files = [f"tests/{name}" for name in users_of_transcripts()]
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", *files]
    finished = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=240)
    not_passed = {}
    for case in ElementTree.parse(report).iter("testcase"):
        for outcome in ("skipped", "error", "failure"):
            for element in case.findall(outcome):
                text = f"{element.get('message', '')} {element.text or ''}"
                not_passed[f"{case.get('classname')}::{case.get('name')}"] = (outcome, text)
    return finished.returncode, not_passed


def test_the_files_that_read_transcripts_are_found():
    # Guards the runs below against comparing nothing.
    expected = {
        "lean_server/precheck/test_tactics.py",
        "lean_server/verdict/test_verdict.py",
        "lean_server/repl/test_protocol.py",
    }
    assert expected <= set(users_of_transcripts())


def test_without_ci_the_transcript_tests_skip_and_with_ci_each_of_them_fails(clone_without_transcripts):
    status, outside_ci = run_transcript_tests(clone_without_transcripts, ci=None)
    assert status == 0, outside_ci
    assert outside_ci and all(outcome == "skipped" and MISSING in text for outcome, text in outside_ci.values())
    # The only check that the splitter's spans equal the REPL's allTactics is among them (not an empty
    # parameter set, which pytest would skip whatever CI says).
    assert any("test_outermost_spans_equal_repl_all_tactics" in test for test in outside_ci), sorted(outside_ci)

    status, in_ci = run_transcript_tests(clone_without_transcripts, ci="true")
    assert status == 1
    assert set(in_ci) == set(outside_ci)
    assert all(outcome == "error" and MISSING in text and "CI is set" in text for outcome, text in in_ci.values())


@pytest.mark.parametrize(
    ("value", "is_set"), [("true", True), ("1", True), ("", False), ("0", False), ("false", False)]
)
def test_ci_counts_as_set_unless_it_says_no(monkeypatch, value, is_set):
    monkeypatch.setenv("CI", value)
    assert ci_is_set() is is_set
    monkeypatch.delenv("CI")
    assert ci_is_set() is False
