"""Bundled example tables (synthetic evaluation designs shipped with crossed)."""

from __future__ import annotations

from importlib import resources

import pandas as pd

# file name and the columns that are factors (read as strings, as R's reference fits do)
_DATASETS: dict[str, tuple[str, tuple[str, ...]]] = {
    "exist_multi": ("exist_multi.csv", ("architecture", "model", "language", "task", "mode")),
    "exist_mono": ("exist_mono.csv", ("architecture", "model", "language", "task", "mode")),
    "exist_raw": ("exist_raw.csv", ("architecture", "model", "language", "task", "mode")),
    "blurb_like": ("blurb_like.csv", ("model", "dataset", "seed", "lr", "batch_size")),
    "ner_like": ("ner_like.csv", ("model", "language", "seed")),
    # real: 6 pretrained models x 36 datasets x 20 seeds (model-recycling; see data/README.md)
    "model_recycling_seeds": ("model_recycling_seeds.csv.gz", ("model", "dataset", "seed")),
}


def list_datasets() -> list[str]:
    """Names of the bundled example tables."""
    return sorted(_DATASETS)


def load_dataset(name: str) -> pd.DataFrame:
    """Load a bundled example table by name.

    Parameters
    ----------
    name : str
        One of :func:`list_datasets`.

    Returns
    -------
    pandas.DataFrame
        The table; its factor columns (identifiers, seeds, learning rates, ...) are read as
        strings exactly as written in the file, all other columns as numbers.
    """
    if name not in _DATASETS:
        raise ValueError(f"unknown dataset {name!r}; available: {', '.join(list_datasets())}")
    file, factors = _DATASETS[name]
    with resources.as_file(resources.files("crossed") / "data" / file) as path:
        return pd.read_csv(path, dtype={c: str for c in factors})
