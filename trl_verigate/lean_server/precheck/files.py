"""Complete files (`str` and `FileRequest` requests), untrusted throughout, and the trusted headers they are read
under.

A file is header lines, then declarations.

* Header lines are `import M`, `open …` and `set_option NAME VALUE`, one per line. Each import must be one of the
  trusted header's (`FileRequest.header`, else `LeanServerConfig.header`): `import Lake` would bring code runners the
  rules do not know. The REPL loads exactly the trusted header's imports, whichever of them the file lists; `open` and `set_option` lines travel with
  the file's code, so no option value or `open` costs a REPL. Options are held to the allow-list, and a value over
  its bound (`maxHeartbeats 0`, "no limit") runs at the bound.
* Declarations start at column 0: helper `theorem`/`lemma`/`def` declarations, then the main theorem (the last one),
  proved with `:= by`. Each may carry allowed attributes, the modifiers `private`/`protected`/`noncomputable`/
  `nonrec` and `open … in`/`set_option … in` prefixes. Every token is held to the proof rules; every tactic block
  (the proofs, and any `by` in a signature or a term value) to the tactic allow-list. Declaration names are
  distinct; a theorem's may have a namespace (`theorem Nat.foo`), a `def`'s is plain, and every helper `def` is sent
  as `noncomputable def` (inserted with a line break, so every token keeps its column): no configuration or
  discharger can run code the file defined.

A plain `str` is its own claim: a pass certifies what its main theorem states under its own `open` lines. A
`FileRequest` with a trusted `statement` (or `header`) is read in the trusted header's scope: the main theorem must
state exactly the statement (token by token; `lemma` for `theorem` and a `_root_.` prefix accepted), its `open … in`
prefixes must be the statement's, header `open` lines may only repeat the trusted header's namespaces, and no helper
may declare a name the statement uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from trl_verigate.lean_server.core import Tactic
from trl_verigate.lean_server.precheck import rules
from trl_verigate.lean_server.precheck.brackets import CLOSERS, OPENERS, bracket_pairs
from trl_verigate.lean_server.precheck.grammar import SUFFIX_WORDS
from trl_verigate.lean_server.precheck.layout import LayoutParser, Node, ProofLayout
from trl_verigate.lean_server.precheck.policy import Policy
from trl_verigate.lean_server.precheck.prepared import (
    Prepared,
    assemble,
    declared_name,
    located_at,
    trusted_statement_tokens,
)
from trl_verigate.lean_server.precheck.scopes import Scopes, bound_names, read_scopes, signature_binders
from trl_verigate.lean_server.precheck.tokens import PrecheckError, Token, check_characters, tokenize

MODIFIERS = frozenset({"private", "protected", "noncomputable", "nonrec"})
HELPER_KEYWORDS = frozenset({"theorem", "lemma", "def"})
MAIN_KEYWORDS = frozenset({"theorem", "lemma", "example"})
# Options a file may add to a trusted statement's prefixes: they bound Lean's work, not what the statement means.
RESOURCE_OPTIONS = frozenset({"maxHeartbeats", "synthInstance.maxHeartbeats", "maxRecDepth"})
HEADER_WORDS = frozenset({"import", "open", "set_option"})
_STATEMENT_PREVIEW = 300


@dataclass(frozen=True)
class TrustedHeader:
    """A trusted header split into its imports (what the REPL loads, one `import M` per line) and the rest, the
    preamble sent before every command; `opens` are the namespaces its `open` lines open."""

    imports: str
    modules: frozenset[str]
    preamble: str
    opens: frozenset[str]

    @staticmethod
    @lru_cache(maxsize=64)
    def parse(header: str) -> TrustedHeader:
        lines = header.split("\n")
        modules: list[str] = []
        k = 0
        while k < len(lines):
            line = lines[k].strip()
            if line.startswith("import "):
                modules += line.split()[1:]
            elif line and not line.startswith("--"):
                break
            k += 1
        preamble = "\n".join(lines[k:]).strip("\n")
        opens: set[str] = set()
        try:
            tokens = tokenize(preamble)
        except PrecheckError:
            tokens = []
        for j, token in enumerate(tokens):
            if token.text == "open":
                for name in tokens[j + 1 :]:
                    if name.kind != "ident" or name.line_start or name.text in ("in", "hiding", "renaming", "scoped"):
                        break
                    opens.add(".".join(name.components))
        imports = "\n".join(f"import {module}" for module in dict.fromkeys(modules))
        return TrustedHeader(imports, frozenset(modules), preamble, frozenset(opens))


@dataclass
class _Declaration:
    first: int  # its first token (an attribute, a modifier, a prefix or the keyword)
    attributes_end: int  # the token after its attributes
    keyword: int
    assign: int  # the `:=` ending its signature
    end: int  # one past its last token (the next declaration's first)
    layout: ProofLayout  # its tactic blocks
    proof: list  # the outermost tactics of its `:= by` block (empty for a term value)

    def name(self, tokens: list[Token]) -> Token | None:
        return None if tokens[self.keyword].text == "example" else tokens[self.keyword + 1]


def prepare_file(
    file_text: str,
    policy: Policy,
    default_header: str,
    statement: str | None = None,
    header: str | None = None,
) -> Prepared:
    """The REPL command for a complete untrusted file (see the module docstring); raises PrecheckError."""
    trusted_scope = statement is not None or header is not None
    trusted = TrustedHeader.parse(default_header if header is None else header)
    statement_tokens = None if statement is None else _trusted_statement(statement)
    check_characters(file_text, "file")
    tokens = tokenize(file_text)
    body_start, header_lines = _check_header(file_text, tokens, trusted, policy, trusted_scope)
    header_text, body = file_text[:body_start], file_text[body_start:]
    if trusted_scope:
        # The trusted preamble, then the file's option lines (its `open` lines open nothing the trusted one does not).
        options = [line for line in header_lines if line.startswith("set_option")]
        preamble = "\n".join(filter(None, [trusted.preamble, *options]))
    else:
        preamble = "\n".join(header_lines)
    with located_at(body_start):
        tokens = tokenize(body)
        declarations = _declarations(tokens, policy)
        *helpers, main = declarations
        # Names the trusted statement binds may be written although they are tactic keywords (a hypothesis `stop`).
        trusted_names = frozenset(bound_names(statement_tokens, signature=True)) if statement_tokens else frozenset()
        for declaration in declarations:
            _check_declaration(tokens, declaration, declaration is main, policy, trusted_names)
        _check_names(tokens, helpers, main)
        if statement_tokens is not None:
            _check_against_statement(tokens, main, helpers, statement_tokens)
        by = _main_by(tokens, main)
    statement_text, proof = body[: tokens[by].end], body[tokens[by].end :]
    if not proof.strip():
        raise PrecheckError("empty proof body after `:= by`", body_start + tokens[by].start)
    keyword = tokens[main.keyword]
    prepared = assemble(
        trusted.imports,
        statement_text,
        "",
        proof,
        tokens,
        keyword,
        main.name(tokens),
        line_offset=header_text.count("\n"),
        noncomputable_at=[
            tokens[at].start for at in map(_noncomputable_at, [tokens] * len(helpers), helpers) if at is not None
        ],
        preamble=preamble,
        trusted_preamble=trusted.preamble if trusted_scope else "",
    )
    proof_start = tokens[by].end
    spans = [main.layout.span(node) for node in main.proof]
    prepared.outermost_tactics = [Tactic(body[a:b], a - proof_start, b - proof_start) for a, b in spans]
    return prepared


# ---------------------------------------------------------------- header


def _check_header(
    text: str, tokens: list[Token], trusted: TrustedHeader, policy: Policy, trusted_scope: bool
) -> tuple[int, list[str]]:
    """Where the body starts, and the header's `open` and `set_option` lines in order, as they run (an option's value
    at most its bound)."""
    header_lines: list[str] = []
    modules: list[Token] = []
    k = 0
    while k < len(tokens) and tokens[k].text in HEADER_WORDS and tokens[k].line_start:
        line_end = k + 1
        while line_end < len(tokens) and not tokens[line_end].line_start:
            line_end += 1
        line = tokens[k:line_end]
        if any(t.text == "in" for t in line):
            break  # `open … in` / `set_option … in`: the prefix of the first declaration
        word = tokens[k].text
        if word == "import":
            if len(line) != 2 or line[1].kind != "ident":
                raise PrecheckError("an `import` line", tokens[k].start, " holds one module name")
            modules.append(line[1])
        elif word == "set_option":
            if len(line) != 3 or line[1].kind != "ident":
                raise PrecheckError("a `set_option` line", tokens[k].start, " is `set_option NAME VALUE`")
            if trusted_scope and ".".join(line[1].components) not in RESOURCE_OPTIONS:
                raise PrecheckError(
                    f"`set_option {line[1].text}`",
                    line[1].start,
                    f": under a trusted statement a file's header may only set {', '.join(sorted(RESOURCE_OPTIONS))}"
                    " (they bound Lean's work, not what the statement means)",
                )
            value = rules.check_option(line[1], line[2], policy, clamp=True)
            header_lines.append(f"set_option {line[1].text} {value}")
        else:
            _check_open_line(line, policy, trusted, trusted_scope)
            header_lines.append(text[line[0].start : line[-1].end])
        k = line_end
    for module in modules:
        if ".".join(module.components) not in trusted.modules:
            raise PrecheckError(
                f"`import {module.text}`",
                module.start,
                f": a file imports only the trusted header's modules ({', '.join(sorted(trusted.modules)) or 'none'}), "
                "which the REPL loads whatever the file lists",
            )
    if k == len(tokens):
        raise PrecheckError("the file declares no theorem: expected `theorem NAME … := by` after the imports")
    body_start = text.rfind("\n", 0, tokens[k].start) + 1
    return body_start, header_lines


def _check_open_line(line: list[Token], policy: Policy, trusted: TrustedHeader, trusted_scope: bool) -> None:
    if trusted_scope:
        names = line[1:]
        if not names or any(t.kind != "ident" or ".".join(t.components) not in trusted.opens for t in names):
            raise PrecheckError(
                f"`open {' '.join(t.text for t in names)}`",
                line[0].start,
                ": under a trusted statement a file's header may only open namespaces the trusted header opens "
                f"({', '.join(sorted(trusted.opens)) or 'none'})",
            )
        return
    rules.check_code(line, policy, Scopes(), prefixes_need_in=False)


# ---------------------------------------------------------------- declarations


def _declarations(tokens: list[Token], policy: Policy) -> list[_Declaration]:
    """The body's declarations in order, each with its tactic blocks; raises where something else stands."""
    if not tokens:
        raise PrecheckError("the file declares no theorem: expected `theorem NAME … := by` after the imports")
    declarations: list[_Declaration] = []
    closers = bracket_pairs(tokens)
    k = 0
    while k < len(tokens):
        first = k
        attributes_end = _skip_attributes(tokens, k, policy)
        k = _skip_modifiers(tokens, attributes_end)
        keyword = tokens[min(k, len(tokens) - 1)]
        if keyword.text not in HELPER_KEYWORDS | MAIN_KEYWORDS:
            rules.check_code(tokens[first : k + 2], policy, Scopes())  # a command's own reason, where it has one
            raise PrecheckError(
                f"`{keyword.text}`",
                keyword.start,
                ": a complete file's body is helper `theorem`/`lemma`/`def` declarations and then the main theorem, "
                "each at column 0, preceded only by comments, attributes, modifiers and `open … in`/`set_option … in`",
            )
        if keyword.text != "example" and (k + 1 >= len(tokens) or tokens[k + 1].kind != "ident"):
            raise PrecheckError(f"`{keyword.text}`", keyword.start, " has no name")
        end = _declaration_end(tokens, k, policy)
        assign = _signature_end(tokens, k, end)
        layout, value, i = _declaration_layout(tokens, k, assign, end, closers)
        if i < end:
            raise PrecheckError(
                f"`{tokens[i].text}`",
                tokens[i].start,
                f" ends the `{keyword.text}` (Lean reads what follows as commands): indent it under the proof",
            )
        proof = value if tokens[assign + 1].text == "by" else []
        declarations.append(_Declaration(first, attributes_end, k, assign, end, layout, proof))
        k = end
    return declarations


