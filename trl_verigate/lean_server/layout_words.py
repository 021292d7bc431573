"""The words and symbols that shape a Lean 4 proof's layout, as the tactic splitter (tactics.py) reads them.

Which tokens open or close brackets, start commands, continue the previous line's tactic, leave a tactic unfinished,
take a tactic sequence, or belong to a declaration's suffix. The precheck (precheck.py) refuses the command words
anywhere in a proof and counts bracket depth with the same sets.
"""

from __future__ import annotations

# Brackets, inside which Lean turns layout off; the precheck counts bracket depth with the same sets.
OPENERS = frozenset("([{⟨⦃⟦‹⌊⌈⟪")
CLOSERS = frozenset(")]}⟩⦄⟧›⌋⌉⟫")
# Keywords of a declaration's suffix (Lean's `Termination.suffix` and `whereDecls`): `termination_by` and
# `decreasing_by` after the body of the theorem, of a `where` declaration or of a `let rec`, and `where` after the
# theorem's body. No tactic or term contains them, so wherever they stand the tactic (and its block) has ended.
TERMINATION_WORDS = frozenset({"termination_by", "termination_by?", "decreasing_by"})
SUFFIX_WORDS = TERMINATION_WORDS | {"where"}
# The only tokens that change a tactic's structure in the middle of a line; the rest just extend it.
STRUCTURAL = OPENERS | CLOSERS | SUFFIX_WORDS | {";", "<;>", ",", "|", "=>", "by", "fun", "λ", "match", "calc"}
# Combinators whose argument is a whole tactic sequence (Lean: `"try " tacticSeq`), so `try simp; ring`
# tries both tactics.
SEQUENCE_PREFIXES = frozenset(
    {
        "try",
        "repeat",
        "repeat'",
        "iterate",
        "all_goals",
        "any_goals",
        "focus",
        "classical",
        "fail_if_success",
        "with_reducible",
        "with_reducible_and_instances",
        "with_unfolding_all",
        "unhygienic",
    }
)
# Brackets that hold tactics when they start one: `(tac; tac)`, `{ tac; tac }`, and Batteries' split focus
# `t <;> [t1; t2]`, whose `;`-separated tactics run on the goals `t` made, one each.
TACTIC_BRACKETS = {"(": ")", "{": "}", "[": "]"}
# Tactics whose `=>` opens a tactic sequence.
ARROW_HEADS = frozenset({"case", "case'", "next", "on_goal", "conv", "conv_lhs", "conv_rhs"})
# Tactics with `| pattern => tactics` alternatives.
ALTERNATIVE_HEADS = frozenset({"match", "induction", "cases", "fun_induction", "fun_cases"})
# Tactics in which `|` separates patterns rather than ending an enclosing alternative.
PATTERN_HEADS = frozenset({"rcases", "obtain", "rintro", "cases'", "induction'", "case", "case'"})
# Tactics that cannot be a `calc` step even though they contain `:=`.
NOT_CALC_STEP = frozenset({"have", "let", "obtain", "set", "show", "suffices", "replace", "haveI", "letI", "calc"})
# Command keywords: the words that start commands of Lean, Batteries, Aesop and Mathlib, or modify one. Lean parses a
# command wherever the tactic parser stops, at any column, so the splitter ends a tactic block at one that starts a
# line, and the precheck (precheck.py) refuses any of them in a proof: it left its `by` block or adds
# syntax/declarations.
COMMAND_WORDS = frozenset(
    {
        "theorem", "lemma", "def", "abbrev", "instance", "structure", "class", "inductive", "coinductive",
        "example", "namespace", "section", "end", "mutual", "import", "axiom", "axioms", "opaque", "constant",
        "macro", "macro_rules", "syntax", "declare_syntax_cat", "elab", "elab_rules", "notation", "infix",
        "infixl", "infixr", "prefix", "postfix", "attribute", "local", "scoped", "variable", "universe",
        "noncomputable", "partial", "unsafe", "private", "protected", "initialize", "builtin_initialize",
        "export", "omit", "include", "deriving", "alias", "irreducible_def", "proof_wanted", "add_decl_doc",
        "run_cmd", "run_tac", "run_elab", "run_meta", "by_elab", "implemented_by", "extern",
        # What may follow a declaration's body, so a proof that reaches them has closed its `by` block.
        "where", "termination_by", "termination_by?", "decreasing_by", "partial_fixpoint", "inductive_fixpoint",
        "coinductive_fixpoint",
        # Commands of Lean, Batteries, Aesop and Mathlib that run or register metaprograms, or change the
        # environment, without one of the words above.
        "simproc", "dsimproc", "simproc_decl", "dsimproc_decl", "builtin_simproc", "builtin_dsimproc",
        "add_aesop_rules", "erase_aesop_rules", "declare_aesop_rule_sets", "register_simp_attr",
        "register_label_attr", "register_option", "register_builtin_option", "grind_pattern", "init_quot", "seal",
        "unseal", "count_heartbeats", "whatsnew", "compile_inductive", "compile_def", "suppress_compilation",
        "unsuppress_compilation", "library_note", "assert_not_exists", "declare_config_elab",
        "declare_command_config_elab", "declare_simp_like_tactic", "notation3", "binder_predicate", "recall",
        "register_hint", "initialize_simps_projections", "mk_iff_of_inductive_prop", "set_premise_selector",
        "add_tactic_doc", "deprecate", "to_additive_ignore_args", "insert_to_additive_translation",
        "register_error_explanation", "recommended_spelling", "variable?", "assert_not_imported", "unif_hint",
        "grind_propagator", "builtin_grind_propagator", "builtin_simproc_decl", "init_grind_norm", "test_extern",
        "register_tactic_tag", "tactic_extension", "register_parser_alias", "set_library_suggestions",
        # Commands spelled with a `%` suffix, which is a token of its own (`gen_injective_theorems% Nat`).
        "gen_injective_theorems", "reset_grind_attrs", "simproc_pattern",
    }
)  # fmt: skip
# A proof body never continues past these at the block's column: they can only start a new command (`#` starts
# `#eval`, `#exit`, … , which the splitter's tokenizer splits off).
BLOCK_ENDING_WORDS = COMMAND_WORDS | {"#"}
# Tokens that continue the previous line's tactic when they start a line: trailing (infix) parsers and
# keywords that no tactic starts with.
CONTINUATIONS = frozenset(
    {
        "$", "%", "*", "+", "-", "->", "/", ":=", "<", "<->", "<;>", "<|", "<|>", "=", "=>", ">", "^", "at", "else",
        "from", "generalizing", "then", "using", "with", "|", "|>", "|>.", "×", "•", "→", "↔", "∈", "∉", "∘", "∣",
        "∧", "∨", "∩", "∪", "≠", "≡", "≤", "≥", "⊂", "⊆", "▸",
    }
)  # fmt: skip
# Tokens after which the tactic is unfinished: Lean's parser takes the next token whatever its column. Each
# continuation is one (an infix operator needs its right operand), plus tactic heads and prefix operators that need
# an argument. Only tokens that always need more belong here: a finished tactic read on into the next line would
# hide that line from the precheck (`simp only`, and `*` in `at *`, are finished; see `_Parser._expects_more` in tactics.py).
EXPECTS_MORE = CONTINUATIONS | frozenset(
    {
        "apply", "by_cases", "calc", "case", "case'", "cases", "change", "clear", "convert", "convert_to", "erw",
        "exact", "exacts", "exists", "existsi", "first", "fun", "generalize", "have", "haveI", "if", "in",
        "induction", "injection", "let", "letI", "match", "next", "nth_rewrite", "nth_rw", "obtain", "on_goal",
        "rcases", "refine", "refine'", "replace", "revert", "rewrite", "rintro", "rw", "rwa", "set", "show",
        "simp_rw", "specialize", "subst", "suffices", "unfold", "use", "λ",
        ",", ":", "<-", "@", "¬", "←", "↑", "∀", "∃", "∏", "∑", "√",
    }
)  # fmt: skip
# Words that cannot name a `where` declaration: keywords to Lean, or tokens the splitter gives a structure.
NOT_DECLARATION_NAMES = (
    BLOCK_ENDING_WORDS
    | STRUCTURAL
    | EXPECTS_MORE
    | SEQUENCE_PREFIXES
    | ARROW_HEADS
    | ALTERNATIVE_HEADS
    | PATTERN_HEADS
    | {"rec", "only"}
)
