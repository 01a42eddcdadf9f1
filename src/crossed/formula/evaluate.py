"""The one evaluator: the only code that turns a formula's expression into values.

Every expression a formula holds — the response (``Reaction - 100``, ``log(y)``), the
terms of the fixed part and of the random terms that are more than a column (``I(x**2)``,
``log(x)``, ``scale(x)``, ``poly(x, 2)``, ``C(f, contr.sum)``), each ``offset(...)`` and
both sides of ``cbind(successes, failures)`` — is evaluated here, by walking its Python
syntax tree node by node. The walk *is* the allow-list: a node this module does not know
raises :class:`~crossed.formula.grammar.FormulaError`; names are data columns (never
Python objects); functions come from a fixed table (never from the data or a namespace);
numbers are doubles, as in R, so ``9 ** 999 ** 999`` is ``inf`` at once instead of an
integer that never finishes. Only ``trusted=True`` (:func:`crossed.lmer`) leaves formulaic
to ``eval`` an expression as Python.

formulaic still parses the formula and encodes factors and interactions; its evaluation of
each factor goes through :class:`~crossed.formula.materializer.SafeMaterializer`, which
calls :func:`evaluate`. formulaic is imported only where it is used (a call of ``C()``,
``contr.*`` or a stateful transform, a backticked name), so that a formula of columns alone
never loads it.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from crossed.formula.grammar import FormulaError

__all__ = ["MATERIALIZER", "dotted", "evaluate", "expression_tree", "names_in", "r_to_python",
           "sanitize_names", "transforms"]

MATERIALIZER = "crossed"
"""formulaic's name of :class:`~crossed.formula.materializer.SafeMaterializer` (stored in
its model specs); :func:`crossed.formula.materializer.registered_materializer` registers
it."""


def transforms() -> Any:
    """formulaic's table of transforms (``C``, ``contr``, ``scale``, ``center``, ``poly``,
    patsy's ``Sum``...), imported on first use."""
    from formulaic.transforms import TRANSFORMS

    return TRANSFORMS


def sanitize_names(source: str, aliases: dict[str, str]) -> str:
    """``source`` with each backticked name replaced by a Python identifier, the aliases
    (identifier -> name) added to ``aliases``: formulaic's ``sanitize_variable_names``,
    which formulaic's parser applies to the same text. Without a backtick that function
    returns the text stripped, as this does without importing formulaic."""
    if "`" not in source:
        return source.strip()
    from formulaic.utils import code

    return str(code.sanitize_variable_names(source, {}, aliases))

_NUMPY_1: dict[str, Callable[[Any], Any]] = {
    "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p, "exp": np.exp,
    "exp2": np.exp2, "expm1": np.expm1, "sqrt": np.sqrt, "abs": np.abs,
    "absolute": np.abs, "square": np.square, "floor": np.floor, "ceil": np.ceil,
}
_BARE_1 = ("log", "log2", "log10", "log1p", "exp", "exp2", "expm1", "sqrt", "abs")
_STATEFUL = ("scale", "center", "poly")
_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply, ast.Div: np.true_divide,
    ast.FloorDiv: np.floor_divide, ast.Mod: np.mod, ast.Pow: np.power,
}
_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: np.equal, ast.NotEq: np.not_equal, ast.Lt: np.less, ast.LtE: np.less_equal,
    ast.Gt: np.greater, ast.GtE: np.greater_equal,
}
_CONTRAST_NAMES = {"treatment", "sum", "helmert", "poly", "diff"}
_PATSY_CONTRASTS = {"Treatment", "Sum", "Helmert", "Poly", "Diff"}


class _Refused(Exception):
    """A node outside the allow-list (turned into a FormulaError by :func:`evaluate`)."""


def r_to_python(text: str) -> str:
    """An R arithmetic expression (a response, an offset) as Python: ``^`` is a power,
    ``%%`` the remainder and ``%/%`` integer division."""
    out, quote, i = [], "", 0
    while i < len(text):
        ch = text[i]
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"`":
            quote = ch
        elif ch == "^":
            out.append("**")
            i += 1
            continue
        elif text.startswith("%%", i):
            out.append("%")
            i += 2
            continue
        elif text.startswith("%/%", i):
            out.append("//")
            i += 3
            continue
        out.append(ch)
        i += 1
    return "".join(out)