def _declaration_layout(
    tokens: list[Token], keyword: int, assign: int, end: int, closers: list[int]
) -> tuple[ProofLayout, list[Node], int]:
    """The tactic blocks of the declaration at `keyword`, those of its value, and the index after its value and
    suffix.

    The signature and a term value are terms (their `by` blocks are tactic blocks); Lean checks no column in them
    against the declaration's (block column -1), and a `:= by` block ends the declaration but for its suffix
    (`where`, `termination_by`, `decreasing_by`)."""
    signature_parser = LayoutParser(tokens, assign)
    signature, _ = signature_parser.operand(keyword, -1, False, False, "tactic", term=True)
    parser = LayoutParser(tokens, end)
    if assign + 1 < end and tokens[assign + 1].text == "by":
        value, i = parser.sequence(assign + 2, -1, False, False, "tactic")
    elif assign + 1 < end:
        node, i = parser.operand(assign + 1, -1, False, False, "tactic", term=True)
        value = node.children
    else:
        raise PrecheckError(f"the `{tokens[keyword].text}`", tokens[keyword].start, " has no value after `:=`")
    layout = ProofLayout(tokens, signature.children + value, i, closers=closers)
    if i < end and tokens[i].text in SUFFIX_WORDS:
        layout.suffix_tactics, i = parser.declaration_suffix(i)
    parser.record_in(layout)
    layout.arrow_ends.update(signature_parser.arrow_ends)
    return layout, value, i


