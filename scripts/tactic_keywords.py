#!/usr/bin/env python3
"""List the leading atoms of every Lean 4 `tactic` and `conv` syntax of a toolchain, from its sources.

The precheck (trl_verigate/lean_server/precheck) holds the first token of each tactic to an allow-list; its backstop
refuses, anywhere in a proof, an identifier token that is a tactic/conv keyword of the toolchain but not allow-listed.
This script builds that keyword list (allowlists/tactic_keywords.txt) by reading the sources of the toolchain's
libraries straight out of git (no work tree needed):

    python scripts/tactic_keywords.py \
        --repo mathlib=/path/mathlib4.git@<commit> --repo batteries=/path/batteries.git@<commit> \
        --repo aesop=... --repo plausible=... --repo qq=... --repo proofwidgets=... \
        --repo leansearchclient=... --repo importgraph=... [--repo lean4=/path/lean4.git@v4.33.0] \
        [--refman /path/reference-manual.git@<commit>] [--core-supplement] \
        --out trl_verigate/lean_server/precheck/allowlists/tactic_keywords.txt

`--repo NAME=PATH[@REV]` takes a git dir (or a checkout; REV defaults to HEAD) or a plain directory. Only library
sources are read: test, demo, archive and script folders are skipped (they declare toy tactics no proof can reach).

What counts as a declaration of a tactic/conv keyword (comments are stripped first, string literals kept):
* `syntax`, `macro`, `elab` commands (with any attributes, `scoped`/`local` modifiers, `:prec`, `(name := …)`,
  `(priority := …)`) whose category is `tactic` or `conv`; the keyword is the first atom: `"kw"`, `&"kw"`,
  `tk:"kw"`, or the first atom inside a leading `atomic(…)`/`ppGroup(…)`/`(… <|> …)`. Surrounding spaces are stripped
  (`"exact "` gives `exact`). A `"!"?` / `"?"?` right after the atom also yields `kw!` / `kw?`.
* trailing tactic parsers (`syntax tactic " says" … : tactic`): their first atom (`says`), since it too is a word of
  the tactic language.
* `@[tactic_parser]`, `@[builtin_tactic_parser]`, `@[conv_parser]`/`@[builtin_conv_parser]` definitions built with
  `leading_parser`/`leadingParser`: the first `"kw"`, `&"kw"`, `nonReservedSymbol "kw"` or `symbol "kw"`.
* core's `declare_simp_like_tactic … "kw"` helper.
`macro_rules`/`elab_rules` add no atoms and are ignored. Declarations whose first element is a syntax abbreviation
(not an atom) are reported on stderr so a person can resolve them.

The Lean core repository (leanprover/lean4, with Std and Lake) is several GB of git history; where it cannot be
scanned, `--refman` reads the Lean reference manual at the matching toolchain tag (`:::tactic "kw"`,
`:::tactic Name (show := "kw")`, `:::conv name (show := "kw")`), and `--core-supplement` adds CORE_SUPPLEMENT below,
the core tactic/conv heads of the v4.33 toolchain, kept by hand (`--grind-mode` adds the step heads of
`grind => …` blocks, a category of their own). Give `--repo lean4=…` to scan
core itself; the supplement then only fills what the scan missed, and the words it adds are printed on stderr.

Only identifier-like atoms are written: symbol atoms such as `(`, `·`, `<;>` and `#`-atoms such as `#check` (the
allow-list files use `#` for comments) are never identifier tokens of a proof; they are listed on stderr. Besides the file, stdout gets the keywords that are also common term-level
identifiers in the scanned sources (used after `⟨ , ( := exact fun intro …`, with a count) so the false-rejection risk
can be judged.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

# Folders (any path component, case-sensitive) whose files no proof can import.
SKIP_DIRS = {
    "test",
    "tests",
    "Test",
    "Tests",
    "MathlibTest",
    "BatteriesTest",
    "AesopTest",
    "PlausibleTest",
    "QqTest",
    "LeanSearchClientTest",
    "ImportGraphTest",
    "Archive",
    "Counterexamples",
    "DownstreamTest",
    "scripts",
    "Demos",
    "examples",
    "doc",
    "docs",
    "bench",
    "benchmarks",
    "stage0",
    "Cache",
    "widget",
    ".lake",
    "lakefile",
}
CATEGORIES = ("tactic", "conv")
IDENT_LIKE = re.compile(r"^[^\W\d][\w'!?.]*$", re.UNICODE)
# Combinators that wrap the first element of a syntax without consuming input themselves.
WRAPPERS = {
    "atomic",
    "ppGroup",
    "ppIndent",
    "ppRealGroup",
    "ppRealFill",
    "ppDedent",
    "ppDedentIfGrouped",
    "group",
    "withPosition",
    "withoutPosition",
    "withPositionAfterLinebreak",
    "patternIgnore",
    "ppCategory",
    "incQuotDepth",
    "suppressInsideQuot",
    "withAntiquot",
    "withCache",
    "withResetCache",
    "withoutForbidden",
    "withForbidden",
    "ppHardLineUnlessUngrouped",
    "ppAllowUngrouped",
}
# Zero-width formatting/position atoms that may precede the first real element.
SKIPPABLE = {
    "ppSpace",
    "ppLine",
    "ppHardSpace",
    "ppAllowUngrouped",
    "ppHardLineUnlessUngrouped",
    "ppDedent",
    "colGt",
    "colGe",
    "colEq",
    "lineEq",
    "checkColGt",
    "checkColGe",
    "noWs",
    "checkWsBefore",
    "checkNoWsBefore",
    "ppIndent",
}

# Core (leanprover/lean4: Init, Std, Lean, Lake) heads for the v4.33 toolchain, used with --core-supplement when the
# lean4 sources themselves cannot be scanned. Kept by hand from the Lean sources' tactic/conv declarations, the
# reference manual at v4.33.0 and its release notes (v4.28–v4.33); see the report that came with this file.
CORE_SUPPLEMENT = {
    "tactic": """
        ac_nf ac_nf0 ac_rfl admit all_goals and_intros any_goals apply apply? apply_assumption apply_ext_theorem
        apply_mod_cast apply_rfl apply_rules array_get_dec array_mem_dec as_aux_lemma assumption
        assumption_mod_cast attempt_all attempt_all_par bv_check bv_decide bv_decide? bv_normalize bv_omega
        by_cases calc case case' cases cbv change checkpoint classical clean_wf clear clear_value congr constructor
        contradiction conv conv' cutsat dbg_trace decide decide_cbv decreasing_tactic decreasing_trivial
        decreasing_trivial_pre_omega decreasing_with delta deriving_LawfulEq_tactic deriving_LawfulEq_tactic_step
        deriving_ReflEq_tactic done dsimp dsimp! dsimp? dsimp?! eq_refl erw exact exact? exact_mod_cast exfalso
        exists expose_names ext ext1 extract_lets fail fail_if_success false_or_by_contra first first_par focus
        fun_cases fun_induction funext generalize get_elem_tactic get_elem_tactic_extensible
        get_elem_tactic_trivial grind grind? grobner guard_expr guard_hyp guard_target have have' haveI if
        induction infer_instance injection injections intro intros iterate left let let' letI let_to_have lia
        lift_lets massumption match mcases mclear mconstructor mdup mexact mexfalso mexists mframe mhave mintro
        mleave mleft monotonicity mpure mpure_intro mrefine mrename_i mreplace mrevert mright mspec mspec_no_bind
        mspec_no_simp mspecialize mspecialize_pure mstart mstop mvcgen mvcgen? mvcgen' mvcgen_trivial
        mvcgen_trivial_extensible native_decide next nofun nomatch norm_cast norm_cast0 obtain omega open
        push_cast rcases refine refine' refine_lift refine_lift' rename rename_i repeat repeat' repeat1' replace
        revert rewrite rfl rfl' right rintro rotate_left rotate_right run_tac rw rw? rw_mod_cast rwa save
        set_option show show_term simp simp! simp? simp?! simp_all simp_all! simp_all? simp_all?! simp_all_arith
        simp_all_arith! simp_arith simp_arith! simp_wf simpa simpa! simpa? simpa?! sizeOf_list_dec skip sleep solve
        solve_by_elim sorry specialize split stop subst subst_eqs subst_vars suffices suggestions sym symm
        symm_saturate trace trace_state trivial try try? try_suggestions unfold unhygienic vcgen
        wait_for_unblock_async with_annotate_state with_implicit with_reducible with_reducible_and_instances
        with_unfolding_all with_unfolding_none
    """,
    "conv": """
        all_goals any_goals apply arg args case case' cbv change congr conv delta done dsimp enter erw ext
        fail_if_success first focus fun intro left lhs next norm_cast pattern reduce repeat rewrite rfl rhs right
        rw simp simp_match skip tactic tactic' trace_state try unfold whnf zeta
    """,
    # Heads of the `grind` category (steps of `grind => …` / `sym => …` blocks): not `tactic`/`conv` atoms, so
    # only written with --grind-mode (words such as `ac`, `finish`, `impossible` are plausible hypothesis names).
    "grind": """
        ac cases cases? cases_next exact finish finish? first focus grind_linarith grind_order have impossible
        instantiate internalize internalize_all intro intros lia linarith mbtc next rename_i repeat ring set_config
        show_asserted show_cases show_eqcs show_false show_goals show_local_thms show_state show_true simp skip
        sorry try use vcgen
    """,
}


@dataclass
class Source:
    name: str
    path: str
    rev: str | None
    is_git: bool
    commit: str = ""

    def files(self) -> list[str]:
        if self.is_git:
            out = git(self.path, "ls-tree", "-r", "--name-only", self.commit)
            return [f for f in out.splitlines() if f.endswith(".lean")]
        root = Path(self.path)
        return [str(p.relative_to(root)) for p in root.rglob("*.lean")]

    def texts(self, keep=lambda rel: True):
        """(path, text) of every kept .lean file; one `git cat-file --batch` for a git source."""
        if not self.is_git:
            for rel in self.files():
                if keep(rel):
                    yield rel, self.read(rel)
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

    def read(self, rel: str) -> str:
        if self.is_git:
            return git(self.path, "show", f"{self.commit}:{rel}")
        return (Path(self.path) / rel).read_text(encoding="utf-8", errors="replace")


def git(gitdir: str, *args: str) -> str:
    return subprocess.run(
        ["git", f"--git-dir={gitdir}", *args],
        check=True,
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
    ).stdout


def open_source(spec: str, default_name: str = "") -> Source:
    name, _, rest = spec.partition("=") if "=" in spec.split("@")[0] else (default_name, "", spec)
    path, _, rev = rest.partition("@")
    path = os.path.abspath(os.path.expanduser(path))
    gitdir = None
    if os.path.isfile(os.path.join(path, "HEAD")) and os.path.isdir(os.path.join(path, "objects")):
        gitdir = path
    elif os.path.isdir(os.path.join(path, ".git")):
        gitdir = os.path.join(path, ".git")
    if gitdir:
        src = Source(name or Path(path).name, gitdir, rev or None, True)
        src.commit = git(gitdir, "rev-parse", f"{rev or 'HEAD'}^{{commit}}").strip()
        return src
    if rev:
        raise SystemExit(f"{spec}: a revision needs a git dir")
    return Source(name or Path(path).name, path, None, False)


def wanted(rel: str) -> bool:
    parts = rel.split("/")
    return not any(p in SKIP_DIRS for p in parts[:-1]) and parts[-1] not in ("lakefile.lean",)


# ---------------------------------------------------------------------------------------------------------------
# Lexing: strip comments, keep strings.


def strip_comments(text: str) -> str:
    return lex(text)[0]


def lex(text: str) -> tuple[str, str]:
    """(text with comments blanked, the same with string/char literal contents blanked too); newlines are kept."""
    out: list[str] = []
    masked: list[str] = []

    def blank(s: str) -> str:
        return "".join(ch if ch == "\n" else " " for ch in s)

    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("--", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(blank(text[i:j]))
            masked.append(blank(text[i:j]))
            i = j
            continue
        if text.startswith("/-", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/-", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("-/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
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


# ---------------------------------------------------------------------------------------------------------------
# Declarations.

DECL_START = re.compile(
    r"^(?P<indent>[ \t]*)(?P<mods>(?:@\[[^\]\n]*\]\s*)?(?:(?:private|protected|scoped|local|noncomputable)\s+|"
    r"scoped\[[^\]\n]*\]\s+|set_option\s+\S+\s+\S+\s+in\s+|open\s[^\n]*?\sin\s+)*)"
    r"(?P<kw>syntax|macro|elab|declare_simp_like_tactic)\b(?!_)",
    re.MULTILINE,
)
# Cheap pre-filter: a file that declares a tactic/conv parser mentions one of these.
MAY_DECLARE = re.compile(r":\s*(?:tactic|conv)\b|_parser\b|declare_simp_like_tactic")
PARSER_ATTR = re.compile(r"@\[[^\]]*\b(?:builtin_)?(?P<cat>tactic|conv)_parser\b[^\]]*\]")
FIRST_ATOM_IN_PARSER = re.compile(r'(?:nonReservedSymbol\s*|symbol\s*|&\s*)?("(?:\\.|[^"\\])*")')


@dataclass
class Found:
    keywords: dict[str, dict[str, set[str]]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(set)))
    unresolved: list[str] = field(default_factory=list)
    local: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    symbols: set[str] = field(default_factory=set)
    quoted_decls: list[str] = field(default_factory=list)

    def add(self, cat: str, atom: str, where: str) -> None:
        atom = atom.strip()
        if not atom:
            return
        if IDENT_LIKE.match(atom) and atom != "_":
            self.keywords[cat][atom].add(where)
        else:
            self.symbols.add(f"{cat}:{atom}")


def chunk_at(text: str, start: int, indent: int) -> str:
    """The declaration starting at `start`: up to the next non-blank line indented no deeper than it."""
    lines = text[start:].split("\n")
    body = [lines[0]]
    for line in lines[1:]:
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        body.append(line)
    return "\n".join(body)


def depth_scan(tokens: list[tuple[str, str]]):
    depth = 0
    for i, (kind, val) in enumerate(tokens):
        if val in "([{" and kind == "op":
            depth += 1
        elif val in ")]}" and kind == "op":
            depth -= 1
        yield i, depth, kind, val


def skip_options(tokens: list[tuple[str, str]], i: int) -> int:
    # `:prec` right after the keyword
    if i < len(tokens) and tokens[i][1] == ":" and i + 1 < len(tokens) and tokens[i + 1][0] in ("id", "num"):
        i += 2
        if i < len(tokens) and tokens[i][1] in ("+", "-") and i + 1 < len(tokens) and tokens[i + 1][0] == "num":
            i += 2
    while (
        i + 2 < len(tokens)
        and tokens[i][1] == "("
        and tokens[i + 1][0] == "id"
        and tokens[i + 1][1] in ("name", "priority", "kind")
        and tokens[i + 2][1] == ":="
    ):
        depth, j = 0, i
        while j < len(tokens):
            if tokens[j][1] == "(":
                depth += 1
            elif tokens[j][1] == ")":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        i = j + 1
    return i


def first_atoms(tokens: list[tuple[str, str]], i: int, end: int) -> tuple[list[str], bool, str]:
    """Atoms that can start the syntax tokens[i:end]; (atoms, trailing?, reason-if-none)."""
    trailing = False
    while i < end:
        kind, val = tokens[i]
        if (
            kind == "id"
            and i + 1 < end
            and tokens[i + 1][1] == ":"
            and i + 2 < end
            and (tokens[i + 2][0] in ("str", "nb") or tokens[i + 2][1] == "(" or tokens[i + 2][1] in CATEGORIES)
        ):
            i += 2  # `tk:"kw"` / `t:tactic` / `x:(…)` binder: look at what is bound
            continue
        if kind in ("str", "nb"):
            atoms = [lit(val)]
            nxt = i + 1
            if nxt < end and tokens[nxt][0] == "str" and lit(tokens[nxt][1]) in ("!", "?", "?!", "!?"):
                atoms.append(lit(val).strip() + lit(tokens[nxt][1]))
            return atoms, trailing, ""
        if kind == "id" and val in SKIPPABLE:
            i += 1
            if i < end and tokens[i][1] == "(":
                i = match_paren(tokens, i) + 1
            continue
        if kind == "id" and (val in WRAPPERS or val.startswith("pp")) and i + 1 < end and tokens[i + 1][1] == "(":
            i += 2
            continue
        if val == "(" and kind == "op":
            close = match_paren(tokens, i)
            branches, start, depth = [], i + 1, 0
            for j in range(i + 1, close):
                v = tokens[j][1]
                if v in "([{":
                    depth += 1
                elif v in ")]}":
                    depth -= 1
                elif v == "<|>" and depth == 0:
                    branches.append((start, j))
                    start = j + 1
            branches.append((start, close))
            if len(branches) == 1:
                i += 1
                continue
            atoms: list[str] = []
            for b0, b1 in branches:
                a, _, _ = first_atoms(tokens, b0, b1)
                atoms += a
            return atoms, trailing, "" if atoms else "alternation without atoms"
        if kind == "id" and val.split(":")[0] in CATEGORIES + ("tactic", "tacticSeq", "term", "conv", "convSeq"):
            trailing = True  # `tactic " says" …`: a trailing parser; its first atom is still a tactic word
            i += 1
            if i < end and tokens[i][1] == ":" and i + 1 < end and tokens[i + 1][0] == "num":
                i += 2
            continue
        return [], trailing, f"starts with {val!r}"
    return [], trailing, "no atom"


def match_paren(tokens: list[tuple[str, str]], i: int) -> int:
    depth = 0
    for j in range(i, len(tokens)):
        if tokens[j][1] in ("(", "[", "{"):
            depth += 1
        elif tokens[j][1] in (")", "]", "}"):
            depth -= 1
            if depth == 0:
                return j
    return len(tokens) - 1


def scan_text(text: str, where: str, found: Found) -> None:
    clean, masked = lex(text)
    for m in DECL_START.finditer(masked):
        kw = m.group("kw")
        chunk = chunk_at(masked, m.start("kw"), len(m.group("indent")))
        chunk = clean[m.start("kw") : m.start("kw") + len(chunk)]
        line = clean.count("\n", 0, m.start()) + 1
        loc = f"{where}:{line}"
        if m.start("kw") > 0 and masked[m.start("kw") - 1] in "|":
            continue
        toks = tokenize(chunk)[1:]
        if kw == "declare_simp_like_tactic":
            strs = [lit(v) for k, v in toks if k == "str"]
            if strs:
                found.add("tactic", strs[0], loc)
            continue
        if kw == "syntax":
            # `syntax name := …` defines an abbreviation, not a parser of a category
            j = skip_options(toks, 0)
            if j + 1 < len(toks) and toks[j][0] == "id" and toks[j + 1][1] == ":=":
                continue
            # the category is the identifier after the last depth-0 `:` (the chunk ends with `: cat`)
            cat, end = None, None
            for i, depth, _kind, val in depth_scan(toks):
                if depth == 0 and val == ":" and i + 1 < len(toks) and toks[i + 1][0] == "id" and i + 2 == len(toks):
                    cat, end = toks[i + 1][1], i
            if cat is None:
                continue
        else:
            # macro/elab: `… : cat (<= ty)? =>`
            cat, end, arrow = None, None, None
            for i, depth, _kind, val in depth_scan(toks):
                if depth == 0 and val == "=>":
                    arrow = i
                    break
            if arrow is None:
                continue
            for i in range(arrow - 1, 0, -1):
                if toks[i][1] == ":" and toks[i + 1][0] == "id" and (i + 2 == arrow or toks[i + 2][1] == "<="):
                    cat, end = toks[i + 1][1], i
                    break
            if cat is None:
                continue
        if cat not in CATEGORIES:
            continue
        start = skip_options(toks, 0)
        atoms, trailing, why = first_atoms(toks, start, end)
        if not atoms:
            snippet = " ".join(v for _, v in toks[:end])[:120]
            if any(k == "op" and v == "$" for k, v in toks[:end]):
                found.quoted_decls.append(f"{loc}: {kw} {snippet}")
            else:
                found.unresolved.append(f"{loc}: {kw} … : {cat} ({why}): {snippet}")
            continue
        if re.search(r"\blocal\b", m.group("mods")):
            for a in atoms:  # `local` syntax exists only in its own file: no proof can reach it
                found.local[a.strip()].add(loc)
            continue
        for a in atoms:
            found.add(cat, a, loc + (" (trailing)" if trailing else ""))
    # attribute-declared parsers: @[tactic_parser] def x := leading_parser "kw" …
    for m in PARSER_ATTR.finditer(masked):
        rest = clean[m.end() : m.end() + 600]
        lp = re.search(r"\b(?:leading_parser|leadingParser)\b", rest)
        if not lp:
            continue
        a = FIRST_ATOM_IN_PARSER.search(rest, lp.end())
        if a:
            found.add(m.group("cat"), lit(a.group(1)), f"{where}:{clean.count(chr(10), 0, m.start()) + 1}")


# ---------------------------------------------------------------------------------------------------------------
# Reference manual: `:::tactic "kw"`, `:::tactic Name (show := "kw")`, `:::conv name (show := "kw")`.

REFMAN = re.compile(
    r':::(?P<cat>tactic|conv)\s+(?:"(?P<kw>[^"]+)"|(?P<name>[^\s(]+)(?:\s*\(show\s*:=\s*"(?P<show>[^"]+)"\))?)'
)


def scan_refman(src: Source, found: Found) -> None:
    for rel, text in src.texts(lambda rel: rel.startswith("Manual/")):
        for m in REFMAN.finditer(text):
            kw = m.group("kw") or m.group("show")
            if not kw:
                continue
            first = kw.split()[0]
            found.add(m.group("cat"), first, f"refman:{rel}")


# ---------------------------------------------------------------------------------------------------------------
# Term-level uses, for the false-rejection report: a keyword met as an identifier that is not a tactic step, i.e.
# right after `⟨ , ( := ← exact refine apply fun intro with |` (a term, a binder or a pattern), and not after `.`.

WORD = re.compile(r"(?<![\w'!?.])([^\W\d][\w'!?]*)(?![\w'!?.])", re.UNICODE)
TERM_CONTEXT = re.compile(
    r"(?:[⟨,(←]|:=|\b(?:exact|refine|apply|fun|intro|rintro|obtain|with|use|show|at|using)|[^|]\|)\s*$"
)


# Metaprogramming sources mention tactics inside quotations: the term-use count reads mathematics only.
METAPROGRAMS = re.compile(
    r"(?:^|/)(?:Tactic|Util|Lean|Meta|Linter|Testing|Widget|Aesop|Qq|Plausible|ProofWidgets|"
    r"LeanSearchClient|ImportGraph|Batteries/(?:Lean|Tactic|CodeAction|Util))(?:/|\.lean$)"
)

# Reserved words: the lexer never makes them identifiers, so they carry no false-rejection risk.
RESERVED = {
    "fun",
    "show",
    "let",
    "if",
    "have",
    "calc",
    "match",
    "open",
    "set_option",
    "nofun",
    "nomatch",
    "sorry",
    "suffices",
    "do",
    "then",
    "else",
    "at",
    "from",
    "by",
    "with",
    "exists",
    "haveI",
    "letI",
}
NOT_A_TERM_BEFORE = re.compile(r"(?:@\[|attribute\s*\[|\b(?:disch|discharger)\s*:=|\bsimp\w*\s*\(config)[^\]\n]*$")


def term_uses(masked: str, keywords: set[str], counts: dict[str, int]) -> None:
    for m in WORD.finditer(masked):
        w = m.group(1)
        if w not in keywords or w in RESERVED or masked[m.end() : m.end() + 1] == "|":
            continue
        if not TERM_CONTEXT.search(masked, max(0, m.start() - 12), m.start()):
            continue
        line_start = masked.rfind("\n", 0, m.start()) + 1
        if NOT_A_TERM_BEFORE.search(masked, line_start, m.start()):
            continue  # an attribute (`@[simp, norm_cast]`) or a discharger (`(disch := fun_prop)`)
        counts[w] += 1


# ---------------------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--repo",
        action="append",
        default=[],
        metavar="NAME=PATH[@REV]",
        help="a git dir / checkout / directory of Lean sources to scan (repeatable)",
    )
    ap.add_argument("--refman", metavar="PATH[@REV]", help="leanprover/reference-manual git dir at the toolchain tag")
    ap.add_argument(
        "--core-supplement",
        action="store_true",
        help="add CORE_SUPPLEMENT (use when leanprover/lean4 itself is not scanned)",
    )
    ap.add_argument(
        "--grind-mode",
        action="store_true",
        help="with --core-supplement, also write the `grind =>` step heads (category `grind`)",
    )
    ap.add_argument("--out", help="write the keyword file here (else only the report is printed)")
    ap.add_argument("--verbose", action="store_true", help="print every keyword with where it was found")
    ap.add_argument("--min-uses", type=int, default=5, help="threshold of the term-use report on stdout")
    args = ap.parse_args(argv)

    found = Found()
    sources = [open_source(spec) for spec in args.repo]
    for src in sources:
        for rel, text in src.texts(wanted):
            if MAY_DECLARE.search(text):
                scan_text(text, f"{src.name}:{rel}", found)
    refman = open_source(args.refman, "reference-manual") if args.refman else None
    if refman:
        scan_refman(refman, found)
    supplemented: dict[str, list[str]] = {}
    if args.core_supplement:
        for cat, words in CORE_SUPPLEMENT.items():
            if cat == "grind" and not args.grind_mode:
                continue
            new = [w for w in words.split() if w not in found.keywords["tactic"] and w not in found.keywords["conv"]]
            supplemented[cat] = new
            for w in words.split():
                found.add(cat, w, "core-supplement")

    all_kw = sorted({k for cat in found.keywords.values() for k in cat})
    if args.out:
        header = [
            "# Leading atoms (keywords) of every `tactic` and `conv` syntax of the toolchain, one a line, sorted.",
            "# Used by the precheck's backstop: an identifier token of a proof that is one of these but not on",
            "# tactics.txt / conv_tactics.txt is refused. Generated by scripts/tactic_keywords.py; do not edit.",
            "# Generated from:",
        ]
        for src in sources:
            header.append(f"#   {src.name}: {src.commit or src.path}")
        if refman:
            header.append(f"#   reference-manual ({'`:::tactic`/`:::conv` entries'}): {refman.commit or refman.path}")
        if args.core_supplement:
            header.append(
                "#   core supplement: CORE_SUPPLEMENT in the script (leanprover/lean4 v4.33 core heads"
                + (", with `grind =>` step heads" if args.grind_mode else "")
                + ")"
            )
        header.append("# Regenerate with:")
        header.append(
            "#   python scripts/tactic_keywords.py "
            + " ".join(
                [f"--repo {s.name}=<{s.name} git dir>@{s.commit or 'HEAD'}" for s in sources]
                + ([f"--refman <reference-manual git dir>@{refman.commit}"] if refman else [])
                + (["--core-supplement"] if args.core_supplement else [])
                + (["--grind-mode"] if args.grind_mode else [])
                + ["--out trl_verigate/lean_server/precheck/allowlists/tactic_keywords.txt"]
            )
        )
        Path(args.out).write_text("\n".join(header + all_kw) + "\n", encoding="utf-8")

    err = sys.stderr
    print(
        f"{len(all_kw)} keywords ({len(found.keywords['tactic'])} tactic, {len(found.keywords['conv'])} conv"
        + (f", {len(found.keywords['grind'])} grind-mode" if found.keywords.get("grind") else "")
        + ")",
        file=err,
    )
    for cat, new in supplemented.items():
        print(f"core supplement added ({cat}, {len(new)}): {' '.join(new)}", file=err)
    if found.unresolved:
        print(f"\n{len(found.unresolved)} tactic/conv declarations without a leading atom (check by hand):", file=err)
        for u in found.unresolved:
            print("  " + u, file=err)
    if found.quoted_decls:
        print(
            f"\n{len(found.quoted_decls)} tactic/conv declarations built from antiquotations (helper commands):",
            file=err,
        )
        for u in found.quoted_decls:
            print("  " + u, file=err)
    local_only = sorted(a for a in found.local if a not in all_kw)
    if local_only:
        print(
            f"\n`local` tactic/conv syntax left out (file-local, unreachable from a proof): {' '.join(local_only)}",
            file=err,
        )
    if found.symbols:
        print(f"\nsymbol and #-atoms left out (never identifier tokens): {' '.join(sorted(found.symbols))}", file=err)
    if args.verbose:
        for cat in sorted(found.keywords):
            for k in sorted(found.keywords[cat]):
                print(f"{cat}\t{k}\t{'; '.join(sorted(found.keywords[cat][k])[:3])}", file=err)

    # False-rejection risk: how often each keyword is used as a term, binder or pattern name in the scanned sources.
    counts: dict[str, int] = defaultdict(int)
    kwset = set(all_kw)
    for src in sources:
        for _rel, text in src.texts(lambda rel: wanted(rel) and not METAPROGRAMS.search(rel)):
            term_uses(lex(text)[1], kwset, counts)
    risky = sorted((k for k in all_kw if counts[k] >= args.min_uses), key=lambda k: (-counts[k], k))
    print(
        f"# {len(risky)} keywords used at least {args.min_uses} times as a term/binder/pattern identifier "
        f"(after ⟨ , ( := ← exact refine apply fun intro with |) in the scanned non-metaprogramming sources, most "
        f"first:"
    )
    for k in risky:
        print(f"{k}\t{counts[k]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
