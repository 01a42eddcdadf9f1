"""The allow-list of what a formula may evaluate.

formulaic evaluates every Python piece of a formula (``np.log(x)``, ``I(x ** 2)``) with
``eval``: unchecked, ``I(np.lib._npyio_impl.os.system('...'))`` would run a shell command
and ``I(Days.to_csv('/path'))`` would write a file. Every expression that formulaic would
evaluate is parsed here with :mod:`ast` first, before anything is evaluated, and refused
unless every node is on the allow-list:

- column names (bare, dotted as R writes them, or backticked), numbers;
- arithmetic (``+ - * / // % **``, unary ``+``/``-``) and comparisons;
- the calls ``I()``, ``C()`` (contrasts and levels as literals), ``Q('column')``;
  ``log``, ``log2``, ``log10``, ``log1p``, ``exp``, ``exp2``, ``expm1``, ``sqrt``,
  ``abs``, ``round`` and their ``np.`` forms, ``np.square``, ``np.power``;
  formulaic's stateful transforms ``scale``, ``center`` and ``poly``;
- ``np.pi`` and ``np.e``.

``trusted=True`` (:func:`crossed.lmer`, :func:`crossed.parse`) skips the check.
"""

from __future__ import annotations

import ast
import functools
import keyword
import re
from collections.abc import Collection

import numpy as np

from crossed.formula.evaluate import dotted, expression_tree, sanitize_names
from crossed.formula.grammar import FormulaError, plain_message

__all__ = ["ALLOWED_TEXT", "MAX_EXPONENT", "MAX_POLY_DEGREE", "SAFE_CONTEXT", "check_expression",
           "check_python", "expression_names", "python_names"]

# name -> (max positional arguments, allowed keywords); the first argument is the data
_MATH = ("log", "log2", "log10", "log1p", "exp", "exp2", "expm1", "sqrt", "abs")
_NP_FUNCS: dict[str, tuple[int, frozenset[str]]] = {
    **{f: (1, frozenset()) for f in _MATH},
    "absolute": (1, frozenset()), "square": (1, frozenset()), "power": (2, frozenset()),
    "round": (2, frozenset({"decimals"})), "floor": (1, frozenset()),
    "ceil": (1, frozenset()),
}
_FUNCS: dict[str, tuple[int, frozenset[str]]] = {
    **{f: (1, frozenset()) for f in _MATH},
    "log": (2, frozenset({"base"})),  # R's log(x, base)
    "I": (1, frozenset()),
    "round": (2, frozenset({"ndigits"})),
    "scale": (1, frozenset({"center", "scale", "ddof"})),
    "center": (1, frozenset()),
    "poly": (2, frozenset({"degree", "raw"})),
    "C": (2, frozenset({"contrasts", "levels", "spans_intercept"})),
    "Q": (1, frozenset()),
}
_NP_CONSTANTS = {"pi", "e"}
MAX_EXPONENT = 1000
MAX_POLY_DEGREE = 25
_CONTRASTS = {"treatment", "sum", "helmert", "poly", "diff"}
_PATSY_CONTRASTS = {"Treatment", "Sum", "Helmert", "Poly", "Diff"}
_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)
_CMPOPS = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)

#: names formulaic's namespace lacks that R users write (added to formulaic's context)
SAFE_CONTEXT = {"sqrt": np.sqrt, "abs": np.abs, "log1p": np.log1p, "expm1": np.expm1}

ALLOWED_TEXT = (
    "column names, numbers, arithmetic, comparisons, I(), C(), Q(), log/log2/log10/log1p/"
    "exp/exp2/expm1/sqrt/abs/round (also as np.<name>), np.square, np.power, scale(), "
    "center() and poly()"
)


class _Refused(Exception):
    def __init__(self, node: ast.AST, why: str):
        super().__init__(why)
        self.node = node
        self.why = why