def _declaration_end(tokens: list[Token], keyword: int, policy: Policy) -> int:
    """Where the declaration at `keyword` ends: the next line that starts at column 0 with a command word, or, past
    the signature's top-level `:=`, any line at column 0 (a term or `by` block never continues there). Before the
    `:=` a column-0 line goes on (binders and the type may start there); after the body, the suffix words go on."""
    depth, bindings, past_signature = 0, 0, False
    for j in range(keyword + 1, len(tokens)):
        token = tokens[j]
        if token.line_start and token.column == 0 and token.text not in SUFFIX_WORDS:
            if past_signature or _starts_command(token, policy):
                return j
        depth += (token.text in OPENERS) - (token.text in CLOSERS)
        if depth == 0 and token.text in ("let", "have", "letI", "haveI"):
            bindings += 1  # its `:=` is not the signature's (`theorem t : (let a := 2; a) = 2`)
        elif depth == 0 and token.text == ":=":
            past_signature = past_signature or bindings == 0
            bindings = max(bindings - 1, 0)
    return len(tokens)


def _starts_command(token: Token, policy: Policy) -> bool:
    return token.text in HELPER_KEYWORDS | MAIN_KEYWORDS | MODIFIERS | HEADER_WORDS | policy.commands or token.text in (
        "@[",
        "#",
    )


