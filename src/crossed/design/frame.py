"""Validate the data for a ModelSpec: columns present, missing rows, categorical levels."""

from __future__ import annotations

import difflib
import re
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from crossed.formula.safety import expression_names
from crossed.formula.spec import ModelSpec

_IDENT = re.compile(r"`[^`]+`|(?:[^\W\d]|\.)[\w.]*")


class DataError(ValueError):
    """The data do not fit the model: a missing column, a bad level, too few groups..."""


def quote_dotted(text: str, columns: set[str]) -> str:
    """Backtick column names with dots (R's ``Informed.liking``) for formulaic."""

    def repl(m: re.Match[str]) -> str:
        tok = m.group(0)
        return f"`{tok}`" if "." in tok and tok in columns else tok

    return _IDENT.sub(repl, text)


def expression_variables(text: str, columns: set[str]) -> set[str]:
    """Data columns an expression (formulaic right-hand side) refers to."""
    if text.strip() in columns:
        return {text.strip()}
    return expression_names(quote_dotted(text, columns))


def r_level_order(values: pd.Series) -> list:
    """Levels in the order R's ``factor()`` gives them.

    Categoricals keep their category order (unused categories dropped), numbers sort
    numerically, strings sort as R does in an English locale (case-insensitive first,
    lower case before upper case on ties).
    """
    if isinstance(values.dtype, pd.CategoricalDtype):
        used = set(values.dropna().unique())
        return [c for c in values.cat.categories if c in used]
    numeric = pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values)
    return _r_sorted(list(pd.unique(values.dropna())), numeric)


def _r_sorted(uniq: list, numeric: bool) -> list:
    """Distinct values in R's ``factor()`` order (see :func:`r_level_order`)."""
    if numeric:
        return sorted(uniq)
    return sorted(uniq, key=lambda s: (str(s).lower(), str(s).swapcase()))


def is_categorical(values: pd.Series | pd.api.extensions.ExtensionArray) -> bool:
    """Columns treated as factors: strings, objects, categoricals, booleans."""
    dtype = values.dtype
    return not pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype)


@dataclass(frozen=True)
class PreparedFrame:
    """The rows and columns a model uses, with factors encoded as ordered categoricals."""

    data: pd.DataFrame
    n_dropped: int
    levels: dict[str, list]


