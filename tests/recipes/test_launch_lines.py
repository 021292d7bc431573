"""Every documented `accelerate launch` line passes `--quiet`: without it, accelerate wraps a recipe's one-line error
(exit status 2) in its own CalledProcessError traceback."""

import re

from tests.launch import REPO_ROOT

DOCUMENTED = [
    REPO_ROOT / "README.md",
    *sorted((REPO_ROOT / "docs").rglob("*.md")),
    *sorted((REPO_ROOT / "recipes").glob("*.py")),
    *sorted((REPO_ROOT / "recipes").glob("*.yaml")),
]
# A command line, not prose about the command: `accelerate launch` followed by a flag or a script.
LAUNCH = re.compile(r"accelerate launch (--|\S+\.py)")


def test_every_documented_accelerate_launch_line_is_quiet():
    lines = [
        f"{path.relative_to(REPO_ROOT)}:{number}"
        for path in DOCUMENTED
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if LAUNCH.search(line) and "accelerate launch --quiet" not in line
    ]
    assert len(DOCUMENTED) > 10 and lines == []
