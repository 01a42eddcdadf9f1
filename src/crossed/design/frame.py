"""Validate the data for a ModelSpec: columns present, missing rows, categorical levels."""

from __future__ import annotations

import datetime
import difflib
import functools
import math
import numbers
import re
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pandas as pd

from crossed._warn import warn
from crossed.design.fastpd import ascii_r_order, categorical, column_array, frame_of, string_codes
from crossed.formula.evaluate import r_to_python
from crossed.formula.safety import expression_names, python_names
from crossed.formula.spec import ModelSpec

__all__ = ["BinaryResponseWarning", "DataError", "PreparedFrame", "check_binary_response",
           "check_column", "check_finite", "check_numeric_response", "check_response_varies",
           "check_scale", "clearly_finite", "encode_new", "expression_variables",
           "is_categorical", "labels_of", "level_label", "no_rows_left", "prepare",
           "quote_dotted", "r_number", "used_columns", "value_columns"]

_IDENT = re.compile(r"`[^`]+`|(?:[^\W\d]|\.)[\w.]*")
BARE_NAME = re.compile(r"(?:[^\W\d]|\.)[\w.]*")
"""A name R reads without backticks: ``Days``, ``Informed.liking``, ``Días``."""


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
    if text.strip() in columns and BARE_NAME.fullmatch(text.strip()):
        return {text.strip()}  # (a column named "a:b" or "f*x" needs backticks, as in R)
    return expression_names(quote_dotted(text, columns))


def r_number(value: float) -> str:
    """A number as R's ``as.character`` writes it (15 significant digits, the shorter of
    fixed and scientific notation): ``308.0`` -> ``"308"``, ``1e5`` -> ``"1e+05"``."""
    v = float(value)
    if not np.isfinite(v):
        return "NaN" if np.isnan(v) else ("Inf" if v > 0 else "-Inf")
    if v == int(v):  # R's fixed notation ("%.0f") writes every digit of a whole number
        fixed = str(int(v))
    else:
        fixed = np.format_float_positional(v, precision=15, unique=False, fractional=False,
                                           trim="-")
    sci = np.format_float_scientific(v, precision=14, unique=False, trim="-",
                                     exp_digits=2).replace(".e", "e")
    return fixed if len(fixed) <= len(sci) else sci


def level_label(value: object) -> str:
    """The label R gives a value as a factor level (R's ``as.character``).

    Labels are a level's identity: ``308``, ``308.0``, ``np.int64(308)`` and ``"308"`` are
    one level ``"308"``; ``True`` is ``"TRUE"``. Strings are kept as they are.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bool | np.bool_):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | np.integer):
        # every digit, as R writes a whole number below 1e15; larger integers (64-bit IDs)
        # too, where R, holding them as doubles, would merge distinct ones into one level
        return str(int(value))
    if isinstance(value, numbers.Real):
        return r_number(float(value))
    if isinstance(value, pd.Timestamp) and value == value.normalize() and value.tz is None:
        return str(value.date())  # R prints a Date / midnight POSIXct as "2024-01-31"
    return str(value)


def _r_sorted(uniq: list[Any], numeric: bool) -> list[Any]:
    """Distinct values in R's ``factor()`` order: numbers numerically, strings as R sorts
    them in an English locale (case-insensitive first, lower case before upper on ties)."""
    if numeric:
        return sorted(uniq)
    if all(isinstance(s, str) for s in uniq):
        return [uniq[k] for k in _r_string_order(uniq).tolist()]
    return sorted(uniq, key=lambda s: (str(s).lower(), str(s).swapcase()))


def _r_string_order(strings: list[str]) -> np.ndarray:
    """The positions of the distinct ``strings`` in :func:`_r_sorted`'s order: the same
    order as the key (lower case, swapped case), by two stable sorts of the positions
    (many ASCII strings: by pyarrow's sort on the same keys, :func:`fastpd.ascii_r_order`)."""
    fast = ascii_r_order(strings)
    if fast is not None:
        return fast
    order = sorted(range(len(strings)), key=[s.swapcase() for s in strings].__getitem__)
    return np.array(sorted(order, key=[s.lower() for s in strings].__getitem__),
                    dtype=np.int64)


def is_categorical(values: pd.Series | pd.api.extensions.ExtensionArray) -> bool:
    """Columns treated as factors: strings, objects, categoricals, booleans, dates."""
    dtype = values.dtype
    if isinstance(dtype, np.dtype):  # (the same answer, without pandas' dispatch)
        return dtype.kind not in "iufc"
    return not pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype)


