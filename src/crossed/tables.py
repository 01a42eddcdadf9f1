"""Result tables and summaries that read well in a terminal and in a notebook.

Display only: nothing here computes a statistic. Every number is formatted by the rules of
:mod:`crossed._format` (R's ``format`` on a column, ``format.pval``, emmeans' ``<.0001``).

- :class:`ResultTable`: a :class:`pandas.DataFrame` (every DataFrame operation works and
  returns a plain DataFrame) whose ``repr`` and ``_repr_html_`` show the formatted view;
  :meth:`ResultTable.formatted` gives that view as strings, :attr:`ResultTable.frame` the
  plain DataFrame.
- :class:`Summary`: a ``str`` (the text R prints, unchanged) with ``.tables`` for
  programmatic use and an HTML view for notebooks.
- :class:`ResultDisplay`: a mixin giving result objects a short ``repr`` and an HTML view
  of their tables.
"""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd

from crossed._format import (
    format_number_column,
    format_pvalue_emmeans,
    format_pvalues_r,
    is_pvalue_column,
)

__all__ = ["PValueStyle", "ResultDisplay", "ResultTable", "Summary", "format_frame",
           "html_table", "html_text_table", "note_text", "result_table", "returns_table",
           "wrap_html"]

PValueStyle = Literal["r", "emmeans"]

_CSS = ("<style>.crossed-result table.crossed{border-collapse:collapse;font-size:0.9em;"
        "font-variant-numeric:tabular-nums;margin:0.3em 0 0.6em 0}"
        ".crossed-result table.crossed th,.crossed-result table.crossed td{padding:2px 6px;"
        "border-bottom:1px solid #ddd;white-space:nowrap}"
        ".crossed-result table.crossed th{text-align:right;border-bottom:1px solid #888}"
        # labels and headings wrap where a table would be wider than the page (a long
        # explanation; a long column name after its "_"); numbers never do
        ".crossed-result table.crossed td.txt,.crossed-result table.crossed th{"
        "white-space:normal}"
        ".crossed-result td.num{text-align:right}.crossed-result td.txt,"
        ".crossed-result table.crossed th.txt{text-align:left}"
        ".crossed-result .head{font-family:monospace;white-space:pre;margin:0.2em 0}"
        ".crossed-result .note{color:#555;font-size:0.85em;margin:0.1em 0}"
        ".crossed-result h4{margin:0.4em 0 0.2em 0}</style>")


def note_text(message: str) -> str:
    """A note's text without its own ``NOTE:`` prefix (emmeans' messages carry one), so
    that it is never printed as ``note: NOTE: ...``."""
    text = str(message).strip()
    return text[5:].lstrip() if text[:5].upper() == "NOTE:" else text


def _is_number_column(s: pd.Series) -> bool:
    return (pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s))


def _format_column(name: str, s: pd.Series, pvalues: PValueStyle, na: str) -> list[str]:
    if pd.api.types.is_bool_dtype(s):
        return ["yes" if bool(v) else "no" for v in s]
    if pd.api.types.is_integer_dtype(s):  # nullable integers (Int64) print a missing one as na
        return [na if v is pd.NA or v is None else str(int(v)) for v in s]
    if _is_number_column(s):
        vals = s.to_numpy(dtype=float)
        if is_pvalue_column(name):
            if pvalues == "emmeans":
                return [na if np.isnan(v) else format_pvalue_emmeans(v) for v in vals]
            return [na if t == "NA" else t for t in format_pvalues_r(vals)]
        return format_number_column(vals, 4, na=na)
    out = []
    for v in s:
        if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA:
            out.append("")
        elif isinstance(v, bool | np.bool_):
            out.append("yes" if v else "no")
        elif isinstance(v, float | np.floating):
            out.append(format_number_column([float(v)], 4, na=na)[0])
        else:
            out.append(str(v))
    return out