@functools.lru_cache(maxsize=4096)
def expression_tree(source: str) -> tuple[ast.Expression, tuple[tuple[str, str], ...]]:
    """The syntax tree of one Python expression and the aliases of its backticked names
    (``(alias, name)``), parsed once per text (nothing is evaluated)."""
    aliases: dict[str, str] = {}
    try:
        code = ast.parse(sanitize_names(source, aliases), mode="eval")
    except (SyntaxError, ValueError) as exc:
        why = exc.msg if isinstance(exc, SyntaxError) else str(exc)
        raise FormulaError(source, 0, f"cannot parse the expression {source!r}: {why}"
                           ) from None
    return code, tuple(aliases.items())


def dotted(node: ast.AST) -> list[str] | None:
    """``a.b.c`` as ["a", "b", "c"]; None for anything but a chain of plain names."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


def names_in(source: str) -> set[str]:
    """Data columns a Python expression reads (dotted R names whole, backticked names,
    ``Q('...')``), leaving out functions and ``np.pi``/``np.e``."""
    code, aliases = expression_tree(source)
    alias = dict(aliases)
    out: set[str] = set()

    def walk(node: ast.AST) -> None:
        if isinstance(node, ast.Name | ast.Attribute):
            parts = dotted(node)
            if parts is not None:
                if parts[0] != "np":
                    name = ".".join(parts)
                    out.add(alias.get(name, name))
                return
        if isinstance(node, ast.Call):
            func = dotted(node.func)
            if func == ["Q"] and node.args and isinstance(node.args[0], ast.Constant):
                out.add(str(node.args[0].value))
                return
            args = node.args[:1] if func == ["C"] else node.args
            for a in args:
                walk(a)
            return
        for sub in ast.iter_child_nodes(node):
            walk(sub)

    walk(code.body)
    return out


def _literal(node: ast.AST, types: tuple[type, ...]) -> Any:
    """A literal argument (a number, possibly negative, a string, a boolean, None) of one
    of ``types``; refused otherwise."""
    sign = 1
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node, sign = node.operand, -1
    if isinstance(node, ast.Constant) and (node.value is None
                                           or isinstance(node.value, types)):
        v = node.value
        return -v if sign < 0 and isinstance(v, int | float) else v
    raise _Refused("only a literal value is allowed as this argument")


class _Walker:
    """Evaluates one checked tree; ``lookup(name)`` gives a data column's values."""

    def __init__(self, lookup: Callable[[str], Any], aliases: Mapping[str, str],
                 stateful: Callable[[str, ast.Call, Any, list[Any], dict[str, Any]], Any],
                 contrast: Callable[[ast.AST], Any]):
        self.lookup = lookup
        self.aliases = aliases
        self.stateful = stateful
        self.contrast = contrast

    def column(self, name: str) -> Any:
        name = self.aliases.get(name, name)
        if name.startswith("__"):
            raise _Refused(f"the name {name!r} is not allowed")
        return self.lookup(name)

    def value(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise _Refused("only numbers may appear as values here")
            try:
                return np.float64(v)  # R's numbers are doubles
            except OverflowError:
                return np.float64(np.inf)
        if isinstance(node, ast.Name):
            return self.column(node.id)
        if isinstance(node, ast.Attribute):
            parts = dotted(node)
            if parts == ["np", "pi"]:
                return np.float64(np.pi)
            if parts == ["np", "e"]:
                return np.float64(np.e)
            if parts is None or parts[0] in ("np", "numpy") or any(
                    p.startswith("_") for p in parts):
                raise _Refused(f"attribute access ({ast.unparse(node)}) is not allowed")
            return self.column(".".join(parts))  # an R name with dots (Informed.liking)
        if isinstance(node, ast.BinOp):
            op = _BINOPS.get(type(node.op))
            if op is None:
                raise _Refused(f"the operator {type(node.op).__name__} is not allowed")
            return op(self.value(node.left), self.value(node.right))
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.USub):
                return np.negative(self.value(node.operand))
            if isinstance(node.op, ast.UAdd):
                return np.positive(self.value(node.operand))
            raise _Refused(f"the operator {type(node.op).__name__} is not allowed")
        if isinstance(node, ast.Compare):
            left = self.value(node.left)
            out = None
            for op_node, right_node in zip(node.ops, node.comparators, strict=True):
                op = _COMPARE.get(type(op_node))
                if op is None:
                    raise _Refused("only ==, !=, <, <=, >, >= comparisons are allowed")
                right = self.value(right_node)
                part = op(left, right)
                out = part if out is None else np.logical_and(out, part)
                left = right
            return out
        if isinstance(node, ast.Call):
            return self.call(node)
        raise _Refused(f"{type(node).__name__} expressions are not allowed in a formula")

    def call(self, node: ast.Call) -> Any:
        parts = dotted(node.func)
        name = ".".join(parts) if parts else None
        if any(isinstance(a, ast.Starred) for a in node.args) or any(
                kw.arg is None for kw in node.keywords):
            raise _Refused("*arguments and **arguments are not allowed in a formula")
        if not node.args:
            raise _Refused(f"{name or 'this call'}() needs an argument")
        kwargs = {str(kw.arg): kw.value for kw in node.keywords}
        if name == "Q":
            arg = node.args[0]
            if len(node.args) != 1 or kwargs or not (isinstance(arg, ast.Constant)
                                                      and isinstance(arg.value, str)):
                raise _Refused("Q() takes one column name in quotes")
            return self.lookup(arg.value)
        if name == "I" and len(node.args) == 1 and not kwargs:
            return self.value(node.args[0])
        fname = parts[1] if parts and len(parts) == 2 and parts[0] == "np" else (
            parts[0] if parts and len(parts) == 1 and parts[0] in (*_BARE_1, "round", "I",
                                                                   *_STATEFUL, "C")
            else None)
        if fname is None or (len(parts or ()) == 2 and fname not in (*_NUMPY_1, "power",
                                                                     "round")):
            raise _Refused(f"the function {name or '?'}() is not allowed in a formula")
        if fname == "log" and parts == ["log"] and (len(node.args) == 2 or "base" in kwargs):
            if len(node.args) > 2 or set(kwargs) - {"base"}:
                raise _Refused("log() takes (x, base) here")
            base = node.args[1] if len(node.args) > 1 else kwargs["base"]
            return np.log(self.value(node.args[0])) / np.log(self.value(base))  # R's log
        if fname in _NUMPY_1:
            if len(node.args) != 1 or kwargs:
                raise _Refused(f"{name}() takes one argument here")
            return _NUMPY_1[fname](self.value(node.args[0]))
        if fname == "power":
            if len(node.args) != 2 or kwargs:
                raise _Refused("np.power() takes two arguments")
            return np.power(self.value(node.args[0]), self.value(node.args[1]))
        if fname == "round":
            key = "decimals" if name == "np.round" else "ndigits"
            if len(node.args) > 2 or set(kwargs) - {key}:
                raise _Refused(f"{name}() takes (x, {key}) here")
            digits_node = node.args[1] if len(node.args) > 1 else kwargs.get(key)
            digits = 0 if digits_node is None else _literal(digits_node, (int,))
            if not isinstance(digits, int) or abs(digits) > 308:
                raise _Refused(f"{name}()'s digits must be a whole number from -308 to 308")
            return np.round(self.value(node.args[0]), digits)
        if fname == "C":
            return self.c_call(node, kwargs)
        if fname in _STATEFUL:
            return self.stateful_call(fname, node, kwargs)
        raise _Refused(f"the function {name}() is not allowed in a formula")

    def stateful_call(self, fname: str, node: ast.Call, kwargs: dict[str, ast.expr]) -> Any:
        allowed = {"scale": {"center", "scale", "ddof"}, "center": set(),
                   "poly": {"degree", "raw"}}[fname]
        most = {"scale": 1, "center": 1, "poly": 2}[fname]
        if len(node.args) > most or set(kwargs) - allowed:
            raise _Refused(f"{fname}() takes (x{', ' if allowed else ''}"
                           f"{', '.join(sorted(allowed))}) here")
        rest = [_literal(a, (bool, int, float)) for a in node.args[1:]]
        kw = {k: _literal(v, (bool, int, float)) for k, v in kwargs.items()}
        if fname == "poly":
            degree = kw.get("degree", rest[0] if rest else 1)
            if isinstance(degree, bool) or not isinstance(degree, int) or not (
                    1 <= degree <= 25):
                raise _Refused("poly()'s degree must be a whole number from 1 to 25")
        data = self.value(node.args[0])
        if np.ndim(data) == 0:  # (scale(1): NumPy's axis error, and R's NaN, before)
            raise _Refused(f"{fname}() needs a variable of the data, not a constant")
        return self.stateful(fname, node, data, rest, kw)

    def c_call(self, node: ast.Call, kwargs: dict[str, ast.expr]) -> Any:
        if len(node.args) > 2 or set(kwargs) - {"contrasts", "levels", "spans_intercept"}:
            raise _Refused("C() takes (x, contrasts, levels=, spans_intercept=) here")
        data = self.value(node.args[0])
        kw: dict[str, Any] = {}
        contrast_node = node.args[1] if len(node.args) > 1 else kwargs.get("contrasts")
        if contrast_node is not None:
            kw["contrasts"] = self.contrast(contrast_node)
        if "levels" in kwargs:
            lv = kwargs["levels"]
            if not isinstance(lv, ast.List | ast.Tuple):
                raise _Refused("levels= takes a list of literal values")
            kw["levels"] = [_literal(e, (str, int, float, bool)) for e in lv.elts]
        if "spans_intercept" in kwargs:
            kw["spans_intercept"] = _literal(kwargs["spans_intercept"], (bool,))
        return transforms()["C"](data, **kw)