class _Checker:
    """Walks one expression's AST; raises :class:`_Refused` at the first node not allowed."""

    def __init__(self, columns: Collection[str] | None, aliases: dict[str, str]):
        self.columns = columns
        self.aliases = aliases

    def expr(self, node: ast.AST) -> None:
        if isinstance(node, ast.Expression):
            return self.expr(node.body)
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, int | float):
                raise _Refused(node, "only numbers may appear as values here")
            return None
        if isinstance(node, ast.Name):
            return self._name(node)
        if isinstance(node, ast.Attribute):
            return self._attribute(node)
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.BitXor):
                raise _Refused(node, "'^' inside an expression is ambiguous: write '**' for "
                                     "a power")
            if not isinstance(node.op, _BINOPS):
                raise _Refused(node, f"the operator {type(node.op).__name__} is not allowed")
            if isinstance(node.op, ast.Pow):
                _check_power(node)
            self.expr(node.left)
            return self.expr(node.right)
        if isinstance(node, ast.UnaryOp):
            if not isinstance(node.op, ast.UAdd | ast.USub):
                raise _Refused(node, f"the operator {type(node.op).__name__} is not allowed")
            return self.expr(node.operand)
        if isinstance(node, ast.Compare):
            if not all(isinstance(op, _CMPOPS) for op in node.ops):
                raise _Refused(node, "only ==, !=, <, <=, >, >= comparisons are allowed")
            self.expr(node.left)
            for c in node.comparators:
                self.expr(c)
            return None
        if isinstance(node, ast.Call):
            return self._call(node)
        raise _Refused(node, f"{_kind(node)} is not allowed in a formula")

    def _name(self, node: ast.Name) -> None:
        name = self.aliases.get(node.id, node.id)
        if name.startswith("__"):
            raise _Refused(node, f"the name {name!r} is not allowed")
        if self.columns is not None and name not in self.columns:
            raise _Refused(node, f"{name!r} is not a column of the data")

    def _attribute(self, node: ast.Attribute) -> None:
        parts = dotted(node)
        if parts is None:
            raise _Refused(node, "attribute access is not allowed in a formula")
        if parts[0] == "np" and len(parts) == 2 and parts[1] in _NP_CONSTANTS:
            return None
        name = ".".join(parts)
        if parts[0] in ("np", "numpy") or any(p.startswith("_") for p in parts):
            raise _Refused(node, f"attribute access ({name}) is not allowed in a formula")
        # an R name with dots (Informed.liking) is a column; checked once the data are known
        if self.columns is not None and name not in self.columns:
            raise _Refused(node, f"attribute access ({name}) is not allowed in a formula "
                                 f"({name!r} is not a column of the data)")
        return None

    def _call(self, node: ast.Call) -> None:
        parts = dotted(node.func)
        fname = ".".join(parts) if parts else None
        if parts and len(parts) == 1 and parts[0] in _FUNCS:
            max_args, keywords = _FUNCS[parts[0]]
        elif parts and len(parts) == 2 and parts[0] == "np" and parts[1] in _NP_FUNCS:
            max_args, keywords = _NP_FUNCS[parts[1]]
        else:
            what = f"the function {fname}()" if fname else "this call"
            raise _Refused(node, f"{what} is not allowed in a formula")
        if not node.args:
            raise _Refused(node, f"{fname}() needs an argument")
        if len(node.args) > max_args:
            raise _Refused(node, f"{fname}() takes at most {max_args} argument(s) here")
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise _Refused(a, "*arguments are not allowed in a formula")
        for kw in node.keywords:
            if kw.arg is None or kw.arg not in keywords:
                raise _Refused(node, f"{fname}() does not take the argument "
                                     f"{kw.arg or '**'!r} here")
        if fname == "Q":
            return self._q(node)
        self.expr(node.args[0])
        if fname == "np.power":
            return self.expr(node.args[1]) if len(node.args) > 1 else None
        rest = list(node.args[1:]) + [kw.value for kw in node.keywords]
        if fname == "C":
            for a in node.args[1:]:
                self._contrast(a)
            for kw in node.keywords:
                if kw.arg == "contrasts":
                    self._contrast(kw.value)
                elif kw.arg == "levels":
                    self._levels(kw.value)
                else:
                    self._literal(kw.value, (bool,))
            return None
        for value in rest:
            self._literal(value, (bool, int, float))
        if fname == "poly":
            degree = [kw.value for kw in node.keywords if kw.arg == "degree"] + node.args[1:]
            for d in degree:
                if not (isinstance(d, ast.Constant) and isinstance(d.value, int)
                        and 1 <= d.value <= MAX_POLY_DEGREE):
                    raise _Refused(node, f"poly()'s degree must be a whole number from 1 to "
                                         f"{MAX_POLY_DEGREE}")
        return None

    def _q(self, node: ast.Call) -> None:
        arg = node.args[0]
        if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
            raise _Refused(node, "Q() takes a column name in quotes")
        if self.columns is not None and arg.value not in self.columns:
            raise _Refused(node, f"{arg.value!r} is not a column of the data")

    def _literal(self, node: ast.AST, types: tuple[type, ...]) -> None:
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            node = node.operand
        if isinstance(node, ast.Constant) and (node.value is None or
                                                isinstance(node.value, types)):
            return None
        raise _Refused(node, "only a literal value is allowed as this argument")

    def _levels(self, node: ast.AST) -> None:
        if not isinstance(node, ast.List | ast.Tuple):
            raise _Refused(node, "levels= takes a list of literal values")
        for e in node.elts:
            self._literal(e, (str, int, float, bool))

    def _contrast(self, node: ast.AST) -> None:
        """A contrast given as ``"treatment"``, ``contr.sum`` or ``contr.treatment("b")``."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return None
        target = node.func if isinstance(node, ast.Call) else node
        parts = dotted(target)
        known = parts is not None and (
            (len(parts) == 2 and parts[0] == "contr" and parts[1] in _CONTRASTS)
            or (len(parts) == 1 and parts[0] in _PATSY_CONTRASTS))
        if not known:
            raise _Refused(node, "C() takes contrasts as a name ('treatment'), "
                                 "contr.<treatment|sum|helmert|poly|diff> or patsy's "
                                 "Treatment/Sum/Helmert/Poly/Diff")
        if isinstance(node, ast.Call):
            for a in [*node.args, *(kw.value for kw in node.keywords)]:
                if isinstance(a, ast.List | ast.Tuple):
                    self._levels(a)
                else:
                    self._literal(a, (str, int, float, bool))
            if any(kw.arg is None for kw in node.keywords):
                raise _Refused(node, "**arguments are not allowed in a formula")


def _has_name(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Name) for n in ast.walk(node))


def _check_power(node: ast.BinOp) -> None:
    """Numbers raised to huge powers (``10 ** 10 ** 10``) would hang Python's integers."""
    if _has_name(node.left) or _has_name(node.right):
        return  # a column's values: numpy arithmetic
    right = node.right.operand if isinstance(node.right, ast.UnaryOp) else node.right
    if not (isinstance(right, ast.Constant) and isinstance(right.value, int | float)):
        raise _Refused(node, "a number raised to a computed power")
    if abs(right.value) > MAX_EXPONENT:
        raise _Refused(node, f"an exponent above {MAX_EXPONENT} on a number")


