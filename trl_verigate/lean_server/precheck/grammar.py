"""The grammar facts the layout reads Lean's tactic blocks by: which words open blocks, separate alternatives,
continue a line or end a block, each stated beside the token set that holds it (see `layout`)."""

from trl_verigate.lean_server.precheck.allowlists import listed_words
from trl_verigate.lean_server.precheck.brackets import CLOSERS

TERMINATION_WORDS = frozenset({"termination_by", "termination_by?", "decreasing_by"})
# A declaration's suffix (Lean's `Termination.suffix` and `whereDecls`): no tactic or term contains these words, so
# wherever they stand the tactic block has ended.
SUFFIX_WORDS = TERMINATION_WORDS | {"where"}
# Combinators whose argument is a whole tactic sequence (Lean: `"try " tacticSeq`), so `try simp; ring` tries both.
SEQUENCE_PREFIXES = frozenset(
    {
        "try", "repeat", "repeat'", "repeat1", "iterate", "all_goals", "any_goals", "focus", "classical",
        "fail_if_success", "fail_if_no_progress", "with_reducible", "with_reducible_and_instances",
        "with_unfolding_all", "with_unfolding_none", "unhygienic", "checkpoint", "repeat1'",
        # Mathlib: `elab "recover " tacs:tacticSeq`, `elab tk:"try_this" tac:tactic info:(str)?`; Batteries:
        # `macro "squeeze_scope " seq:tacticSeq`.
        "recover", "try_this", "squeeze_scope",
        # Lean core (Init/Tactics.lean, Init/Try.lean, Init/WFTactics.lean): `"show_term " tacticSeq`,
        # `"try_suggestions " tactic*`, `macro "decreasing_with " ts:tacticSeq`.
        "show_term", "try_suggestions", "decreasing_with",
    }
)  # fmt: skip
# Heads that take one raw syntax node, then a tactic (Lean core: `"with_annotate_state " rawStx ppSpace tactic`).
RAW_ARGUMENT_PREFIXES = frozenset({"with_annotate_state"})
# Heads whose `| tactics` alternatives are tactic sequences (Lean: `"first " withPosition((colGe "| " tacticSeq)+)`,
# and `solve`, `attempt_all`, `attempt_all_par`, `first_par` alike: Init/Tactics.lean, Init/Try.lean).
BAR_SEQUENCE_HEADS = frozenset({"first", "solve", "attempt_all", "attempt_all_par", "first_par"})
# The tactic `if c then tacticSeq else tacticSeq` (Lean: `tacIfThenElse`, `tacDepIfThenElse`): both branches are
# tactic sequences, the condition a term.
IF_HEAD = "if"
# Every leading atom of a `tactic` or `conv` syntax declared (generated): a `|` glued to one of them in an
# alternative may start a tactic or an abs `|x|`, which the layout cannot tell apart (see `LayoutParser._glued_bar`).
TACTIC_KEYWORDS = listed_words("tactic_keywords.txt")
# Heads whose bracketed list holds tactics, not terms: Batteries' `map_tacs [t1; t2]`
# (`"map_tacs " "[" sepBy(tactic, "; ") "]"`, Batteries/Tactic/SeqFocus.lean).
TACTIC_LIST_HEADS = frozenset({"map_tacs"})
# Prefixes whose sequence follows `in`: `set_option maxRecDepth 1000 in simp`.
IN_PREFIXES = frozenset({"set_option", "open"})
TACTIC_BRACKETS = {"(": ")", "{": "}", "[": "]"}
# Heads whose `=>` opens a tactic sequence, and the mode of that sequence ("same": the enclosing block's).
ARROW_HEADS = {
    "case": "same", "case'": "same", "next": "same", "on_goal": "same", "conv": "conv", "conv_lhs": "conv",
    "conv_rhs": "conv", "tactic": "tactic", "tactic'": "tactic",
    # Mathlib's conv `equals e => tacticSeq` and `discharge (" => " tacticSeq)?` (Mathlib/Tactic/Conv.lean).
    "equals": "tactic", "discharge": "tactic",
    # Lean core: `"as_aux_lemma" " => " tacticSeq` (Init/Tactics.lean).
    "as_aux_lemma": "same",
}  # fmt: skip
# Heads with `| pattern => tactics` alternatives (Lean's `intro` with match alternatives too: `introMatch`).
ALTERNATIVE_HEADS = frozenset({"match", "induction", "cases", "fun_induction", "fun_cases", "intro"})
# Heads whose `with` may be followed by a tactic run on every alternative (Lean: `inductionAlts := " with"
# (ppSpace colGt tactic)? withPosition((colGe inductionAlt)+)`).
PRE_TACTIC_HEADS = frozenset({"induction", "cases", "fun_induction", "fun_cases"})
# Heads whose `=>` may be followed by a hole instead of tactics (Lean's `inductionAlt`, `matchRhs`; Batteries'
# `casePattTac := " => " (hole <|> syntheticHole <|> tacticSeq)`).
HOLE_ARROW_HEADS = ALTERNATIVE_HEADS | {"case", "case'"}
# Binder notations whose binders end at a `,` (`∀ x, p`, `∑ i ∈ s, f i`): that `,` ends no tactic in brackets.
BINDER_SYMBOLS = frozenset({"∀", "∃", "∑", "∏", "⋃", "⋂", "⨆", "⨅", "∫", "∮", "Σ", "Π", "⨁", "∐"})
# Terms whose value may end in `;` before their body (`let x := v; body`): that `;` ends no tactic.
TERM_BINDINGS = frozenset({"let", "have", "letI", "haveI"})
# Heads in which `|` separates patterns rather than ending an enclosing alternative.
PATTERN_HEADS = frozenset({"rcases", "obtain", "rintro", "cases'", "induction'", "case", "case'"})
# Infix combinators of two tactics.
INFIX_COMBINATORS = frozenset({"<;>", "<|>", "says"})
# Tactics that take Aesop's clauses (`Aesop.tactic_clause*`: `(add …)`, `(erase …)`, `(rule_sets := …)`) and
# expand to `aesop`: Aesop/Frontend/Tactic.lean (`aesop`, `aesop?`), Mathlib's `aesop_cat` family
# (CategoryTheory/Category/Init.lean), `aesop_graph` (Combinatorics/SimpleGraph/Basic.lean), `aesop_mat`
# (Data/Matrix), `finiteness` (Tactic/Finiteness.lean), `arith_mult` (Tactic/ArithMult.lean), `restrict_tac`
# (Topology/Sheaves/Init.lean); the `?` forms alike.
AESOP_CLAUSE_HEADS = frozenset(
    {
        "aesop", "aesop?", "aesop_cat", "aesop_cat?", "aesop_cat_nonterminal", "aesop_graph", "aesop_graph?",
        "aesop_graph_nonterminal", "aesop_mat", "finiteness", "finiteness?", "finiteness_nonterminal",
        "arith_mult", "arith_mult?", "restrict_tac", "restrict_tac?",
    }
)  # fmt: skip
# `(NAME := …)` items whose value is a tactic sequence: `simp (disch := positivity)`, `linear_combination (norm :=
# ring_nf) e`.
TACTIC_VALUED_ITEMS = frozenset({"disch", "discharger", "norm"})
# Tokens that start a term and no tactic (or, for `(`, that Lean reads as a term first): a `calc` step at the block
# column must start with one of these or a number.
CALC_STEP_STARTS = frozenset({"_", "(", "⟨", "|", "↑", "-", "√", "∑", "∏", "¬"})
# Heads that cannot be a `calc` step even though they contain `:=`.
NOT_CALC_STEP = frozenset({"have", "let", "obtain", "set", "show", "suffices", "replace", "haveI", "letI", "calc"})
# Tokens that continue the previous line's tactic when they start a line: infix operators and keywords no tactic
# starts with.
CONTINUATIONS = frozenset(
    {
        "$", "%", "*", "+", "-", "->", "/", ":=", "<", "<->", "<;>", "<|>", "<|", "=", "=>", ">", "^", "at", "else",
        "from", "generalizing", "then", "using", "with", "|", "|>", "|>.", "×", "•", "→", "↔", "∈", "∉", "∘", "∣",
        "∧", "∨", "∩", "∪", "≠", "≡", "≤", "≥", "⊂", "⊆", "▸", "<=", ">=", "says",
    }
)  # fmt: skip
# A continuation token that may also end a tactic (`congr! with`, `convert e with`: the patterns are optional).
_OPTIONALLY_FOLLOWED = frozenset({"with"})
# (token, the token before it) pairs that end a tactic: `simp at *`, `clear *`, `clear * -`.
COMPLETE_ENDINGS = frozenset({("*", "at"), ("*", "clear"), ("-", "*")})
# Tokens after which a tactic is unfinished: Lean's parser requires an operand, so it takes the next token whatever its
# column. Only tokens whose operand Lean *requires* belong here. A line the layout reads as a continuation is never
# held to the tactic allow-list, so a token whose operand is optional (`obtain`, `rcases`, Mathlib's `have`, `let`,
# `suffices`, `replace`) would let the next line's tactic through unchecked: Lean parses the optional operand as
# empty and reads that line as a new tactic. Missing a token here only refuses an honest proof that breaks a line
# right after it.
EXPECTS_MORE = (CONTINUATIONS - _OPTIONALLY_FOLLOWED) | frozenset(
    {
        "apply", "by_cases", "calc", "case", "case'", "cases", "change", "convert", "convert_to", "erw", "exact",
        "exacts", "exists", "existsi", "first", "fun", "generalize", "if", "in", "induction", "injection", "match",
        "next", "nth_rewrite", "nth_rw", "on_goal", "refine", "refine'", "rewrite", "rw", "rwa", "set", "show",
        "simp_rw", "specialize", "use", "λ",
        ",", ":", "<-", "@", "¬", "←", "↑", "∀", "∃", "∏", "∑", "√",
    }
)  # fmt: skip
# Words that start a command: a tactic block never continues past one that starts a line.
BLOCK_ENDING_WORDS = frozenset(
    {
        "theorem", "lemma", "def", "abbrev", "instance", "structure", "class", "inductive", "example", "namespace",
        "section", "end", "mutual", "import", "axiom", "opaque", "macro", "macro_rules", "syntax", "elab",
        "elab_rules", "notation", "infix", "infixl", "infixr", "prefix", "postfix", "attribute", "variable",
        "universe", "noncomputable", "partial", "unsafe", "private", "protected", "initialize", "#",
    }
)  # fmt: skip
MAY_END_BLOCK = CLOSERS | BLOCK_ENDING_WORDS | SUFFIX_WORDS | {",", "|"}