def format_frame(df: pd.DataFrame, pvalues: PValueStyle = "r", na: str = "NA") -> pd.DataFrame:
    """The table as strings, every column formatted as R formats a column.

    Parameters
    ----------
    df : pandas.DataFrame
    pvalues : {"r", "emmeans"}
        p-value columns (``p_value``, ``*_p``) as R's ``format.pval`` (``< 2e-16``) or as
        emmeans prints them (``<.0001``).
    na : str
        Text of a missing number (R's ``NA``); missing labels are empty.
    """
    return pd.DataFrame({c: _format_column(str(c), df[c], pvalues, na) for c in df.columns},
                        index=df.index, columns=df.columns)


def _footnotes(attrs: Mapping[str, Any], emmeans: bool = False) -> list[str]:
    """The lines printed below a table, as emmeans prints them: the scale (``attrs
    ["scale_messages"]``, "Results are given on the logit (not the response) scale."), the
    df method of an EMM table of an lmer (not of a glmer, as emmeans), confidence level,
    adjustment, messages."""
    notes = [str(m) for m in attrs.get("scale_messages", []) or []]
    if attrs.get("conf_level") is not None and attrs.get("show_conf", True):
        notes.append(f"Confidence level used: {attrs['conf_level']:g}")
    # emmeans names the df method of an lmer grid (lmer.df = "asymptotic" for df = Inf);
    # a glmer grid (attrs["show_ddf"] False) says nothing
    if emmeans and attrs.get("ddf") and attrs.get("show_ddf", True):
        ddf = "asymptotic" if attrs["ddf"] == "none" else attrs["ddf"]
        notes.insert(0, f"Degrees-of-freedom method: {ddf}")
    adjust = attrs.get("adjust")
    if adjust and adjust != "none":
        notes.append(f"P value adjustment: {adjust} method")
    notes += [str(m) for m in attrs.get("messages", []) or []]
    return notes


def html_table(df: pd.DataFrame, pvalues: PValueStyle = "r", title: str | None = None,
               notes: Sequence[str] = (), na: str | None = None) -> str:
    """An HTML ``<table>`` of ``df`` formatted by :func:`format_frame` (numbers right
    aligned, labels left aligned), with an optional title and notes below."""
    na = _na_text(df.attrs) if na is None else na
    if _labelled(df.index):  # row names (a coefficient table's terms) as a first column,
        # under the index's name, else blank (as R prints row names), never "index"
        df = df.rename_axis(df.index.name if df.index.name is not None else "").reset_index()
    shown = format_frame(df, pvalues, na=na)
    numeric = [_is_number_column(df[c]) or pd.api.types.is_bool_dtype(df[c])
               for c in df.columns]
    return html_text_table(shown, numeric, title, notes)


def _na_text(attrs: Mapping[str, Any]) -> str:
    """How a table shows a missing number: ``attrs["na"]`` (``""`` where R prints a blank,
    as ``drop1``'s ``<none>`` row), else R's ``NA``."""
    return str(attrs.get("na", "NA"))


def html_text_table(shown: pd.DataFrame, numeric: Sequence[bool], title: str | None = None,
                    notes: Sequence[str] = ()) -> str:
    """An HTML ``<table>`` of cells already formatted as text (``shown``: strings, its
    columns the header), numbers (``numeric`` true) right aligned, labels left aligned,
    with an optional title and notes below: the table of :func:`html_table`, for a
    result that formats its own cells (R's digits of a particular print method)."""
    head = "".join(f'<th class="{"num" if n else "txt"}">{_breakable(str(c))}</th>'
                   for c, n in zip(shown.columns, numeric, strict=True))
    rows = []
    for rec in shown.itertuples(index=False):
        cells = "".join(f'<td class="{"num" if n else "txt"}">{html.escape(v)}</td>'
                        for v, n in zip(rec, numeric, strict=True))
        rows.append(f"<tr>{cells}</tr>")
    out = [f"<h4>{html.escape(title)}</h4>"] if title else []
    out.append(f'<table class="crossed"><thead><tr>{head}</tr></thead>'
               f'<tbody>{"".join(rows)}</tbody></table>')
    out += [f'<p class="note">{html.escape(n)}</p>' for n in notes]
    return "".join(out)