def _kind(node: ast.AST) -> str:
    names = {
        ast.Subscript: "indexing ([...])", ast.Lambda: "a lambda", ast.ListComp:
        "a comprehension", ast.GeneratorExp: "a comprehension", ast.SetComp: "a comprehension",
        ast.DictComp: "a comprehension", ast.IfExp: "an if-expression", ast.BoolOp:
        "'and'/'or'", ast.NamedExpr: "':='", ast.JoinedStr: "an f-string", ast.Dict:
        "a dict", ast.Set: "a set", ast.List: "a list", ast.Tuple: "a tuple",
        ast.Starred: "'*'",
    }
    return names.get(type(node), f"a {type(node).__name__} expression")


_NAME_TEXT = r"[^\W\d]\w*"
_NAME = re.compile(_NAME_TEXT)
_PLAIN_TERM = re.compile(rf"\s*(?:[01]|{_NAME_TEXT}(?:\s*[:*]\s*{_NAME_TEXT})*)\s*")


def _plain_lookups(text: str) -> tuple[tuple[str, str], ...] | None:
    """The factors of a text of columns alone, found without formulaic: terms ``0``, ``1``
    or Python names joined by ``:`` or ``*``, the terms joined by ``+`` (``"1 + Days"``,
    ``"a * b + c:d"``). formulaic parses each name of such a text as a lookup of that
    column and raises no error (``tests/formula/test_safety.py`` compares the two on
    generated texts); anything else (``-``, a call, a dotted or backticked name, another
    number) returns None, for formulaic's parser."""
    names: list[str] = []
    for term in text.split("+"):
        if not _PLAIN_TERM.fullmatch(term):
            return None
        names.extend(_NAME.findall(term))
    if any(not n.isidentifier() or keyword.iskeyword(n) for n in names):
        return None
    return tuple(("lookup", n) for n in dict.fromkeys(names))


