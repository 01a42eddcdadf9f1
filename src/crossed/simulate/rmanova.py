"""Univariate repeated-measures ANOVA (sphericity assumed) on complete subjects.

The classical alternative to a mixed model for a within-subject design: every subject
must have every cell (combination of the within factors), so a subject missing one cell is
removed entirely (listwise deletion). For an effect E (a set of within factors) the cell
means of each subject are averaged over the other within factors, projected on the
orthonormal contrasts of E (Helmert-type, Kronecker products for interactions), and

    F = (n · ‖ȳ‖² / d) / (Σ_s ‖y_s − ȳ‖² / (d (n − 1))),  df = (d, d (n − 1)),

with n complete subjects and d = Π (k_i − 1). Validated against statsmodels' ``AnovaRM``
(``tests/simulate/test_ablation.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

__all__ = ["PreparedRMAnova", "RMAnova"]


def _orthonormal_contrasts(k: int) -> np.ndarray:
    """(k − 1) x k orthonormal rows orthogonal to the constant (Helmert, normalised)."""
    C = np.zeros((k - 1, k))
    for i in range(1, k):
        C[i - 1, :i] = -1.0
        C[i - 1, i] = i
        C[i - 1] /= np.linalg.norm(C[i - 1])
    return C


@dataclass
class RMAnova:
    """Repeated-measures ANOVA F test of one within-subject effect.

    Parameters
    ----------
    subject : str
        Column identifying the subject (e.g. ``"model"``).
    within : list of str
        Within-subject factor columns (e.g. ``["language", "task", "mode"]``).
    effect : str
        The effect to test: a within factor or an interaction ``"language:task"``.
    response : str
        Response column.
    """

    subject: str
    within: list[str]
    effect: str
    response: str

    def prepare(self, data: pd.DataFrame) -> PreparedRMAnova:
        """Integer codes of subjects and cells for fast repeated tests on row subsets."""
        missing = [c for c in [self.subject, *self.within, self.response] if c not in data]
        if missing:
            raise ValueError(f"columns {missing} are not in the data")
        eff = [v.strip() for v in self.effect.split(":")]
        if any(e not in self.within for e in eff):
            raise ValueError(f"effect {self.effect!r} must use the within factors {self.within}")
        subj = pd.Categorical(data[self.subject].astype(str))
        codes, sizes = [], []
        for w in self.within:
            c = pd.Categorical(data[w].astype(str))
            codes.append(np.asarray(c.codes, dtype=np.int64))
            sizes.append(len(c.categories))
        cell = np.ravel_multi_index(codes, sizes) if codes else np.zeros(len(data), int)
        # contrast matrix over cells: kron over within factors, contrasts for the effect's
        # factors, averaging for the others (first within factor slowest, as ravel)
        C = np.ones((1, 1))
        for w, k in zip(self.within, sizes, strict=True):
            part = _orthonormal_contrasts(k) if w in eff else np.full((1, k), 1.0 / k)
            C = np.kron(C, part)
        return PreparedRMAnova(subject=np.asarray(subj.codes, dtype=np.int64),
                               n_subjects=len(subj.categories), cell=cell,
                               n_cells=int(np.prod(sizes)), C=C,
                               y=data[self.response].to_numpy(dtype=float), label=self.effect)


@dataclass
class PreparedRMAnova:
    subject: np.ndarray
    n_subjects: int
    cell: np.ndarray
    n_cells: int
    C: np.ndarray
    y: np.ndarray
    label: str

    def __call__(self, rows: np.ndarray | None = None) -> dict:
        """F test on the rows kept. Returns ``status`` ("ok" or "failed"),
        ``n_subjects`` (complete subjects used), ``num_df``, ``den_df``, ``statistic``,
        ``p_value``."""
        idx = np.arange(len(self.y)) if rows is None else np.arange(len(self.y))[rows]
        key = self.subject[idx] * self.n_cells + self.cell[idx]
        size = self.n_subjects * self.n_cells
        counts = np.bincount(key, minlength=size).reshape(self.n_subjects, self.n_cells)
        sums = np.bincount(key, weights=self.y[idx], minlength=size)
        sums = sums.reshape(self.n_subjects, self.n_cells)
        complete = np.all(counts > 0, axis=1)
        n = int(complete.sum())
        d = self.C.shape[0]
        out = {"n_subjects": n, "num_df": float(d), "den_df": float(d * (n - 1))}
        if n < 2:
            return {**out, "status": "failed", "statistic": np.nan, "p_value": np.nan}
        means = sums[complete] / counts[complete]
        Y = means @ self.C.T  # (n, d)
        ybar = Y.mean(axis=0)
        ss_eff = n * float(ybar @ ybar)
        ss_err = float(np.sum((Y - ybar) ** 2))
        if ss_err <= 0:
            return {**out, "status": "failed", "statistic": np.nan, "p_value": np.nan}
        F = (ss_eff / d) / (ss_err / (d * (n - 1)))
        return {**out, "status": "ok", "statistic": F,
                "p_value": float(stats.f.sf(F, d, d * (n - 1)))}