def _breakable(name: str) -> str:
    """A column name as HTML that may break after ``_`` and before ``[`` (only where the
    table would not fit otherwise): ``dfbetas_(Intercept)``, ``v[(Intercept)]``."""
    text = html.escape(name)
    return text.replace("_", "_<wbr>").replace("[", "<wbr>[")


def _labelled(index: pd.Index) -> bool:
    """Whether an index holds row names worth printing (not the default 0, 1, ...)."""
    return not isinstance(index, pd.RangeIndex)


def wrap_html(body: str) -> str:
    """``body`` in the notebook view's container, with its style sheet."""
    return f'<div class="crossed-result">{_CSS}{body}</div>'


class ResultTable(pd.DataFrame):
    """A result table: a :class:`pandas.DataFrame` displayed as R/emmeans print it.

    Everything a DataFrame does works unchanged (columns, ``attrs``, ``to_numpy``...);
    operations that derive a new table (selection, ``copy``, arithmetic) return a plain
    DataFrame. Only the display differs: ``repr``/``print`` and the notebook view format
    each numeric column as R's ``format(x, digits = 4)`` does and p-values as
    ``format.pval`` (lme4/lmerTest tables) or emmeans (``<.0001``) do, with the
    confidence level, adjustment and notes below the table.
    """

    _metadata = ["_pvalues", "_title"]
    _pvalues: PValueStyle = "r"
    _title: str | None = None

    @property
    def _constructor(self) -> Callable[..., pd.DataFrame]:
        return pd.DataFrame

    @property
    def frame(self) -> pd.DataFrame:
        """The same data as a plain DataFrame (a copy, ``attrs`` kept)."""
        out = pd.DataFrame(self, copy=True)
        out.attrs = dict(self.attrs)
        return out

    def formatted(self) -> pd.DataFrame:
        """The table as strings, as displayed (see :func:`format_frame`; a missing number
        reads ``attrs["na"]``, R's ``NA`` unless the table says otherwise)."""
        return format_frame(pd.DataFrame(self), self._pvalues, na=_na_text(self.attrs))

    def to_text(self) -> str:
        """Aligned text as R prints the table (row names only where the index holds
        labels, not 0, 1, ...), with its notes."""
        shown = self.formatted()
        body = (shown.to_string(index=_labelled(shown.index)) if len(shown)
                else "(no rows)")
        lines = ([self._title] if self._title else []) + [body]
        return "\n".join(lines + _footnotes(self.attrs, self._pvalues == "emmeans"))

    def __repr__(self) -> str:
        return self.to_text()

    def __str__(self) -> str:
        return self.to_text()

    def _repr_html_(self) -> str:
        return wrap_html(html_table(pd.DataFrame(self), self._pvalues, self._title,
                                    _footnotes(self.attrs, self._pvalues == "emmeans"),
                                    na=_na_text(self.attrs)))


def result_table(df: pd.DataFrame, pvalues: PValueStyle = "r",
                 title: str | None = None) -> ResultTable:
    """``df`` as a :class:`ResultTable` (same data and ``attrs``; no copy of the values)."""
    if isinstance(df, ResultTable):
        return df
    out = ResultTable(df)
    out.attrs = dict(df.attrs)
    out._pvalues = pvalues
    out._title = title
    return out


def returns_table(function: Callable[..., pd.DataFrame],
                  pvalues: PValueStyle = "r") -> Callable[..., pd.DataFrame]:
    """``function`` returning its DataFrame as a :class:`ResultTable` (same name and
    docstring): how the fit's table methods get their display."""
    import functools

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> pd.DataFrame:
        out = function(*args, **kwargs)
        return result_table(out, pvalues) if isinstance(out, pd.DataFrame) else out

    return wrapper