def _skip_attributes(tokens: list[Token], k: int, policy: Policy) -> int:
    """The index after the attributes (`@[simp] @[norm_cast]`) from `k`, each held to the allow-list."""
    while k < len(tokens) and tokens[k].text == "@[":
        close = next((j for j in range(k + 1, len(tokens)) if tokens[j].text == "]"), len(tokens))
        _check_attributes(tokens[k + 1 : close], policy)
        k = close + 1
    return k


def _skip_modifiers(tokens: list[Token], k: int) -> int:
    """The index of the declaration keyword after the modifiers and `open … in`/`set_option … in` prefixes from
    `k` (the prefixes are held to the rules with the rest of the declaration)."""
    while k < len(tokens):
        token = tokens[k]
        if token.text in MODIFIERS:
            k += 1
        elif token.text in ("open", "set_option"):
            in_at = next(
                (j for j in range(k, len(tokens)) if tokens[j].text == "in" or tokens[j].line_start and j > k), None
            )
            if in_at is None or tokens[in_at].text != "in":
                raise PrecheckError(f"`{token.text}`", token.start, " before a declaration is an `… in` prefix here")
            k = in_at + 1
        else:
            return k
    return k


def _check_attributes(names: list[Token], policy: Policy) -> None:
    allowed = policy.attributes | {"local", "scoped", ",", "←", "<-"}
    for k, token in enumerate(names):
        priority = token.kind == "number" and k > 0 and names[k - 1].text in ("simp", "ext")  # `@[simp 1100]`
        if token.text not in allowed and not priority:
            raise PrecheckError(
                f"attribute `{token.text}`",
                token.start,
                f": a declaration may carry only {', '.join(sorted(policy.attributes))} (they register no code)",
            )


