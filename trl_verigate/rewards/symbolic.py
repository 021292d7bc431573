"""`SymbolicStepScorer` (``prm_type="symbolic"``): step scores without a model, from the numeric relations a step
writes (``3 * 4 = 12``, ``2 < 3 < 4``, simple LaTeX), each checked exactly with SymPy."""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction

from trl_verigate.rewards.step_scorer import check_step_inputs

__all__ = ["SymbolicStepScorer"]

_RELATION = re.compile(r"(<=|>=|!=|==|=|<|>)")
_TOKEN = re.compile(
    r"(?P<num>\d+(?:\.\d+)?|\.\d+)"
    r"|(?P<fn>(?<![^\W\d_])(?:sqrt|pi)(?![^\W\d_]))"
    r"|(?P<op>\*\*|[-+*/])"
    r"|(?P<lp>\()|(?P<rp>\))"
    r"|(?P<ws>[ \t]+)"
    r"|(?P<word>[^\W\d_]+)"
    r"|(?P<other>.)",
    flags=re.DOTALL,
)
_EXPRESSION_KINDS = {"num", "fn", "op", "lp", "rp", "ws"}
# Words before a number that make it the end of a longer operand ("half of 10 = 5", "6 times 7 = 42"), so the
# number alone is not the left side. "and" is allowed only right after a checked relation ("2 + 2 = 4 and 3 * 3 = 9").
_LEFT_OPERAND_WORDS = {
    "of", "and", "times", "by", "plus", "minus", "over", "divided", "multiplied", "than", "from", "add", "adding",
    "added", "subtract", "subtracting", "subtracted", "multiply", "multiplying", "divide", "dividing", "sum",
    "product", "difference", "quotient", "between", "with", "to", "into", "per", "root", "half", "twice", "double",
    "triple", "log", "ln", "sin", "cos", "tan", "exp", "mod", "modulo", "least", "most", "at",
}  # fmt: skip
# Words after a number that make it part of a longer operand ("= 3 times 4"), so the number alone is not the value.
_OPERAND_WORDS = {
    "times", "of", "plus", "minus", "divided", "multiplied", "over", "squared", "cubed", "to", "more", "less",
    "fewer", "percent", "raised", "mod", "modulo", "factorial",
}  # fmt: skip
# Characters glued to a number that bind it to something unseen: subscripts, powers, factorials, primes.
_BINDING_CHARS = set("_^!'")
_MAX_EXPONENT = 10_000
_MAX_RESULT_DIGITS = 1_000
_MAX_OPERAND_TOKENS = 64
_MAX_RELATIONS_PER_STEP = 64
_MAX_STEP_CHARS = 20_000