def _contrast_from(context: Mapping[str, Any]) -> Callable[[ast.AST], Any]:
    """C()'s contrasts argument: a name (``"sum"``), ``contr.<name>`` (called with literal
    arguments or not), patsy's ``Sum``..., or a coding crossed placed in the context."""
    def resolve(node: ast.AST) -> Any:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        target = node.func if isinstance(node, ast.Call) else node
        parts = dotted(target)
        if parts and len(parts) == 2 and parts[0] == "contr" and parts[1] in _CONTRAST_NAMES:
            obj = getattr(transforms()["contr"], parts[1])
        elif parts and len(parts) == 1 and parts[0] in _PATSY_CONTRASTS:
            obj = transforms()[parts[0]]
        elif (parts and len(parts) == 1 and not isinstance(node, ast.Call)
              and parts[0].startswith("cx_contr_") and parts[0] in context):
            return context[parts[0]]  # (crossed's own codings, design/contrasts.py)
        else:
            raise _Refused("C() takes contrasts as a name ('treatment'), contr.<treatment|"
                           "sum|helmert|poly|diff> or patsy's Treatment/Sum/Helmert/Poly/"
                           "Diff")
        if not isinstance(node, ast.Call):
            return obj
        args = []
        for a in node.args:
            if isinstance(a, ast.List | ast.Tuple):
                args.append([_literal(e, (str, int, float, bool)) for e in a.elts])
            else:
                args.append(_literal(a, (str, int, float, bool)))
        kws = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise _Refused("**arguments are not allowed in a formula")
            kws[kw.arg] = _literal(kw.value, (str, int, float, bool))
        return obj(*args, **kws)

    return resolve