def _suggest(name: str, columns: list[str]) -> str:
    close = difflib.get_close_matches(name, columns, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def used_columns(spec: ModelSpec, columns: list[str]) -> tuple[list[str], list[str]]:
    """Columns of the fixed/response part and of the random part; errors on unknown names."""
    colset = set(columns)
    fixed_vars: set[str] = set()
    for text in (spec.response, spec.fixed):
        fixed_vars |= expression_variables(text, colset)
    random_vars: set[str] = set()
    for term in spec.random:
        random_vars |= expression_variables(term.expr, colset)
        random_vars |= set(term.factors)
    for name in sorted(fixed_vars | random_vars):
        if name not in colset:
            raise DataError(f"column {name!r} is not in the data{_suggest(name, columns)}")
    ordered = [c for c in columns if c in fixed_vars | random_vars]
    return ordered, [c for c in columns if c in set(spec.group_factors)]


def prepare(spec: ModelSpec, data: pd.DataFrame, na_action: str = "omit") -> PreparedFrame:
    """Select the used columns, drop (or reject) rows with missing values, encode factors.

    Parameters
    ----------
    spec : ModelSpec
    data : pandas.DataFrame
    na_action : {"omit", "raise"}
        ``"omit"`` drops rows with a missing value in any used column (lme4's ``na.omit``)
        and counts them; ``"raise"`` raises naming the columns with missing values.
    """
    if not isinstance(data, pd.DataFrame):
        raise DataError(f"data must be a pandas DataFrame, got {type(data).__name__}")
    if na_action not in ("omit", "raise"):
        raise ValueError(f"na_action must be 'omit' or 'raise', got {na_action!r}")
    if len(data) == 0:
        raise DataError("the data table is empty (0 rows)")
    label = {str(c): c for c in data.columns}
    used, groups = used_columns(spec, list(label))
    # the used columns as arrays (a frame is built once, at the end: cheaper than .loc or
    # column-wise frame operations for a few columns)
    arrays = {c: data[label[c]].array for c in used}
    missing = {c: np.asarray(pd.isna(a), dtype=bool) for c, a in arrays.items()}
    any_missing = np.logical_or.reduce(list(missing.values()))  # (the response is used)
    n_dropped = int(any_missing.sum())
    if n_dropped:
        where = ", ".join(f"{c} ({int(m.sum())})" for c, m in missing.items() if m.any())
        if na_action == "raise":
            raise DataError(f"{n_dropped} rows have missing values in: {where}")
        warnings.warn(
            f"{n_dropped} of {len(data)} rows dropped for missing values in: {where}",
            stacklevel=3,
        )
        keep = ~any_missing
        arrays = {c: a[keep] for c, a in arrays.items()}
    else:
        arrays = {c: a.copy() for c, a in arrays.items()}
    if len(data) == n_dropped:
        raise DataError("no rows left after dropping rows with missing values")
    levels: dict[str, list] = {}
    reference = spec.reference_levels
    for col, values in arrays.items():
        if not is_categorical(values):  # numeric grouping columns stay numeric
            continue
        if pd.api.types.is_bool_dtype(values.dtype):
            values = pd.array(np.where(np.asarray(values, dtype=bool), "TRUE", "FALSE"),
                              dtype=object)
        # hash once, order the distinct values only, recode by a permutation
        codes, uniques = pd.factorize(values)
        uniq = uniques.tolist()
        categorical = isinstance(values.dtype, pd.CategoricalDtype)
        lv = r_level_order(pd.Series(values)) if categorical else _r_sorted(uniq, False)
        if col in reference:
            ref = _match_level(reference[col], lv, col)
            lv = [ref] + [v for v in lv if v != ref]
        levels[col] = lv
        position = {v: i for i, v in enumerate(lv)}
        perm = np.array([position[v] for v in uniq], dtype=np.int64)
        arrays[col] = pd.Categorical.from_codes(perm[codes],
                                                dtype=pd.CategoricalDtype(lv, ordered=False),
                                                validate=False)
    frame = pd.DataFrame(arrays, copy=False)
    for col in reference:
        if col not in levels:
            raise DataError(
                f"reference level given for {col!r}, which is not a factor in the model"
            )
    return PreparedFrame(data=frame, n_dropped=n_dropped, levels=levels)


def _match_level(ref: object, levels: list, column: str) -> object:
    for lv in levels:
        if lv == ref or str(lv) == str(ref):
            return lv
    shown = ", ".join(map(str, levels[:10]))
    raise DataError(f"reference level {ref!r} is not a level of {column!r} (levels: {shown})")


def encode_new(data: pd.DataFrame, levels: dict[str, list], columns: list[str]) -> pd.DataFrame:
    """Encode new data with the fitted factor levels; unknown levels raise naming them."""
    missing = [c for c in columns if c not in data.columns]
    if missing:
        raise DataError(f"column {missing[0]!r} is not in the new data")
    frame = data.loc[:, columns].copy()
    for col, lv in levels.items():
        if col not in frame.columns:
            continue
        s = frame[col]
        if pd.api.types.is_bool_dtype(s):
            s = s.map({True: "TRUE", False: "FALSE"})
        known = {str(v): v for v in lv}
        mapped = s.map(lambda v, known=known: known.get(str(v), v) if pd.notna(v) else v)
        frame[col] = mapped
    return frame


def check_numeric_response(y: np.ndarray, name: str) -> np.ndarray:
    """The response as float64; raises for non-numeric or non-finite values."""
    try:
        out = np.asarray(y, dtype=float)
    except (TypeError, ValueError):
        raise DataError(f"response {name!r} is not numeric") from None
    if not np.all(np.isfinite(out)):
        raise DataError(f"response {name!r} has infinite values")
    return out