@dataclass(frozen=True)
class PreparedFrame:
    """The rows and columns a model uses, with factors encoded as categoricals.

    The design reads the columns as arrays (:attr:`values`, :attr:`codes`); the
    categoricals and the table (:attr:`arrays`, :attr:`data`) are built on first use, as a
    fit does not need them (on a small table they cost about a tenth of the design).
    """

    names: tuple[str, ...]
    """The used columns, in the data's order."""
    n_rows: int
    n_dropped: int
    levels: dict[str, list[str]]
    ordered: tuple[str, ...] = ()
    """Factor columns that were ordered pandas Categoricals (R's ``ordered``: coded with
    ``contr.poly`` unless ``contrasts=`` says otherwise)."""
    values: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """The numeric columns (numpy arrays, or pandas' numeric extension arrays)."""
    codes: dict[str, tuple[np.ndarray, list[str]]] = field(default_factory=dict, repr=False,
                                                            compare=False)
    """The factor columns: each row's level (int64 codes, every level present) and the
    levels (R's labels, distinct)."""
    data_columns: frozenset[str] = field(default=frozenset(), repr=False, compare=False)
    """Every column name of the data (as strings): what the formula's names may refer to
    (:func:`crossed.formula.spec.check_spec`)."""

    def __len__(self) -> int:
        return self.n_rows

    @functools.cached_property
    def arrays(self) -> dict[str, Any]:
        """Every used column as an array (built once): the numeric columns, and each factor
        as an unordered categorical whose categories (an object index) are its levels."""
        return {c: self.values[c] if c in self.values else categorical(*self.codes[c])
                for c in self.names}

    @functools.cached_property
    def data(self) -> pd.DataFrame:
        """The used columns as a table (built once): :attr:`arrays`, a RangeIndex, column
        names as an object index."""
        return frame_of(self.arrays, self.n_rows)