def _fresh_state(fname: str, node: ast.Call, data: Any, args: list[Any],
                 kwargs: dict[str, Any]) -> Any:
    """A stateful transform computed on the data it is given (a response: never
    re-evaluated on new data)."""
    return transforms()[fname](data, *args, _state={}, **kwargs)


def evaluate(source: str, lookup: Callable[[str], Any], *,
             stateful: Callable[..., Any] | None = None,
             context: Mapping[str, Any] | None = None, formula: str | None = None) -> Any:
    """Evaluate one formula expression (Python syntax, R's ``^`` already a power).

    Parameters
    ----------
    source : str
        The expression, e.g. ``"Reaction - 100"``, ``"np.log(x)"``, ``"I(x ** 2)"``.
    lookup : callable
        ``lookup(name)``: the values of the data column ``name``; raises when there is
        none.
    stateful : callable, optional
        How ``scale``/``center``/``poly`` are evaluated (formulaic's state is kept by
        :class:`~crossed.formula.materializer.SafeMaterializer`); by default they learn
        from the values given.
    context : mapping, optional
        crossed's own contrast codings (``cx_contr_<i>``) for ``C()``.
    formula : str, optional
        The formula the expression comes from (shown in errors).

    Returns
    -------
    object
        The values (a NumPy or pandas object, or a number).

    Raises
    ------
    FormulaError
        At the first node outside the allow-list, before anything else is evaluated on
        that branch; nothing outside the allow-list is ever evaluated.
    """
    code, aliases = expression_tree(source)
    walker = _Walker(lookup, dict(aliases), stateful or _fresh_state,
                     _contrast_from(context or {}))
    try:
        with np.errstate(all="ignore"):
            return walker.value(code.body)
    except _Refused as exc:
        shown = formula if formula is not None else source
        at = max(shown.find(source.split("(")[0]), 0) if shown != source else 0
        raise FormulaError(shown, at, f"refused to evaluate {source!r}: {exc}. A formula "
                                      "may use column names, numbers, arithmetic, "
                                      "comparisons and a short list of functions; pass "
                                      "trusted=True to evaluate arbitrary Python"
                           ) from None