def _check_declaration(
    tokens: list[Token],
    declaration: _Declaration,
    is_main: bool,
    policy: Policy,
    trusted_names: frozenset[str],
) -> None:
    keyword = tokens[declaration.keyword]
    allowed = HELPER_KEYWORDS | MAIN_KEYWORDS if is_main else HELPER_KEYWORDS
    if keyword.text not in allowed:
        raise PrecheckError(
            f"`{keyword.text}`", keyword.start, " before the main theorem: helpers are `theorem`, `lemma` or `def`"
        )
    if is_main and keyword.text == "def":
        raise PrecheckError("`def`", keyword.start, ": the file's last declaration is the main theorem")
    name = declaration.name(tokens)
    if keyword.text == "def" and len(_root_stripped(name)) > 1:
        # A definition inside a namespace could be what a configuration's `.name` value finds there.
        raise PrecheckError(
            f"the `def` `{name.text}`", name.start, " has a namespace: a file's `def`s are named plainly"
        )
    trace_heads = rules.check_tactics(declaration.layout, policy)
    rules.check_local_definitions(declaration.layout, declaration.first, declaration.end)
    signature = frozenset(signature_binders(tokens[declaration.keyword : declaration.assign]))
    scopes = read_scopes(declaration.layout, policy.bindable, signature, declaration.first, declaration.end)
    # The modifiers and prefixes before the keyword; then everything after it, where no command word may stand.
    rules.check_code(
        tokens[declaration.attributes_end : declaration.keyword],
        policy,
        scopes,
        allowed_words=MODIFIERS,
        trusted_names=trusted_names,
    )
    after = declaration.keyword + 1
    rules.check_code(
        tokens[after : declaration.end], policy, scopes, trusted_names=trusted_names, trace_heads=trace_heads
    )


def _main_by(tokens: list[Token], main: _Declaration) -> int:
    """The index of the `by` after the main theorem's top-level `:=`."""
    if tokens[main.assign + 1].text != "by":
        raise PrecheckError(
            "`:=`",
            tokens[main.assign].start,
            f" ends the main `{tokens[main.keyword].text}` in term mode: prove it in tactic mode (`:= by` and tactics)",
        )
    return main.assign + 1


def _signature_end(tokens: list[Token], keyword: int, end: int) -> int:
    """The index of the top-level `:=` ending the signature of the declaration at `keyword` (not one in brackets or
    of a `let`/`have` in the statement), before `end`."""
    depth, bindings = 0, 0
    for k in range(keyword + 1, end):
        text = tokens[k].text
        depth += (text in OPENERS) - (text in CLOSERS)
        if depth == 0 and text in ("let", "have", "letI", "haveI"):
            bindings += 1
        elif depth == 0 and text == ":=":
            if not bindings:
                return k
            bindings -= 1
    raise PrecheckError(
        f"the `{tokens[keyword].text}`", tokens[keyword].start, " has no top-level `:=`: write `… := by` and tactics"
    )


def _noncomputable_at(tokens: list[Token], helper: _Declaration) -> int | None:
    """Where `noncomputable` goes before a helper `def` (before `nonrec`, else the keyword), or None."""
    if tokens[helper.keyword].text != "def":
        return None
    modifiers = [t.text for t in tokens[helper.first : helper.keyword]]
    if "noncomputable" in modifiers:
        return None
    return helper.keyword - 1 if modifiers[-1:] == ["nonrec"] else helper.keyword


def _root_stripped(token: Token) -> tuple[str, ...]:
    components = token.components
    return components[1:] if components[:1] == ("_root_",) and len(components) > 1 else components


def _check_names(tokens: list[Token], helpers: list[_Declaration], main: _Declaration) -> None:
    seen: set[str] = set()
    for declaration in [*helpers, main]:
        name = declaration.name(tokens)
        if name is None:
            continue
        declared = declared_name(name)
        if declared in seen:
            raise PrecheckError(f"`{name.text}`", name.start, " is declared twice in the file: rename one")
        seen.add(declared)


# ---------------------------------------------------------------- the trusted statement


