"""Lean source trees (a git dir at a commit, or a plain directory) and a lexer for their text: comments blanked,
string literals kept or masked, and tokens. Used by scripts/generate_lean_allowlists.py."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Source:
    name: str
    path: str
    is_git: bool
    commit: str = ""

    def texts(self, keep=lambda rel: True):
        """(path, text) of every kept .lean file; one `git cat-file --batch` for a git source."""
        if not self.is_git:
            root = Path(self.path)
            for path in sorted(root.rglob("*.lean")):
                if keep(rel := str(path.relative_to(root))):
                    yield rel, path.read_text(encoding="utf-8", errors="replace")
            return
        rows = [line.split("\t", 1) for line in git(self.path, "ls-tree", "-r", self.commit).splitlines()]
        wanted_rows = [(meta.split()[2], rel) for meta, rel in rows if rel.endswith(".lean") and keep(rel)]
        proc = subprocess.run(
            ["git", f"--git-dir={self.path}", "cat-file", "--batch"],
            check=True,
            input="".join(f"{oid}\n" for oid, _ in wanted_rows).encode(),
            capture_output=True,
        )
        data, pos = proc.stdout, 0
        for _, rel in wanted_rows:
            nl = data.index(b"\n", pos)
            size = int(data[pos:nl].split()[2])
            yield rel, data[nl + 1 : nl + 1 + size].decode("utf-8", errors="replace")
            pos = nl + 1 + size + 1


def git(gitdir: str, *args: str) -> str:
    command = ["git", f"--git-dir={gitdir}", *args]
    return subprocess.run(command, check=True, capture_output=True, text=True, errors="replace").stdout


def open_source(spec: str, default_name: str = "") -> Source:
    name, _, rest = spec.partition("=") if "=" in spec.split("@")[0] else (default_name, "", spec)
    path, _, rev = rest.partition("@")
    path = os.path.abspath(os.path.expanduser(path))
    bare = os.path.isfile(os.path.join(path, "HEAD")) and os.path.isdir(os.path.join(path, "objects"))
    gitdir = path if bare else os.path.join(path, ".git") if os.path.isdir(os.path.join(path, ".git")) else None
    if gitdir:
        commit = git(gitdir, "rev-parse", f"{rev or 'HEAD'}^{{commit}}").strip()
        return Source(name or Path(path).name, gitdir, True, commit)
    if rev:
        raise SystemExit(f"{spec}: a revision needs a git dir")
    return Source(name or Path(path).name, path, False)


def lex(text: str) -> tuple[str, str]:
    """(text with comments blanked, the same with string/char literal contents blanked too); newlines are kept."""
    out: list[str] = []
    masked: list[str] = []

    def blank(s: str) -> str:
        return "".join(ch if ch == "\n" else " " for ch in s)

    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith(("--", "/-"), i):
            j = comment_end(text, i)
            out.append(blank(text[i:j]))
            masked.append(blank(text[i:j]))
            i = j
            continue
        lit_end = None
        if c == "r" and re.match(r'r#*"', text[i : i + 8]) and (i == 0 or not is_ident_char(text[i - 1])):
            m = re.match(r'r(#*)"', text[i:])
            hashes = m.group(1)
            end = text.find('"' + hashes, i + len(m.group(0)))
            lit_end = n if end < 0 else end + 1 + len(hashes)
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            lit_end = min(j + 1, n)
        elif c == "'" and (i == 0 or not is_ident_char(text[i - 1])):
            m = re.match(r"'(\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|.)|[^\\'\n])'", text[i:])
            if m:
                lit_end = i + len(m.group(0))
        if lit_end is not None:
            out.append(text[i:lit_end])
            masked.append(text[i] + blank(text[i + 1 : lit_end - 1]) + text[lit_end - 1])
            i = lit_end
            continue
        out.append(c)
        masked.append(c)
        i += 1
    return "".join(out), "".join(masked)


def comment_end(text: str, i: int) -> int:
    """Where the line comment or (nested) block comment starting at `i` ends."""
    if text.startswith("--", i):
        j = text.find("\n", i)
        return len(text) if j < 0 else j
    depth, j = 1, i + 2
    while j < len(text) and depth:
        step = 1 if text.startswith("/-", j) else -1 if text.startswith("-/", j) else 0
        depth, j = depth + step, j + (2 if step else 1)
    return j


def is_ident_char(ch: str) -> bool:
    return ch.isalnum() or ch in "_'!?.»"


TOKEN = re.compile(
    r"""
    (?P<str>"(?:\\.|[^"\\])*")
  | (?P<nb>&"(?:\\.|[^"\\])*")
  | (?P<op>:=|=>|<=|<\|>|[()\[\]{},:|$%`@])
  | (?P<id>[^\W\d][\w'!?.]*|«[^»]*»)
  | (?P<num>\d+)
  | (?P<other>\S)
""",
    re.VERBOSE | re.UNICODE,
)


def tokenize(s: str) -> list[tuple[str, str]]:
    return [(m.lastgroup, m.group(m.lastgroup)) for m in TOKEN.finditer(s)]


def lit(tok: str) -> str:
    body = tok[1:-1] if tok.startswith('"') else tok[2:-1]
    return body.encode("utf-8").decode("unicode_escape").encode("latin-1").decode("utf-8") if "\\" in body else body