def _factor_exprs(text: str, formula: str) -> tuple[tuple[str, str], ...]:
    """(kind, expression) of every factor formulaic would build from ``text`` (of a text of
    columns alone: each column once, and no literal, as checking needs no more)."""
    plain = _plain_lookups(text)
    if plain is not None:
        return plain
    try:
        return _parsed_factors(text)
    except _NotTerms:
        raise FormulaError(formula, _locate(formula, text),
                           f"cannot parse {text!r}: expected terms joined by + - * / :"
                           ) from None
    except Exception as exc:  # formulaic's parser errors (their messages carry ANSI codes)
        message, at = _formulaic_message(exc)
        piece = text
        if isinstance(exc, SyntaxError) and exc.text and exc.offset:
            piece, at = exc.text.strip(), exc.offset - 1 - (len(exc.text) -
                                                           len(exc.text.lstrip()))
        start = formula.find(piece)
        pos = start + at if start >= 0 and at is not None else _locate(formula, text)
        raise FormulaError(formula, pos, f"cannot parse {text!r}: {message}") from None


def _formulaic_message(exc: Exception) -> tuple[str, int | None]:
    """formulaic's first message line, and where its ⧛marker⧚ points in the text."""
    if isinstance(exc, SyntaxError):
        return f"invalid Python syntax ({exc.msg})", None
    lines = plain_message(exc).splitlines()
    marked = next((ln for ln in lines if "\u29db" in ln), None)
    return (lines[0].strip() if lines else type(exc).__name__,
            marked.index("\u29db") if marked is not None else None)


class _NotTerms(Exception):
    pass


@functools.lru_cache(maxsize=1024)
def _parsed_factors(text: str) -> tuple[tuple[str, str], ...]:
    """formulaic's parse of ``text`` (parsing evaluates nothing), cached."""
    from formulaic import Formula

    parsed = Formula(text)
    terms = list(parsed) if hasattr(parsed, "__iter__") else None
    if terms is None or not all(hasattr(t, "factors") for t in terms):
        raise _NotTerms
    return tuple((f.eval_method.value, str(f.expr)) for t in terms for f in t.factors)


def _locate(formula: str, piece: str) -> int:
    for cand in (piece, piece.replace(" ** ", "^"), piece.replace("**", "^"),
                 piece.split("(")[0]):
        at = formula.find(cand) if cand else -1
        if at >= 0:
            return at
    return 0