def _suggest(name: str, columns: list[str]) -> str:
    close = difflib.get_close_matches(name, columns, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _variables(spec: ModelSpec, colset: set[str]) -> tuple[set[str], set[str]]:
    """Columns used as values (response, fixed part, random-term expressions) and columns
    used to group (the factors right of the bars)."""
    values: set[str] = set()
    for text in spec.value_expressions:  # the response (cbind's sides) and the offsets
        source = r_to_python(text).strip()
        values |= ({source} if source in colset else
                   python_names(quote_dotted(source, colset)))
    values |= expression_variables(spec.fixed, colset)
    groups: set[str] = set()
    for term in spec.random:
        values |= expression_variables(term.expr, colset)
        groups |= set(term.factors)
    return values, groups


def used_columns(spec: ModelSpec, columns: list[str]) -> tuple[list[str], list[str]]:
    """Columns of the fixed/response part and of the random part; errors on unknown names."""
    used, groups, _ = _used_values(spec, columns)
    return used, groups


def _used_values(spec: ModelSpec, columns: list[str]
                 ) -> tuple[list[str], list[str], set[str]]:
    """:func:`used_columns` and :func:`value_columns` from one reading of the formula."""
    colset = set(columns)
    values, groups = _variables(spec, colset)
    for name in sorted(values | groups):
        if name not in colset:
            raise DataError(f"column {name!r} is not in the data{_suggest(name, columns)}")
    ordered = [c for c in columns if c in values | groups]
    factors = set(spec.group_factors)
    return ordered, [c for c in columns if c in factors], values


def value_columns(spec: ModelSpec, columns: list[str]) -> set[str]:
    """Columns whose values enter the model (response, fixed part, random-term expressions),
    as opposed to columns used only to define grouping factors."""
    return _variables(spec, set(columns))[0]


_TIME_KINDS = ("m", "M")  # numpy datetime64 / timedelta64


def _is_time(dtype: object) -> bool:
    return (getattr(dtype, "kind", None) in _TIME_KINDS
            or isinstance(dtype, pd.DatetimeTZDtype | pd.PeriodDtype | pd.IntervalDtype))


_TIMES = (datetime.date, datetime.time, datetime.timedelta, np.datetime64, np.timedelta64)


def _object_kind(values: pd.api.extensions.ExtensionArray, column: str) -> str:
    """``"numbers"``, ``"times"`` (dates, times, durations) or ``"labels"`` (strings,
    booleans or a mix) of an object column;
    raises for values that cannot be factor levels (lists, dicts, ...)."""
    try:
        distinct = pd.unique(np.asarray(values, dtype=object))  # hashing in C
    except TypeError:  # unhashable values: find the first to name it
        distinct = [next(v for v in values if not isinstance(v, Hashable))]
    present = [v for v in distinct if not _missing(v)]
    for v in present:
        if not isinstance(v, (str, numbers.Number, np.bool_, *_TIMES)):
            raise DataError(
                f"column {column!r} holds a value of type {type(v).__name__} ({v!r:.40}); "
                "only numbers, strings and booleans can be model variables"
            )
    if any(isinstance(v, _TIMES) for v in present):
        return "times"
    if present and all(isinstance(v, numbers.Number) and not isinstance(v, bool | np.bool_)
                       for v in present):
        return "numbers"
    return "labels"


def _missing(value: object) -> bool:
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # array-like values
        return False


def check_column(column: str, values: pd.api.extensions.ExtensionArray,
                 as_value: bool) -> None:
    """Refuse column types R would not read the same way.

    ``as_value`` is True for columns whose values enter the model (response, predictors,
    random-term expressions); grouping factors accept any column of labels.

    Raises
    ------
    DataError
        Complex numbers; dates and durations used as values (convert them to numbers or to
        strings first); object columns of numbers used as values (ambiguous: number or
        factor?); values such as lists or dicts.
    """
    dtype = values.dtype
    if getattr(dtype, "kind", None) == "c":
        raise DataError(f"column {column!r} holds complex numbers (dtype {dtype}); "
                        "use its real part or modulus")
    if _is_time(dtype):
        if as_value:
            raise DataError(
                f"column {column!r} holds dates or durations (dtype {dtype}), which R would "
                "not use as they are in a model; convert it to a number (e.g. days since the "
                "first date) for a numeric predictor, or to strings for a factor"
            )
        return
    if (dtype.kind == "O" if isinstance(dtype, np.dtype)  # (NumPy's: pandas' test, by kind)
            else pd.api.types.is_object_dtype(dtype)):
        kind = _object_kind(values, column)
        if kind == "times" and as_value:
            raise DataError(
                f"column {column!r} holds dates or durations (Python objects), which R would "
                "not use as they are in a model; convert it to a number (e.g. days since the "
                "first date) for a numeric predictor, or to strings for a factor"
            )
        if kind == "numbers" and as_value:
            raise DataError(
                f"column {column!r} holds numbers in a column of dtype object; convert it "
                f"with data[{column!r}].astype(float) for a numeric predictor or "
                ".astype(str) for a factor"
            )


_FLOAT_MAX = float(np.finfo(float).max)


def check_finite(column: str, values: np.ndarray, what: str = "column") -> None:
    """Refuse infinite values and values too large to square (lme4 stops on
    ``NA/NaN/Inf``; its optimiser fails on overflow). Missing values are not looked at."""
    x = np.asarray(values, dtype=float)
    if x.ndim == 1 and clearly_finite(x):  # (the usual case, in two passes)
        return
    bad = np.isinf(x)
    if bad.any():
        raise DataError(
            f"{what} {column!r} has {int(bad.sum())} infinite value"
            f"{'s' if bad.sum() > 1 else ''} (first in row {int(np.flatnonzero(bad)[0])} of "
            "the rows used); a model needs finite values: drop those rows or set them missing"
        )
    finite = np.abs(x[np.isfinite(x)])
    if finite.size:
        largest = float(finite.max())
        if largest > math.sqrt(_FLOAT_MAX / finite.size):  # the sum of squares overflows
            raise DataError(
                f"{what} {column!r} has values too large to fit (largest magnitude "
                f"{largest:.3g}); rescale it"
            )


def clearly_finite(X: np.ndarray) -> bool:
    """Whether :func:`check_finite` passes every column of the 2-D array ``X`` (or the 1-D
    array ``X``), known
    without looking at columns one by one: every value finite and none above the bound for
    a column of ``len(X)`` values (the bound for fewer finite values is larger). False
    says only that the columns must be checked one by one."""
    if X.size == 0:
        return True
    largest = max(float(X.max()), -float(X.min()))  # NaN where any value is NaN
    return bool(largest <= math.sqrt(_FLOAT_MAX / X.shape[0]))


def check_scale(X: np.ndarray, names: tuple[str, ...], tol: float = 1e3) -> None:
    """lme4's ``check.scaleX``: warn when a continuous column of X (not only 0/1 values) has
    a standard deviation above ``tol`` or below ``1/tol``, or two of them differ by more
    than a factor ``tol``. The fit goes on, as in lme4."""
    binary = ((X == 0) | (X == 1)).all(axis=0) if X.size else np.ones(X.shape[1], bool)
    cont = (~binary).nonzero()[0].tolist()
    if not cont or X.shape[0] < 2:
        return
    sd = X[:, cont].std(axis=0, ddof=1)
    with np.errstate(divide="ignore"):
        logsd = np.log(sd)
    spread = logsd.max() - logsd.min()
    if np.abs(logsd).max() > np.log(tol) or spread > np.log(tol):
        shown = ", ".join(f"{names[j]} (sd {s:.3g})" for j, s in zip(cont, sd, strict=True))
        warn(
            "Some predictor variables are on very different scales: consider rescaling "
            f"({shown})",
        )


def check_response_varies(y: np.ndarray, name: str) -> None:
    """A constant response has no variance to split: refuse it (lme4 ends with a zero
    residual SD and convergence warnings)."""
    if len(y) and float(y.max()) == float(y.min()):
        raise DataError(
            f"response {name!r} is constant ({r_number(y[0])} in every row): there is no "
            "variance to model"
        )


class BinaryResponseWarning(UserWarning):
    """A linear mixed model of a response that is only ever 0 or 1."""


def check_binary_response(y: np.ndarray, name: str) -> None:
    """Warn when a linear mixed model's response takes only the values 0 and 1.

    lme4's ``lmer`` fits it without a word (a linear probability model); per-item
    correctness is usually a case for a logistic GLMM, so say so, and how."""
    if len(y) and bool(((y == 0.0) | (y == 1.0)).all()):
        warn(f"response {name!r} takes only the values 0 and 1: a linear mixed model treats "
             "it as continuous (a linear probability model); for correct/incorrect "
             "outcomes fit a logistic GLMM: crossed.glmer(formula, data, "
             "family=\"binomial\") (crossed fit --family binomial)", BinaryResponseWarning)


def _as_numbers(values: pd.api.extensions.ExtensionArray) -> object:
    """Nullable numbers (Int64, Float64) without missing values as numpy arrays."""
    if isinstance(values, pd.arrays.IntegerArray | pd.arrays.FloatingArray):
        kind = "int64" if isinstance(values, pd.arrays.IntegerArray) else "float64"
        return values.to_numpy(dtype=kind)
    return values


def _encode_factor(values: pd.api.extensions.ExtensionArray) -> tuple[np.ndarray, list[str]]:
    """Codes and R-ordered level labels of a factor column (no missing values).

    Every value becomes its R label (:func:`level_label`), so values R would see as the
    same level (``308``, ``308.0``, ``"308"``) are one level. Categoricals keep their
    category order (unused categories dropped); other columns sort as R sorts strings.
    """
    if isinstance(values.dtype, pd.CategoricalDtype):
        cat = values if isinstance(values, pd.Categorical) else pd.Categorical(values)
        codes = cat.codes.astype(np.int64)  # (a copy: ours)
        cats = [level_label(c) for c in cat.categories.tolist()]
        used = np.bincount(codes[codes >= 0], minlength=len(cats)) > 0
        lv = list(dict.fromkeys(c for c, u in zip(cats, used, strict=True) if u))
        if len(lv) == len(cats):  # (every category used, each its own label: the codes)
            return codes, lv
        position = {c: i for i, c in enumerate(lv)}
        perm = np.array([position.get(c, -1) for c in cats], dtype=np.int64)
        return perm[codes], lv
    strings = string_codes(values)  # (pyarrow strings: their labels as they are)
    if strings is not None:
        codes, labels = strings
        order = _r_string_order(labels)  # (distinct already)
        perm = np.empty(len(labels), dtype=np.int64)
        perm[order] = np.arange(len(labels), dtype=np.int64)
        return perm[codes], [labels[k] for k in order.tolist()]
    if pd.api.types.is_bool_dtype(values.dtype):
        values = np.asarray(values, dtype=bool)
    elif pd.api.types.is_object_dtype(values.dtype):
        values = _bools_as_labels(np.asarray(values, dtype=object))
    codes, uniques = pd.factorize(values)
    labels = [level_label(u) for u in uniques.tolist()]
    lv = _r_sorted(list(dict.fromkeys(labels)), False)
    position = {v: i for i, v in enumerate(lv)}
    perm = np.array([position[v] for v in labels], dtype=np.int64)
    return perm[codes], lv


def no_rows_left(missing: dict[str, np.ndarray]) -> DataError:
    """The error when dropping rows with missing values leaves none: names the columns
    missing in every row, else the columns with missing values and their counts.

    Parameters
    ----------
    missing : dict
        Column (or argument) name -> boolean mask of its missing rows.
    """
    every = [c for c, m in missing.items() if len(m) and bool(np.all(m))]
    if every:
        names = ", ".join(repr(c) for c in every)
        detail = (f"{names} {'is' if len(every) == 1 else 'are'} missing (NaN/None) in every "
                  "row")
    else:
        detail = "every row has a missing value in one of: " + ", ".join(
            f"{c!r} ({int(np.sum(m))} missing)" for c, m in missing.items() if np.any(m))
    return DataError(f"no rows left after dropping rows with missing values: {detail}")


def prepare(spec: ModelSpec, data: pd.DataFrame, na_action: str = "omit") -> PreparedFrame:
    """Select the used columns, drop (or reject) rows with missing values, encode factors.

    Column types are read as R would read them: numbers (also pandas' nullable ``Int64`` /
    ``Float64``) are numeric; strings, booleans, objects and categoricals are factors whose
    levels are R's labels (``308`` and ``"308"`` are one level); an ordered categorical is
    recorded in ``ordered`` (R codes it with polynomial contrasts); dates and durations
    may group but are refused as predictors; ``pd.NA``, ``None``
    and ``NaN`` are missing values. (Infinite values are refused in the model matrices, as
    R does: ``I(1 / x)`` of an infinite ``x`` is 0.)

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
    if not isinstance(na_action, str) or na_action not in ("omit", "raise"):
        raise ValueError(f"na_action must be 'omit' or 'raise', got {na_action!r}")
    if len(data) == 0:
        raise DataError("the data table is empty (0 rows)")
    label = {str(c): c for c in data.columns}
    used, _, as_value = _used_values(spec, list(label))
    check_unique_columns(data, used, labels=label)
    # the used columns as arrays (a frame is built once, at the end: cheaper than .loc or
    # column-wise frame operations for a few columns)
    arrays = {c: column_array(data, label[c]) for c in used}
    for c, a in arrays.items():
        check_column(c, a, c in as_value)
    missing = {c: _missing_mask(a) for c, a in arrays.items()}
    factor = {c for c, a in arrays.items() if is_categorical(a)}
    any_missing = np.logical_or.reduce(list(missing.values()))  # (the response is used)
    n_dropped = int(any_missing.sum())
    if n_dropped:
        where = ", ".join(f"{c} ({int(m.sum())})" for c, m in missing.items() if m.any())
        if na_action == "raise":
            raise DataError(f"{n_dropped} rows have missing values in: {where}")
        warn(
            f"{n_dropped} of {len(data)} rows dropped for missing values in: {where}",
        )
        keep = ~any_missing
        arrays = {c: a[keep] for c, a in arrays.items()}
    else:  # private copies (factors are re-encoded below)
        arrays = {c: a if c in factor else a.copy() for c, a in arrays.items()}
    if len(data) == n_dropped:
        raise no_rows_left(missing)
    levels: dict[str, list[str]] = {}
    codes_of: dict[str, tuple[np.ndarray, list[str]]] = {}
    ordered: list[str] = []
    reference = spec.reference_levels
    for col, values in arrays.items():
        if col not in factor:  # numeric grouping columns stay numeric
            arrays[col] = _as_numbers(values)
            if col in as_value:  # R computes in doubles: I(x^2) of an int8/int32 column
                arrays[col] = np.asarray(arrays[col], dtype=float)  # must not overflow
            continue
        if isinstance(values.dtype, pd.CategoricalDtype) and values.dtype.ordered:
            ordered.append(col)
        codes, lv = _encode_factor(values)
        if col in reference:
            ref = _match_level(reference[col], lv, col)
            relevelled = [ref] + [v for v in lv if v != ref]
            position = {v: i for i, v in enumerate(relevelled)}
            codes = np.array([position[v] for v in lv], dtype=np.int64)[codes]
            lv = relevelled
        levels[col] = lv
        codes_of[col] = (codes, lv)
    for col, lv in levels.items():
        if len(lv) < 2 and col in as_value and col != spec.response:
            # R's model.matrix stops too: "contrasts can be applied only to factors with 2
            # or more levels" (the term would otherwise vanish, or be an intercept)
            raise DataError(
                f"factor {col!r} has a single level ({str(lv[0])!r}) in the rows used; a "
                "factor needs two levels or more in a model formula (R: contrasts can be "
                "applied only to factors with 2 or more levels): drop it from the formula"
            )
    for col in reference:
        if col in arrays and col not in levels:  # used, but numeric (maybe inside C())
            raise DataError(
                f"reference level given for {col!r}, a numeric column: convert it to "
                f"strings (data[{col!r}].astype(str)) to use it as a factor with a reference "
                f"level, or order the levels in the formula: C({col}, levels=[...])"
            )
        if col not in levels:
            raise DataError(
                f"reference level given for {col!r}, which is not a factor in the model"
            )
    return PreparedFrame(names=tuple(arrays), n_rows=len(data) - n_dropped,
                         n_dropped=n_dropped, levels=levels, ordered=tuple(ordered),
                         values={c: a for c, a in arrays.items() if c not in codes_of},
                         codes=codes_of, data_columns=frozenset(label))


def _missing_mask(values: Any) -> np.ndarray:
    """Which values are missing (``pd.isna``); numpy arrays of numbers and booleans are
    answered without pandas."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "biuf":
        return np.isnan(values) if values.dtype.kind == "f" else np.zeros(len(values), bool)
    return np.asarray(pd.isna(values), dtype=bool)


def _match_level(ref: object, levels: list[str], column: str) -> str:
    """The level ``ref`` names: equal labels, or equal numbers (``"308.0"`` names ``"308"``,
    as ModelSpec keeps reference levels as strings)."""
    wanted = {"True": "TRUE", "False": "FALSE"}.get(str(ref), level_label(ref))
    for lv in levels:
        if lv == ref or level_label(lv) == wanted:
            return lv
    number = _as_float(wanted)
    if number is not None:
        for lv in levels:
            if _as_float(lv) == number:
                return lv
    shown = ", ".join(map(str, levels[:10]))
    raise DataError(f"reference level {ref!r} is not a level of {column!r} (levels: {shown})")


def _as_float(value: object) -> float | None:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def encode_new(data: pd.DataFrame, levels: dict[str, list[str]], columns: list[str]
               ) -> pd.DataFrame:
    """Select ``columns`` of new data; factor columns become their R level labels.

    Values of a factor column that R would see as a fitted level (``308.0`` for the level
    ``"308"``) become that level; other values keep their label, for the caller to report.
    """
    if not isinstance(data, pd.DataFrame):
        raise DataError(f"new data must be a pandas DataFrame, got {type(data).__name__}")
    missing = [c for c in columns if c not in data.columns]
    if missing:
        raise DataError(f"column {missing[0]!r} is not in the new data")
    check_unique_columns(data, columns, "new data")
    frame = data.loc[:, columns].copy()
    for col in levels:
        if col in frame.columns:
            frame[col] = labels_of(frame[col])
    return frame


def check_unique_columns(data: pd.DataFrame, columns: list[str], what: str = "data",
                         labels: dict[str, Hashable] | None = None) -> None:
    """Refuse a used column whose name appears more than once in ``data`` (``labels``:
    the data's columns by their names as strings, where the caller has formed them)."""
    if labels is not None and len(labels) == len(data.columns):  # (every name once)
        return
    names = [str(c) for c in data.columns]
    if len(set(names)) == len(names):  # (the usual case, without pandas' counting)
        return
    counts = pd.Series(names).value_counts()
    for c in columns:
        if counts.get(c, 0) > 1:
            raise DataError(f"column {c!r} appears {int(counts[c])} times in the {what}; "
                            "give each column a distinct name")


def _bools_as_labels(values: np.ndarray) -> np.ndarray:
    """Booleans of an object array as "TRUE"/"FALSE": Python hashes True like 1 and 1.0,
    so hashing would merge levels R keeps apart ("TRUE" and "1"). Hashing keeps whichever
    came first, so any distinct value equal to 0 or 1 calls for the closer look."""
    distinct = pd.unique(values)
    if not any(isinstance(v, numbers.Number) and cast(object, v) in (0, 1) for v in distinct):
        return values
    return np.array([("TRUE" if v else "FALSE") if isinstance(v, bool | np.bool_) else v
                     for v in values], dtype=object)


def labels_of(values: pd.Series) -> np.ndarray:
    """R's label of every value (object array), NaN where missing; computed once per
    distinct value."""
    objects = _bools_as_labels(np.asarray(values, dtype=object))
    codes, uniques = pd.factorize(objects, use_na_sentinel=True)
    labels = np.array([level_label(u) for u in uniques] + [np.nan], dtype=object)
    return cast(np.ndarray, labels[codes])  # code -1 (missing) takes the trailing NaN


def check_numeric_response(y: np.ndarray, name: str) -> np.ndarray:
    """The response as float64; raises for non-numeric or non-finite values."""
    try:
        out = np.asarray(y, dtype=float)
    except (TypeError, ValueError):
        raise DataError(f"response {name!r} is not numeric") from None
    undefined = np.isnan(out)
    if undefined.any():
        raise DataError(f"response {name!r} has {int(undefined.sum())} undefined (NaN) "
                        "values after evaluation")
    check_finite(name, out, what="response")
    spread = float(np.abs(out - out.mean()).max()) if out.size else 0.0
    if 0.0 < spread < 1e-140:  # its squares (the residual variance) underflow
        raise DataError(f"response {name!r} varies by too little to fit (largest deviation "
                        f"from its mean {spread:.3g}); rescale it")
    return out
