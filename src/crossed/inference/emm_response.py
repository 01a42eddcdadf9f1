"""Back-transformation of EMMs and contrasts to the response scale (emmeans' ``type =
"response"``, ``regrid``), for a response transformed in the formula.

Recognised responses (as emmeans recognises them in a model formula): ``log(y)`` /
``np.log(y)``, ``log2``, ``log10``, ``log1p``, ``sqrt`` and ``exp`` of a column (also with
the ``np.`` prefix). On the response scale:

- an EMM μ = h⁻¹(η̂) with the delta-method SE |dμ/dη|·SE(η̂); its interval is the link
  interval back-transformed (emmeans);
- a contrast of a log-type response (log, log2, log10) becomes a ratio b^(η̂₁ − η̂₂) labelled
  ``A / B``, with SE ratio·ln(b)·SE and the interval back-transformed; t ratio and p value
  stay those of the difference (tested against ratio 1);
- a contrast of another transform stays on the transformed scale, as emmeans leaves it
  (with its note "contrasts are still on the ... scale").
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["Transform", "back_contrasts", "back_means", "ratio_label", "response_transform"]


@dataclass(frozen=True)
class Transform:
    """A response transformation η = g(y) and what the response scale needs.

    Attributes
    ----------
    name : str
        emmeans' name (``"log"``, ``"sqrt"``, ...).
    linkinv : callable
        y = g⁻¹(η).
    mu_eta : callable
        dy/dη at η.
    ratio_base : float or None
        For log-type transforms, the base b: contrasts back-transform to ratios b^Δ.
    """

    name: str
    linkinv: Callable[[np.ndarray], np.ndarray]
    mu_eta: Callable[[np.ndarray], np.ndarray]
    ratio_base: float | None = None


_TRANSFORMS = {
    "log": Transform("log", np.exp, np.exp, np.e),
    "log2": Transform("log2", lambda e: 2.0 ** e, lambda e: 2.0 ** e * np.log(2.0), 2.0),
    "log10": Transform("log10", lambda e: 10.0 ** e, lambda e: 10.0 ** e * np.log(10.0), 10.0),
    "log1p": Transform("log1p", np.expm1, np.exp),
    "sqrt": Transform("sqrt", lambda e: np.maximum(e, 0.0) ** 2, lambda e: 2.0 * e),
    "exp": Transform("exp", np.log, lambda e: 1.0 / e),
}
_CALL = re.compile(r"^\s*(?:np\.|numpy\.)?(log|log2|log10|log1p|sqrt|exp)\((.+)\)\s*$", re.S)
_COLUMN = re.compile(r"\s*(?:`[^`]+`|(?:[^\W\d]|\.)[\w.]*)\s*")


def response_transform(response: str) -> Transform | None:
    """The transform of a response written as ``f(column)`` (``np.log(y)``), else None."""
    m = _CALL.match(response)
    if m is None or not _COLUMN.fullmatch(m.group(2)):
        return None
    return _TRANSFORMS[m.group(1)]


def back_means(tab: pd.DataFrame, tran: Transform) -> pd.DataFrame:
    """An EMM table (``estimate``, ``std_error``, ``conf_low``, ``conf_high``) on the response
    scale: ``estimate`` becomes ``response`` (emmeans' column name)."""
    out = tab.copy()
    eta = out["estimate"].to_numpy(dtype=float)
    out["std_error"] = np.abs(tran.mu_eta(eta)) * out["std_error"].to_numpy(dtype=float)
    out["estimate"] = tran.linkinv(eta)
    for c in ("conf_low", "conf_high"):
        out[c] = tran.linkinv(out[c].to_numpy(dtype=float))
    out = out.rename(columns={"estimate": "response"})
    out.attrs.update(tab.attrs)
    out.attrs["type"] = "response"
    out.attrs["messages"] = [*tab.attrs.get("messages", []),
                             f"Intervals are back-transformed from the {tran.name} scale"]
    return out


def back_contrasts(tab: pd.DataFrame, tran: Transform) -> pd.DataFrame:
    """A contrast table on the response scale: ratios for log-type transforms (``ratio``
    column, labels ``A / B``), else unchanged with emmeans' note."""
    out = tab.copy()
    out.attrs.update(tab.attrs)
    if tran.ratio_base is None:
        out.attrs["messages"] = [*tab.attrs.get("messages", []),
                                 f"Note: contrasts are still on the {tran.name} scale"]
        return out
    base = tran.ratio_base
    est = out["estimate"].to_numpy(dtype=float)
    ratio = base ** est
    out["std_error"] = ratio * np.log(base) * out["std_error"].to_numpy(dtype=float)
    out["estimate"] = ratio
    for c in ("conf_low", "conf_high"):
        if c in out:
            out[c] = base ** out[c].to_numpy(dtype=float)
    out["contrast"] = [ratio_label(c) for c in out["contrast"]]
    out = out.rename(columns={"estimate": "ratio"})
    out.attrs["type"] = "response"
    out.attrs["messages"] = [*tab.attrs.get("messages", []),
                             f"Intervals are back-transformed from the {tran.name} scale",
                             f"Tests are performed on the {tran.name} scale"]
    return out


def ratio_label(label: str) -> str:
    """``A - B`` -> ``A / B`` (emmeans' label of a back-transformed difference). Only the
    ``" - "`` outside parentheses separates: a level name holding ``-`` is parenthesised
    in a contrast label (``(gpt-4 - mini) - base`` -> ``(gpt-4 - mini) / base``)."""
    depth, cuts = 0, []
    for i, ch in enumerate(label):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0 and label.startswith(" - ", i):
            cuts.append(i)
    if len(cuts) != 1:
        return label
    return f"{label[:cuts[0]]} / {label[cuts[0] + 3:]}"