def check_expression(text: str, formula: str | None = None,
                     columns: Collection[str] | None = None) -> None:
    """Refuse any expression in a formula part that is not on the allow-list.

    Parameters
    ----------
    text : str
        A formulaic right-hand side (the fixed part, a random term's expression, or
        ``"0 + response"``).
    formula : str, optional
        The formula the text comes from (shown in the error).
    columns : collection of str, optional
        The data's columns. Without them a dotted name (``Informed.liking``) is taken for
        an R column name; with them every name must be a column.

    Raises
    ------
    FormulaError
        Naming the expression at fault; nothing has been evaluated.
    """
    formula = formula if formula is not None else text
    for kind, expr in _factor_exprs(text, formula):
        if kind == "lookup":
            continue
        if kind == "literal":
            if expr.isascii() and expr.isdigit():  # (a whole number: "1", "0")
                continue
            try:
                value = ast.literal_eval(expr)
            except (ValueError, SyntaxError):
                value = None
            if isinstance(value, int | float) and not isinstance(value, bool):
                continue
            raise FormulaError(formula, _locate(formula, expr),
                               f"the value {expr} is not a term (only numbers may appear)")
        check_python(expr, formula, columns)


def check_python(expr: str, formula: str, columns: Collection[str] | None = None) -> None:
    """Check one Python expression formulaic would ``eval`` (see :func:`check_expression`)."""
    aliases: dict[str, str] = {}
    try:
        code = ast.parse(sanitize_names(expr, aliases), mode="eval")
    except (SyntaxError, ValueError) as exc:
        why = exc.msg if isinstance(exc, SyntaxError) else str(exc)
        raise FormulaError(formula, _locate(formula, expr),
                           f"cannot parse the expression {expr!r}: {why}") from None
    try:
        _Checker(columns, aliases).expr(code)
    except _Refused as r:
        piece = ast.unparse(r.node) if isinstance(r.node, ast.AST) else expr
        piece = _unalias(piece, aliases)
        raise FormulaError(
            formula, _locate(formula, piece),
            f"refused to evaluate {expr!r}: {r.why} ({piece}). A formula may use "
            f"{ALLOWED_TEXT}; pass trusted=True to evaluate arbitrary Python",
        ) from None


def _unalias(text: str, aliases: dict[str, str]) -> str:
    for new, old in aliases.items():
        text = re.sub(rf"\b{re.escape(new)}\b", f"`{old}`", text)
    return text


def expression_names(text: str) -> set[str]:
    """Column names an expression refers to: bare and dotted names, backticked names and
    ``Q('...')`` arguments (also inside formulaic's stateful transforms, which
    ``Formula.required_variables`` leaves out)."""
    out: set[str] = set()
    try:
        factors = list(_factor_exprs(text, text))
    except FormulaError:
        return out
    for kind, expr in factors:
        if kind == "lookup":
            out.add(expr)
            continue
        if kind == "python":
            out |= python_names(expr)
    return out


def python_names(expr: str) -> set[str]:
    """Column names one Python expression refers to (as :func:`expression_names` reads
    each of formulaic's Python factors); empty if it does not parse."""
    out: set[str] = set()
    try:
        code, aliases = expression_tree(expr)
    except FormulaError:
        return out
    _collect(code.body, dict(aliases), out)
    return out


def _collect(node: ast.AST, aliases: dict[str, str], out: set[str]) -> None:
    """Names (dotted chains whole) of an expression, leaving out called functions."""
    if isinstance(node, ast.Attribute | ast.Name):
        parts = dotted(node)
        if parts:
            if parts[0] not in ("np", "contr"):
                name = ".".join(parts)
                out.add(aliases.get(name, name))
            return
    if isinstance(node, ast.Call):
        if dotted(node.func) == ["Q"] and node.args and isinstance(node.args[0],
                                                                    ast.Constant):
            out.add(str(node.args[0].value))
            return
        func = dotted(node.func)
        children = [*node.args, *(kw.value for kw in node.keywords)]
        if func == ["C"]:  # C(x, Sum, levels=[...]): only x is data
            children = node.args[:1]
        for child in children:
            _collect(child, aliases, out)
        if func is None:
            _collect(node.func, aliases, out)
        elif len(func) > 1 and func[0] not in ("np", "contr"):  # x.method() (trusted)
            out.add(aliases.get(func[0], func[0]))
        return
    for sub in ast.iter_child_nodes(node):
        _collect(sub, aliases, out)