class Summary(str):
    """A printed summary: the text (``str(summary)``, what R prints) plus its tables.

    Attributes
    ----------
    tables : dict of str to pandas.DataFrame
        The summary's tables for programmatic use (names as the text's headings).
    title : str
        The first line.
    header : list of str
        The lines between the title and the tables (formula, data, criteria).
    notes : list of str
        Notes printed after the tables.
    """

    tables: dict[str, pd.DataFrame]
    title: str
    header: list[str]
    notes: list[str]
    pvalues: PValueStyle

    def __new__(cls, text: str, tables: Mapping[str, pd.DataFrame] | None = None,
                title: str = "", header: Sequence[str] = (), notes: Sequence[str] = (),
                pvalues: PValueStyle = "r") -> Summary:
        obj = super().__new__(cls, text)
        obj.tables = dict(tables or {})
        obj.title = title
        obj.header = list(header)
        obj.notes = list(notes)
        obj.pvalues = pvalues
        return obj

    def __repr__(self) -> str:
        return str(self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # IPython's text view
        printer.text(str(self))

    def _repr_html_(self) -> str:
        parts = [f"<h4>{html.escape(self.title)}</h4>"] if self.title else []
        if self.header:
            parts.append(f'<div class="head">{html.escape(chr(10).join(self.header))}</div>')
        for name, table in self.tables.items():
            parts.append(html_table(table, self.pvalues, name, _footnotes(
                {k: v for k, v in table.attrs.items() if k != "conf_level"})))
        parts += [f'<p class="note">note: {html.escape(note_text(n))}</p>' for n in self.notes]
        return wrap_html("".join(parts))


def _describe(value: Any) -> str | None:
    if isinstance(value, pd.DataFrame):
        return f"table {value.shape[0]}×{value.shape[1]}"
    if isinstance(value, np.ndarray):
        return "array " + "×".join(str(d) for d in value.shape)
    if isinstance(value, bool | int | float | str | np.number) and len(str(value)) < 40:
        return repr(value) if isinstance(value, str) else str(value)
    return None


class ResultDisplay:
    """Mixin: a one-line ``repr`` and a notebook view of a result's tables.

    The ``repr`` names the class and its small fields (tables and arrays by their shape,
    never their contents). ``_repr_html_`` shows :meth:`display_tables`: by default every
    DataFrame field, each under its name. A dataclass using it is declared with
    ``repr=False`` so that the dataclass ``repr`` does not replace this one.
    """

    def display_tables(self) -> dict[str, pd.DataFrame]:
        """The tables the notebook view shows, by title."""
        if not dataclasses.is_dataclass(self):
            return {}
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if isinstance(getattr(self, f.name), pd.DataFrame)}

    def _fields_summary(self) -> list[str]:
        if not dataclasses.is_dataclass(self):
            return []
        out = []
        for f in dataclasses.fields(self):
            if not f.repr:
                continue
            d = _describe(getattr(self, f.name))
            if d is not None:
                out.append(f"{f.name}: {d}")
        return out

    def __repr__(self) -> str:
        inner = ", ".join(self._fields_summary())
        return f"<{type(self).__name__}{': ' + inner if inner else ''}>"

    def _repr_html_(self) -> str:
        parts = [f"<h4>{html.escape(type(self).__name__)}</h4>"]
        for name, table in self.display_tables().items():
            style: PValueStyle = getattr(table, "_pvalues", "r")
            parts.append(html_table(table, style, name, _footnotes(table.attrs)))
        return wrap_html("".join(parts))


class TableDisplay:
    """Mixin: a result shown as its ``table()``, as emmeans prints an ``emmGrid``: the text
    ``repr``/``str`` and the notebook view are the table's (``describe()`` gives a line).
    A dataclass using it is declared with ``repr=False``, so that the dataclass ``repr``
    does not replace this one."""

    def table(self) -> pd.DataFrame:  # (each result: its own table)
        raise NotImplementedError

    def __repr__(self) -> str:
        return str(self.table())

    def __str__(self) -> str:
        return str(self.table())

    def _repr_html_(self) -> str:
        return str(self.table()._repr_html_())
