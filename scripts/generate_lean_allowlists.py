#!/usr/bin/env python3
"""Generate the precheck's tactic and conv allow-lists from the tactic syntax that Lean and its libraries declare.

Reads the Lean sources of the toolchain's libraries (a git dir at a pinned commit, or a plain checkout) and writes
into trl_verigate/lean_server/precheck/allowlists/:

* `tactic_keywords.txt`: the leading atom of every `tactic` and `conv` syntax declared (`syntax`, `macro`, `elab`
  with any attributes, `scoped` modifier, `:prec`, `(name := …)`, `(priority := …)`; the first atom, also inside a
  leading `atomic(…)`/`ppGroup(…)`/`(… <|> …)`; a `"!"?`/`"?"?` right after it adds `kw!`/`kw?`;
  `@[tactic_parser]`/`@[builtin_tactic_parser]` `leading_parser` definitions; `declare_simp_like_tactic`).
* `tactics.txt` and `conv_tactics.txt`: those heads minus the exclusions below, for tactic and conv mode.
* `tactic_exclusions.txt`: each excluded head with the rule that excludes it and the declaration it was read from.

Exclusions, by rule:
1. Takes code: the declared syntax has an argument that holds code (`doSeq`/`doElem`, Lean code in `do` notation:
   `run_tac`, `run_conv`; a widget instance: `with_panel_widgets`), or the declaring file evaluates what it
   elaborates (`unsafe evalExpr`/`evalTerm`/`evalConst`, `Meta.evalExpr`, `IO.Process`: `plausible`, Mathlib's
   `trace e`).
2. Native evaluation (NATIVE): trusts compiled code; the precheck adds these back with `allow_native_decide`.
3. Incomplete proof (INCOMPLETE): closes goals with `sorryAx` (`sorry`, `admit`, `stop`, `sorry_if_sorry`), or the
   declaring file admits goals (`admitGoal`: Mathlib's `hint` when no hint closes the goal); core's `apply?` admits
   the goal it cannot close (Lean/Elab/Tactic/LibrarySearch.lean), so POLICY names it.
4. Wall-clock waiting (WAITS): sleeps outside the heartbeat limit.
5. Options (`options.txt`): a `Bool` option a source declares (`register_option`, `register_builtin_option`) may be
   set, unless a component of its name is one of DENIED_OPTION_PARTS (debugging switches such as
   `debug.skipKernelTC`, compiler and interpreter internals, output floods, linters that run more tactics). A number
   may be set only up to its bound in OPTION_BOUNDS, a policy; every other option is refused.
`local` syntax (reachable only inside its own file) and syntax under test, archive and script folders are not read.
Tactic configuration (`(config := …)`, `+opt`) is data the precheck's rules check; it excludes no tactic here.

Lean core: give `--source lean4=<leanprover/lean4 git dir>@<toolchain tag>` to read `src/` itself. Without it,
`--refman <leanprover/reference-manual git dir>@<toolchain tag>` reads the core heads that the manual documents
(`:::tactic "kw"`, `:::tactic Name (show := "kw")`, `:::conv …`) or names in its `{tactic}` roles, which its build
resolves against the toolchain. The manual shows no syntax and leaves some core heads out, so CORE_DECLARATIONS
quotes those declarations, and the core ones that take code, from src/.

    python scripts/generate_lean_allowlists.py --source mathlib=<git dir>@<commit> --source batteries=… \\
        --source aesop=… --source qq=… (--source lean4=<git dir>@<tag> | --refman <git dir>@<tag>) [--out-dir DIR]
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from lean_sources import Source, git, lex, lit, open_source, tokenize

OUT_DIR = Path(__file__).resolve().parent.parent / "trl_verigate" / "lean_server" / "precheck" / "allowlists"
# Folders (any path component) whose files no proof can import: tests, archives, scripts, docs, build output.
SKIP_DIRS = set(
    """test tests Test Tests MathlibTest BatteriesTest AesopTest QqTest Archive Counterexamples DownstreamTest
    scripts Demos examples doc docs bench benchmarks stage0 Cache widget .lake lakefile tests_lean""".split()
)
CATEGORIES = ("tactic", "conv")
IDENT_LIKE = re.compile(r"^[^\W\d][\w'!?.]*$", re.UNICODE)
# Combinators that wrap the first element of a syntax without consuming input themselves.
WRAPPERS = set(
    """atomic ppGroup ppIndent ppRealGroup ppRealFill ppDedent ppDedentIfGrouped group withPosition withoutPosition
    withPositionAfterLinebreak patternIgnore ppCategory incQuotDepth suppressInsideQuot withAntiquot withCache
    withResetCache withoutForbidden withForbidden ppHardLineUnlessUngrouped ppAllowUngrouped""".split()
)
# Zero-width formatting/position atoms that may precede the first real element.
SKIPPABLE = set(
    """ppSpace ppLine ppHardSpace ppAllowUngrouped ppHardLineUnlessUngrouped ppDedent colGt colGe colEq lineEq
    checkColGt checkColGe noWs checkWsBefore checkNoWsBefore""".split()
)
# Rule 1 on a declaration's syntax, and on the file that declares it.
# Argument categories that hold code: `do` notation, and ProofWidgets' widget instances (evalWidgetInstance).
CODE_ARGUMENT = re.compile(r"\b(?:Term\.)?do(?:Seq|Elem)\b|\b(?:Widget\.)?widgetInstanceSpec\b")
# Rule 3 on the file that declares a tactic: its elaborator may close a goal with sorryAx.
ADMITS = re.compile(r"\badmitGoal\b")
EVALUATES = re.compile(
    r"\bunsafe\s+(?:[\w.]*\.)?(?:evalExpr'?|evalTerm|evalConst)\b|\b(?:Meta|Term)\.evalExpr'?\b|\bIO\.Process\."
)
# Core declarations that the reference manual does not document, quoted verbatim from leanprover/lean4's src/
# (Init/Tactics.lean, Init/Try.lean, Init/Grind/Tactics.lean, Init/WFTactics.lean; a macro's first line only) as a
# code index stores them, not necessarily at the toolchain's tag, and read like a source file, rules included: used
# only with --refman, in place of src/.
CORE_DECLARATIONS = """
scoped syntax (name := withAnnotateState) "with_annotate_state " rawStx ppSpace tactic : tactic
syntax (name := fail) "fail" (ppSpace str)? : tactic
syntax (name := checkpoint) "checkpoint " tacticSeq : tactic
macro (name := save) "save" : tactic => `(tactic| skip)
macro "refine_lift " e:term : tactic => `(tactic| focus (refine no_implicit_lambda% $e; rotate_right))
macro "refine_lift' " e:term : tactic => `(tactic| focus (refine' no_implicit_lambda% $e; rotate_right))
syntax (name := runTac) "run_tac " doSeq : tactic
syntax (name := normCast0) "norm_cast0" (location)? : tactic
syntax (name := tryTrace) "try?" optConfig : tactic
syntax (name := attemptAll) "attempt_all " withPosition((ppDedent(ppLine) colGe "| " tacticSeq)+) : tactic
syntax (name := attemptAllPar) "attempt_all_par " withPosition((ppDedent(ppLine) colGe "| " tacticSeq)+) : tactic
syntax (name := firstPar) "first_par " withPosition((ppDedent(ppLine) colGe "| " tacticSeq)+) : tactic
syntax (name := tryResult) "try_suggestions " tactic* : tactic
syntax (name := cutsat) "cutsat" optConfig : tactic
syntax "decreasing_trivial_pre_omega" : tactic
syntax "get_elem_tactic_extensible" : tactic
macro "clean_wf" : tactic =>
"""
# Manual entries naming a syntax kind whose name does not spell its leading atom.
KIND_HEADS = {"traceMessage": "trace", "bvTraceMacro": "bv_decide?", "mintroMacro": "mintro", "convTactic": "conv"}
OPTION_DECLARATION = re.compile(
    r"^[ \t]*(?:@\[[^\]\n]*\]\s*)?(?:public\s+)?register_(?:builtin_)?option\s+(?P<name>[^\s:]+)\s*:\s*(?P<type>\w+)",
    re.MULTILINE,
)
# Rule 5: name components of the options a proof may not set, whatever their type.
DENIED_OPTION_PARTS = frozenset(
    "debug dev trace compiler interpreter bootstrap profiler diagnostics tacticAnalysis unsafe".split()
)
# The largest value a proof may give each number-valued option; `config`: LeanServerConfig.max_heartbeats.
OPTION_BOUNDS = {
    "maxHeartbeats": "config",
    "synthInstance.maxHeartbeats": "config",
    "maxRecDepth": 10000,
    "exponentiation.threshold": 4096,
    "synthInstance.maxSize": 1024,
}
# Core `Bool` options, for a run with --refman (src/ unread), with the type core declares them with: the manual's
# {option} roles name most; pp.all, pp.coercions, pp.numericTypes, pp.funBinderTypes and linter.unusedVariables
# were on this project's hand-kept list before it was generated.
CORE_OPTIONS = """
register_builtin_option autoImplicit : Bool
register_builtin_option relaxedAutoImplicit : Bool
register_builtin_option tactic.hygienic : Bool
register_builtin_option tactic.skipAssignedInstances : Bool
register_builtin_option tactic.customEliminators : Bool
register_builtin_option pp.all : Bool
register_builtin_option pp.proofs : Bool
register_builtin_option pp.explicit : Bool
register_builtin_option pp.coercions : Bool
register_builtin_option pp.numericTypes : Bool
register_builtin_option pp.funBinderTypes : Bool
register_builtin_option pp.fieldNotation : Bool
register_builtin_option pp.notation : Bool
register_builtin_option pp.match : Bool
register_builtin_option pp.mvars : Bool
register_builtin_option pp.piBinderNames : Bool
register_builtin_option linter.unusedVariables : Bool
register_builtin_option linter.unnecessarySimpa : Bool
"""
POLICY = {
    "native_decide": "NATIVE",
    "bv_decide": "NATIVE",
    "bv_decide?": "NATIVE",
    "bv_check": "NATIVE",
    "sorry": "INCOMPLETE",
    "admit": "INCOMPLETE",
    "stop": "INCOMPLETE",
    "sorry_if_sorry": "INCOMPLETE",
    # Lean core's LibrarySearch: `apply?` ends with `admitGoal goal` when no suggestion closes the goal.
    "apply?": "INCOMPLETE",
    "sleep": "WAITS",
}
POLICY_REASONS = {
    "NATIVE": "native evaluation: trusts compiled code (allowed with allow_native_decide)",
    "INCOMPLETE": "closes goals with sorryAx: an incomplete proof",
    "WAITS": "waits wall-clock time outside the heartbeat limit",
}


def source_exclusion(syntax: str, file_evaluates: re.Match | None, file_admits: re.Match | None = None) -> str:
    """Why a declaration is excluded by what it or its file does (rules 1 and 3), or "" when it is not."""
    if m := CODE_ARGUMENT.search(syntax):
        return f"takes code: a `{m.group(0)}` argument"
    if file_evaluates:
        return f"takes code: its file evaluates what it elaborates (`{' '.join(file_evaluates.group(0).split())}`)"
    if file_admits:
        return f"INCOMPLETE: {POLICY_REASONS['INCOMPLETE']}: its file admits goals (`{file_admits.group(0)}`)"
    return ""


def wanted(rel: str) -> bool:
    parts = rel.split("/")
    return not any(p in SKIP_DIRS for p in parts[:-1]) and parts[-1] not in ("lakefile.lean",)


DECL_START = re.compile(
    r"^(?P<indent>[ \t]*)(?P<mods>(?:@\[[^\]\n]*\]\s*)?(?:(?:private|protected|public|meta|scoped|local|noncomputable)\s+|"
    r"scoped\[[^\]\n]*\]\s+|set_option\s+\S+\s+\S+\s+in\s+|open\s[^\n]*?\sin\s+)*)"
    r"(?P<kw>syntax|macro|elab|declare_simp_like_tactic)\b(?!_)",
    re.MULTILINE,
)
# Cheap pre-filter: a file that declares a tactic/conv parser mentions one of these.
MAY_DECLARE = re.compile(r":\s*(?:tactic|conv)\b|_parser\b|declare_simp_like_tactic|register_(?:builtin_)?option")
PARSER_ATTR = re.compile(r"@\[[^\]]*\b(?:builtin_)?(?P<cat>tactic|conv)_parser\b[^\]]*\]")
FIRST_ATOM_IN_PARSER = re.compile(r'(?:nonReservedSymbol\s*|symbol\s*|&\s*)?("(?:\\.|[^"\\])*")')


@dataclass
class Found:
    """Every head found: category -> head -> where it is declared; and why a head takes code, where it does."""

    keywords: dict[str, dict[str, set[str]]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(set)))
    excluded_by_source: dict[str, dict[str, str]] = field(default_factory=lambda: defaultdict(dict))
    unresolved: list[str] = field(default_factory=list)
    local: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    symbols: set[str] = field(default_factory=set)
    options: dict[str, tuple[str, str]] = field(default_factory=dict)

    def add(self, cat: str, atom: str, where: str, exclusion: str = "") -> None:
        atom = atom.strip()
        if not atom:
            return
        if IDENT_LIKE.match(atom) and atom != "_":
            self.keywords[cat][atom].add(where)
            if exclusion:
                self.excluded_by_source[cat].setdefault(atom, f"{exclusion} ({where})")
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
        if val == ")" and kind == "op":  # the close of a wrapper whose `(` was stepped into
            i += 1
            continue
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
    evaluates = EVALUATES.search(clean)
    admits = ADMITS.search(clean)
    for m in OPTION_DECLARATION.finditer(clean):
        found.options.setdefault(
            m.group("name"), (m.group("type"), f"{where}:{clean.count(chr(10), 0, m.start()) + 1}")
        )
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
                found.add("tactic", strs[0], loc, source_exclusion(" ".join(v for _, v in toks), evaluates, admits))
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
            if not any(k == "op" and v == "$" for k, v in toks[:end]):  # `$`: a helper command's quotation
                found.unresolved.append(f"{loc}: {kw} … : {cat} ({why}): {' '.join(v for _, v in toks[:end])[:120]}")
            continue
        if re.search(r"\blocal\b", m.group("mods")):
            for a in atoms:  # `local` syntax exists only in its own file: no proof can reach it
                found.local[a.strip()].add(loc)
            continue
        exclusion = source_exclusion(" ".join(v for _, v in toks[start:end]), evaluates, admits)
        for a in atoms:
            found.add(cat, a, loc + (" (trailing)" if trailing else ""), exclusion)
    # attribute-declared parsers: @[tactic_parser] def x := leading_parser "kw" …
    for m in PARSER_ATTR.finditer(masked):
        rest = clean[m.end() : m.end() + 600]
        lp = re.search(r"\b(?:leading_parser|leadingParser)\b", rest)
        if not lp:
            continue
        a = FIRST_ATOM_IN_PARSER.search(rest, lp.end())
        if a:
            line = clean.count(chr(10), 0, m.start()) + 1
            found.add(
                m.group("cat"), lit(a.group(1)), f"{where}:{line}", source_exclusion(rest.split("\n\n")[0], False)
            )


REFMAN = re.compile(
    r':::(?P<cat>tactic|conv)\s+(?:"(?P<kw>[^"]+)"|(?P<name>[^\s(]+)(?:\s*\(show\s*:=\s*"(?P<show>[^"]+)"\))?)'
)


REFMAN_ROLE = re.compile(r"\{(?P<cat>tactic|conv)(?: [^}]*)?\}`(?P<kw>[^`]+)`")


def head_of_kind(name: str, cat: str) -> str:
    """The leading atom a syntax kind name spells: Lean names an unnamed syntax `tactic` + its atoms, capitalised,
    with `_` for each argument (`tacticNorm_cast__`); a named one is camel case (`withReducibleAndInstances`)."""
    last = name.split(".")[-1]
    if last in KIND_HEADS:
        return KIND_HEADS[last]
    prefix = re.match(rf"^{cat}(?=[A-Z])", last)
    if prefix:
        word = last[prefix.end() :].rstrip("_")
        return word[:1].lower() + word[1:]
    return re.sub(r"(?<=[a-z0-9])([A-Z])", lambda m: "_" + m.group(1).lower(), last)


def scan_refman(src: Source, found: Found) -> None:
    for rel, text in src.texts(lambda rel: rel.startswith("Manual/")):
        for m in REFMAN.finditer(text):
            kw = m.group("kw") or m.group("show") or head_of_kind(m.group("name"), m.group("cat"))
            found.add(m.group("cat"), kw.split()[0], f"refman:{rel}")
        for m in REFMAN_ROLE.finditer(text):  # the manual's build resolves each `{tactic}` role to a tactic
            word = m.group("kw").split()[0]
            if re.search(rf'\b(?:syntax|macro|elab)\b[^\n]*"{re.escape(word)}\b', text):
                continue  # a tactic the manual's own example declares
            found.add(m.group("cat"), head_of_kind(word, m.group("cat")) if "." in word else word, f"refman:{rel}")
    scan_text(CORE_DECLARATIONS, "core (CORE_DECLARATIONS)", found)
    scan_text(CORE_OPTIONS, "core (CORE_OPTIONS)", found)


def exclusions(found: Found) -> dict[tuple[str, str], str]:
    """(category, head) -> the rule that keeps the head off the allow-list, with where it was read."""
    excluded: dict[tuple[str, str], str] = {}
    for cat, heads in found.keywords.items():
        for head, where in heads.items():
            if head in found.excluded_by_source[cat]:
                excluded[cat, head] = found.excluded_by_source[cat][head]
            elif head in POLICY:
                excluded[cat, head] = f"{POLICY[head]}: {POLICY_REASONS[POLICY[head]]} ({sorted(where)[0]})"
    return excluded


def settable_options(found: Found) -> list[str]:
    """`name bound` lines of options.txt: the declared Bool options rule 5 allows, and the bounded numbers."""
    allowed = {
        name: "bool"
        for name, (kind, _) in found.options.items()
        if kind == "Bool" and not DENIED_OPTION_PARTS & set(name.split("."))
    }
    allowed |= {name: str(bound) for name, bound in OPTION_BOUNDS.items()}
    return [f"{name} {bound}" for name, bound in sorted(allowed.items())]


def provenance(sources: list[Source], refman: Source | None) -> list[str]:
    lines = ["# Generated by scripts/generate_lean_allowlists.py from (name: commit, commit date):"]
    for src in [*sources, *([refman] if refman else [])]:
        date = git(src.path, "log", "-1", "--format=%cs", src.commit).strip() if src.is_git else "plain directory"
        lines.append(f"#   {src.name}: {src.commit or src.path} ({date})")
    lines.append("# Do not edit: regenerate (see the script's docstring); a missing tactic means a missing source.")
    return lines


def write_lists(found: Found, out_dir: Path, sources: list[Source], refman: Source | None) -> None:
    excluded = exclusions(found)
    rules = __doc__.split("Exclusions, by rule:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    files = {
        "tactic_keywords.txt": (
            "# Leading atoms of every `tactic` and `conv` syntax declared, allowed or not. The precheck refuses one of",
            "# these met as an identifier where it is neither allowed nor a name (a backstop behind the layout).",
            sorted({k for heads in found.keywords.values() for k in heads}),
        ),
        "tactics.txt": (
            "# Tactics a proof may use: the first token of every tactic, at every nesting level. The declared tactic",
            "# heads minus tactic_exclusions.txt; users add more with LeanServerConfig.extra_tactics.",
            sorted(h for h in found.keywords["tactic"] if ("tactic", h) not in excluded),
        ),
        "conv_tactics.txt": (
            "# Conv-mode tactics (inside `conv … => …`): the declared conv heads minus tactic_exclusions.txt.",
            "# `tactic => …` returns to tactic mode, whose tactics are held to tactics.txt.",
            sorted(h for h in found.keywords["conv"] if ("conv", h) not in excluded),
        ),
        "options.txt": (
            "# Options a proof (`set_option … in`) or a file header may set: `bool`, or the largest number allowed",
            '# (`config`: LeanServerConfig.max_heartbeats; 0, Lean\'s "no limit", is read as that bound). Rule 5.',
            settable_options(found),
        ),
        "tactic_exclusions.txt": (
            "# Declared tactic/conv heads kept off the allow-lists: category, head, rule (and where it was read).",
            "\n".join(["# The rules:", *(f"#   {line.strip()}" for line in rules)]),
            [f"{cat}\t{h}\t{reason}" for (cat, h), reason in sorted(excluded.items())],
        ),
    }
    head = provenance(sources, refman)
    for name, (line1, line2, words) in files.items():
        (out_dir / name).write_text("\n".join([line1, line2, *head, *words]) + "\n", encoding="utf-8")


def report(found: Found) -> None:
    counts = ", ".join(f"{len(found.keywords[cat])} {cat}" for cat in CATEGORIES)
    lines = [
        f"{counts} heads; {sum(len(v) for v in found.excluded_by_source.values())} excluded by their source (rules 1, 3)"
    ]
    lines += [f"no leading atom (check by hand): {line}" for line in found.unresolved]
    lines += [f"`local` syntax left out: {' '.join(sorted(found.local))}"] * bool(found.local)
    lines += [f"symbol atoms left out (never identifiers): {' '.join(sorted(found.symbols))}"] * bool(found.symbols)
    print("\n".join(lines), file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source_help = "a git dir, checkout or directory of Lean sources to read (repeatable)"
    ap.add_argument("--source", action="append", default=[], metavar="NAME=PATH[@REV]", help=source_help)
    ap.add_argument("--refman", metavar="PATH@REV", help="leanprover/reference-manual git dir at the toolchain tag")
    ap.add_argument("--out-dir", type=Path, default=OUT_DIR, help=f"where to write the lists (default {OUT_DIR})")
    args = ap.parse_args(argv)
    if not args.source:
        ap.error("--source: give at least one NAME=PATH[@REV] (mathlib, batteries, aesop, qq, lean4)")
    found = Found()
    sources = [open_source(spec) for spec in args.source]
    for src in sources:
        for rel, text in src.texts(wanted):
            if MAY_DECLARE.search(text):
                scan_text(text, f"{src.name}:{rel}", found)
    refman = open_source(args.refman, "reference-manual") if args.refman else None
    if refman:
        scan_refman(refman, found)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    write_lists(found, args.out_dir, sources, refman)
    report(found)
    return 0


if __name__ == "__main__":
    sys.exit(main())