def _trusted_statement(statement) -> list[Token]:
    if not isinstance(statement, str):
        raise TypeError(f"FileRequest.statement must be a str or None, got {type(statement).__name__}")
    tokens = trusted_statement_tokens(statement, "FileRequest.statement")
    keywords = [k for k, t in enumerate(tokens) if t.text in ("theorem", "lemma")]
    if not keywords or keywords[-1] + 1 >= len(tokens) or tokens[keywords[-1] + 1].kind != "ident":
        raise PrecheckError(
            "FileRequest.statement must be the dataset's `theorem NAME … := by`; got " + repr(statement.strip()[:80])
        )
    return tokens


# Postfix notations that read differently glued to the token before.
_POSTFIX = frozenset({"'", "!", "⁻¹", "ᶜ", "†", "²", "³"})


def _units(tokens: list[Token], keyword: int) -> list[tuple[str, bool]]:
    """What Lean reads of the tokens from the declaration keyword on: each text (`lemma` as `theorem`, the name as
    declared) and, where spacing can change Lean's reading, whether it touches the token before."""
    units = [(t.text, k > 0 and _touches(tokens[k - 1], t)) for k, t in enumerate(tokens)][keyword:]
    units[0] = ("theorem", False)
    units[1] = (declared_name(tokens[keyword + 1]), False)
    return units


def _touches(before: Token, token: Token) -> bool:
    """Whether `token` touches `before` where that can change what Lean reads: `x.1` is not `x .1`, `f(x)` not
    `f (x)`, `n!` not `n !`, and two symbols may form another notation; `(2:ℕ)` and `(2 : ℕ)` read alike."""
    if before.end != token.start:
        return False
    if token.text.startswith(".") or token.text in _POSTFIX:
        return True
    if token.text in OPENERS:
        return before.kind in ("ident", "number") or before.text in CLOSERS
    if before.kind == "symbol" and token.kind == "symbol":
        return before.text not in OPENERS and token.text not in CLOSERS
    return before.kind == "number" and token.kind == "ident"


def _prefixes(tokens: list[Token], first: int, keyword: int) -> list[list[str]]:
    """The `open … in` / `set_option … in` prefixes before a keyword, resource options left out."""
    prefixes, current = [], []
    for token in tokens[first:keyword]:
        if token.text in MODIFIERS and not current:
            continue
        current.append(token.text)
        if token.text == "in":
            if not (current[0] == "set_option" and current[1] in RESOURCE_OPTIONS):
                prefixes.append(current)
            current = []
    return prefixes


def _check_against_statement(
    tokens: list[Token], main: _Declaration, helpers: list[_Declaration], statement: list[Token]
) -> None:
    keyword = max(k for k, t in enumerate(statement) if t.text in ("theorem", "lemma"))
    expected = _units(statement, keyword)
    found = _units(tokens[: main.assign + 2], main.keyword)
    spelled = statement[keyword:]
    shown = "".join(t.text if k == 0 or spelled[k - 1].end == t.start else " " + t.text for k, t in enumerate(spelled))
    shown = shown[:_STATEMENT_PREVIEW]
    if tokens[main.keyword].text == "example" or found[1] != expected[1]:
        at = tokens[main.keyword + (0 if tokens[main.keyword].text == "example" else 1)]
        raise PrecheckError(
            f"the file's main theorem `{at.text}`", at.start, f" is not the trusted statement's: state it as `{shown}`"
        )
    if found != expected:
        mismatch = next(
            (k for k, (a, b) in enumerate(zip(found, expected, strict=False)) if a != b), min(len(found), len(expected))
        )
        at = tokens[min(main.keyword + mismatch, len(tokens) - 1)]
        raise PrecheckError(
            f"the main theorem does not state the trusted statement: it differs at `{at.text}`",
            at.start,
            f"; expected `{shown}`",
        )
    if _prefixes(tokens, main.first, main.keyword) != _prefixes(statement, 0, keyword):
        raise PrecheckError(
            "the main theorem's `open … in` / `set_option … in` prefixes",
            tokens[main.first].start,
            " are not the trusted statement's: they could change what its names mean",
        )
    used = {part for t in statement if t.kind == "ident" for part in t.components}
    for helper in helpers:
        name = helper.name(tokens)
        if name is not None and _root_stripped(name)[-1] in used:
            raise PrecheckError(
                f"the helper `{name.text}`", name.start, " declares a name the trusted statement uses: rename it"
            )