_LATEX_REWRITES = [
    (re.compile(r"\\left|\\right|\\[,;:! ]|\\q?quad(?![A-Za-z])|\\displaystyle"), " "),
    (re.compile(r"\\(?:text|mathrm|textbf|mathbf|operatorname)\s*\{([^{}]*)\}"), r" \1 "),
    (re.compile(r"\\boxed(?![A-Za-z])"), " "),
    (re.compile(r"\\(?:times|cdot|ast)(?![A-Za-z])|[×·∗⋅]"), "*"),
    (re.compile(r"\\div(?![A-Za-z])|÷"), "/"),
    (re.compile(r"\\(?:leq?|leqslant)(?![A-Za-z])|≤|⩽"), "<="),
    (re.compile(r"\\(?:geq?|geqslant)(?![A-Za-z])|≥|⩾"), ">="),
    (re.compile(r"\\(?:neq?)(?![A-Za-z])|≠"), "!="),
    (re.compile(r"\\lt(?![A-Za-z])"), "<"),
    (re.compile(r"\\gt(?![A-Za-z])"), ">"),
    (re.compile(r"\\pi(?![A-Za-z])|π"), " pi "),
    (re.compile(r"[−–]"), "-"),
    (re.compile(r"²"), "^2"),
    (re.compile(r"³"), "^3"),
]
_FRACTION = re.compile(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_SHORT_FRACTION = re.compile(r"\\[dt]?frac\s*(\d)\s*(\d)")
_ROOT = re.compile(r"\\sqrt\s*\[([^\[\]{}]*)\]\s*\{([^{}]*)\}")
_SQRT = re.compile(r"\\sqrt\s*\{([^{}]*)\}")
_SHORT_SQRT = re.compile(r"(?:\\sqrt|√)\s*(\d+(?:\.\d+)?)")
_THOUSANDS = re.compile(r"(\d),(\d{3})(?!\d)")
_PERCENT = re.compile(r"(\d+(?:\.\d+)?)\s*\\?%")


def _normalize(text: str) -> str:
    """Rewrite simple LaTeX and Unicode math into plain arithmetic (``\\frac{1}{2}`` -> ``((1)/(2))``)."""
    text = re.sub(r"\$|\\\(|\\\)|\\\[|\\\]", " ", text)
    for pattern, replacement in _LATEX_REWRITES:
        text = pattern.sub(replacement, text)
    # Innermost first, repeatedly, so nested fractions and roots unfold.
    previous = None
    while previous != text:
        previous = text
        text = _FRACTION.sub(r"((\1)/(\2))", text)
        text = _ROOT.sub(r"((\2)^(1/(\1)))", text)
        text = _SQRT.sub(r"sqrt(\1)", text)
        text = _THOUSANDS.sub(r"\1\2", text)
    text = _SHORT_FRACTION.sub(r"((\1)/(\2))", text)
    text = _SHORT_SQRT.sub(r"sqrt(\1)", text)
    text = text.replace("√(", "sqrt(")
    text = _PERCENT.sub(r"(\1/100)", text)
    # Unknown commands (\approx, \implies, \alpha, ...) become barriers that no operand can extend across.
    text = re.sub(r"\\[A-Za-z]+", " ; ", text)
    return text.replace("{", "(").replace("}", ")").replace("^", "**")


def _tokenize(text: str) -> list[tuple[str, str]]:
    return [(match.lastgroup, match.group()) for match in _TOKEN.finditer(text)]


def _previous_token(tokens, index):
    """The token before `index` and whether whitespace separates them."""
    index -= 1
    spaced = False
    while index >= 0 and tokens[index][0] == "ws":
        index -= 1
        spaced = True
    return (tokens[index] if index >= 0 else None), spaced


def _next_token(tokens, index):
    spaced = False
    while index < len(tokens) and tokens[index][0] == "ws":
        index += 1
        spaced = True
    return (tokens[index] if index < len(tokens) else None), spaced


def _left_operand(tokens, previous_right_end: int | None) -> list | None:
    """The numeric expression that ends a piece of text, or None when it is not a standalone numeric operand.

    `previous_right_end` is where the right side of the previous relation ended in this piece, if it was read.
    """
    start = len(tokens)
    while start > 0 and tokens[start - 1][0] in _EXPRESSION_KINDS:
        start -= 1
    while start < len(tokens) and tokens[start][0] == "ws":
        start += 1
    operand = tokens[start:]
    # Unmatched opening brackets belong to an enclosing group ("(3 + 4 = 7)"), not to the operand.
    while operand and operand[0][0] == "lp" and _depth(operand) > 0:
        operand = operand[1:]
        start += 1
    if not operand or operand[0][0] == "op" and operand[0][1] != "-":
        return None
    if _is_ratio_colon(tokens, _non_space_index(tokens, start - 1, -1)):
        return None
    before, spaced = _previous_token(tokens, start)
    if before is not None:
        kind, value = before
        word = value.lower() if kind == "word" else None
        joins_relations = (
            word == "and" and previous_right_end is not None and _only_separators(tokens, previous_right_end)
        )
        # Single letters are variables or an "x" for times; other listed words make the number part of a phrase.
        if value in _BINDING_CHARS or word and (not spaced or len(word) == 1 or word in _LEFT_OPERAND_WORDS):
            if not joins_relations:
                return None
    return operand


def _only_separators(tokens, start: int) -> bool:
    """Whether only whitespace, commas or semicolons lie between `start` and the first word at or after it."""
    for kind, value in tokens[start:]:
        if kind == "word":
            return True
        if kind != "ws" and value not in ",;":
            return False
    return False


def _right_operand(tokens) -> tuple[list | None, int]:
    """The numeric expression that starts a piece of text (None when it is not a standalone numeric operand), and
    the index of the token after it."""
    end = 0
    while end < len(tokens) and tokens[end][0] in _EXPRESSION_KINDS:
        end += 1
    while end > 0 and tokens[end - 1][0] == "ws":
        end -= 1
    operand = tokens[:end]
    while operand and operand[0][0] == "ws":
        operand = operand[1:]
    while operand and operand[-1][0] == "rp" and _depth(operand) < 0:
        operand = operand[:-1]
        end -= 1
    if not operand or operand[-1][0] == "op" or _is_ratio_colon(tokens, _non_space_index(tokens, end, 1)):
        return None, end
    after, spaced = _next_token(tokens, end)
    if after is not None:
        kind, value = after
        if value in _BINDING_CHARS or kind == "word" and (not spaced or value.lower() in _OPERAND_WORDS):
            return None, end
    return operand, end


def _non_space_index(tokens, index: int, step: int) -> int:
    """Index of the first non-whitespace token from `index` on, going by `step` (-1 or len(tokens) if none)."""
    while 0 <= index < len(tokens) and tokens[index][0] == "ws":
        index += step
    return index


def _is_ratio_colon(tokens, index: int) -> bool:
    """Whether tokens[index] is a colon that joins two numbers into a ratio or a time (``3:4``, ``3 : 4``, ``3:30``).

    A colon glued to the number before it and followed by a space ends a label (``Step 1: 3 + 4 = 7``) instead.
    """
    if not 0 <= index < len(tokens) or tokens[index][1] != ":":
        return False
    before = _non_space_index(tokens, index - 1, -1)
    after = _non_space_index(tokens, index + 1, 1)
    if before < 0 or after == len(tokens) or tokens[before][0] != "num" or tokens[after][0] != "num":
        return False
    return not (before == index - 1 and after > index + 1)


def _stands_alone_beside_ratio(tokens, index: int, glued: bool) -> bool:
    """Whether the token at `index`, next to a ratio (`glued`: nothing between them), leaves the ratio on its own
    rather than making it part of an expression (``2 + 3:4``), a longer ratio (``1:2:3``) or a word."""
    if not 0 <= index < len(tokens):
        return True
    kind, value = tokens[index]
    if kind in ("num", "op", "fn") or value in _BINDING_CHARS or value == ":":
        return False
    return not (glued and kind == "word")


def _left_ratio(tokens) -> tuple[str, str] | None:
    """The two-term ratio ``a:b`` that ends a piece of text, or None."""
    second = _non_space_index(tokens, len(tokens) - 1, -1)
    colon = _non_space_index(tokens, second - 1, -1)
    if second < 0 or tokens[second][0] != "num" or not _is_ratio_colon(tokens, colon):
        return None
    first = _non_space_index(tokens, colon - 1, -1)
    before = _non_space_index(tokens, first - 1, -1)
    if not _stands_alone_beside_ratio(tokens, before, glued=before == first - 1):
        return None
    return tokens[first][1], tokens[second][1]


def _right_ratio(tokens) -> tuple[tuple[str, str] | None, int]:
    """The two-term ratio ``a:b`` that starts a piece of text (or None), and the index of the token after it."""
    first = _non_space_index(tokens, 0, 1)
    colon = _non_space_index(tokens, first + 1, 1)
    if first == len(tokens) or tokens[first][0] != "num" or not _is_ratio_colon(tokens, colon):
        return None, first
    second = _non_space_index(tokens, colon + 1, 1)
    after = _non_space_index(tokens, second + 1, 1)
    if not _stands_alone_beside_ratio(tokens, after, glued=after == second + 1):
        return None, first
    return (tokens[first][1], tokens[second][1]), second + 1


def _ratios_equal(left: tuple[str, str], right: tuple[str, str]) -> bool | None:
    """Whether a:b = c:d, i.e. a*d = b*c exactly; None when a second term is zero (no ratio, or a time like 3:00)."""
    (a, b), (c, d) = ((Fraction(term) for term in ratio) for ratio in (left, right))
    if b == 0 or d == 0:
        return None
    return a * d == b * c


def _depth(tokens) -> int:
    return sum(1 for kind, _ in tokens if kind == "lp") - sum(1 for kind, _ in tokens if kind == "rp")


def _decimal_tolerance(operand) -> int | None:
    """Decimal places of an operand that is a single decimal literal (it may be a rounded value), else None."""
    values = [value for kind, value in operand if kind != "ws"]
    if len(values) == 2 and values[0] == "-":
        values = values[1:]
    if len(values) == 1 and "." in values[0]:
        return len(values[0].split(".")[1])
    return None


@functools.lru_cache(maxsize=4096)
def _evaluate(expression: str):
    """Exact SymPy value of a plain arithmetic expression, or None when it is malformed or too large to compute."""
    import sympy
    from sympy.parsing.sympy_parser import parse_expr

    # Numbers become exact rationals so that 0.1 + 0.2 = 0.3 holds; only digits, operators, brackets, sqrt and pi
    # reach this point, so parse_expr evaluates nothing but arithmetic.
    exact = re.sub(r"\d+(?:\.\d+)?|\.\d+", lambda match: f"Rational('{match.group()}')", expression)
    tree = parse_expr(exact, evaluate=False, local_dict={"sqrt": sympy.sqrt, "pi": sympy.pi})
    # Powers are checked bottom-up on cheap floating-point estimates before anything is computed exactly,
    # so 10**10**10 is rejected instead of hanging.
    for node in sympy.postorder_traversal(tree):
        if isinstance(node, sympy.Pow):
            exponent = abs(complex(sympy.N(node.exp, 15)))
            base = abs(complex(sympy.N(node.base, 15)))
            if not math.isfinite(exponent) or exponent > _MAX_EXPONENT:
                return None
            if base > 1 and exponent * math.log10(base) > _MAX_RESULT_DIGITS:
                return None
    value = tree.doit()
    if not value.is_number or value.is_real is not True or value.is_finite is not True:
        return None
    return value


def _relation_holds(left, relation: str, right) -> bool | None:
    import sympy

    left_value = _evaluate("".join(value for _, value in left))
    right_value = _evaluate("".join(value for _, value in right))
    if left_value is None or right_value is None:
        return None
    delta = left_value - right_value
    if not delta.is_Rational:
        # Irrational sides (sqrt, pi) are compared at 50 digits, far beyond any decimal written in a step.
        delta = sympy.N(delta, 50)
    if relation in ("=", "==", "!="):
        places = [p for p in (_decimal_tolerance(left), _decimal_tolerance(right)) if p is not None]
        # A decimal written with k places may be rounded: allow half a unit in its last place.
        tolerance = sympy.Rational(1, 2 * 10 ** max(places)) if places else sympy.Rational(1, 10**30)
        equal = abs(delta) <= tolerance
        return equal if relation != "!=" else not equal
    if relation == "<":
        return delta < 0
    if relation == ">":
        return delta > 0
    if relation == "<=":
        return delta <= 0
    return delta >= 0


def _check_relations(step: str) -> list[bool]:
    """Truth of every numeric relation in `step` that can be read unambiguously."""
    results = []
    for line in _normalize(step[:_MAX_STEP_CHARS]).splitlines():
        parts = _RELATION.split(line)
        pieces, relations = parts[0::2], parts[1::2]
        tokens = [_tokenize(piece) for piece in pieces]
        previous_right_end = None
        for index, relation in enumerate(relations[:_MAX_RELATIONS_PER_STEP]):
            left_ratio = _left_ratio(tokens[index])
            right_ratio, ratio_end = _right_ratio(tokens[index + 1])
            if left_ratio is not None or right_ratio is not None:
                # A ratio or a clock time (3:30) has no single value to compare with a number or order by; only an
                # equality of two ratios is checked. The numbers on either side of its colon are never operands.
                previous_right_end = ratio_end if right_ratio is not None else None
                if left_ratio is not None and right_ratio is not None and relation in ("=", "==", "!="):
                    equal = _ratios_equal(left_ratio, right_ratio)
                    if equal is not None:
                        results.append(equal if relation != "!=" else not equal)
                continue
            left = _left_operand(tokens[index], previous_right_end)
            right, right_end = _right_operand(tokens[index + 1])
            previous_right_end = right_end if right is not None else None
            if left is None or right is None or max(len(left), len(right)) > _MAX_OPERAND_TOKENS:
                continue
            try:
                holds = _relation_holds(left, relation, right)
            # Odd text must never break training: anything SymPy cannot handle is simply not checkable.
            except Exception:
                holds = None
            if holds is not None:
                results.append(bool(holds))
    return results


class SymbolicStepScorer:
    """Scores each step by the fraction of its numeric relations (``=``, ``<``, ``>=``, ``!=``, chains) that hold.

    Reads plain text (``3 * 4 = 12``, ``2 < 3 < 4``) and simple LaTeX (``\\frac{1}{2} = 0.5``, ``3 \\times 4``,
    ``\\sqrt{16}``, ``\\pi``). Only relations between numbers count; a side with a variable (``x + 3 = 5``), a
    number that is part of a longer phrase ("half of 10 = 5") or anything unparseable is left out, so a step is
    never marked wrong for what could not be read. A decimal with k places may be rounded (``1/3 = 0.33`` holds).
    A colon between numbers makes a ratio or a clock time: ``3:4 = 6:8`` is checked as 3 * 8 = 4 * 6, while a ratio
    or time against a number (``3:30 = 210 minutes``) or in an order is left out. Steps with nothing checkable get
    ``neutral_score``. Exponents are bounded before evaluation.
    """

    def __init__(self, neutral_score: float = 0.5):
        if not isinstance(neutral_score, (int, float)) or not 0.0 <= float(neutral_score) <= 1.0:
            raise ValueError(f"neutral_score must be a number in [0, 1], got {neutral_score!r}")
        self.neutral_score = float(neutral_score)

    def score(self, prompts: list[str], steps: list[list[str]]) -> list[list[float]]:
        check_step_inputs(prompts, steps)
        return [[self.score_step(step) for step in completion] for completion in steps]

    def score_step(self, step: str) -> float:
        results = _check_relations(step)
        return sum(results) / len(results) if results else self.neutral_score

    def __repr__(self) -> str:
        return f"SymbolicStepScorer(neutral_score={self.neutral_score})"
