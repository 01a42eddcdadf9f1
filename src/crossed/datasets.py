"""Bundled example tables (synthetic evaluation designs shipped with crossed), and the
reader of data files the command line uses (:func:`read_data`)."""

from __future__ import annotations

import csv
import functools
import gzip
import json
import warnings
from collections import Counter
from importlib import resources
from pathlib import Path

import pandas as pd

__all__ = ["DATA_SUFFIXES", "EXACT_FLOATS", "data_format", "item_level_irt", "list_datasets",
           "load_dataset", "read_data", "sniff_delimiter"]

EXACT_FLOATS: dict[str, str] = (
    {"float_precision": "round_trip"} if int(pd.__version__.split(".")[0]) < 3 else {})
"""``pd.read_csv`` options that read numbers correctly rounded (as R's ``strtod``): pandas
3's default parser is; pandas 2's is one ulp off on some values, and ``round_trip`` is
deprecated (a warning) from pandas 3 on."""

# file name and the columns that are factors (read as strings, as R's reference fits do)
_DATASETS: dict[str, tuple[str, tuple[str, ...]]] = {
    "exist_multi": ("exist_multi.csv", ("architecture", "model", "language", "task", "mode")),
    "exist_mono": ("exist_mono.csv", ("architecture", "model", "language", "task", "mode")),
    "exist_raw": ("exist_raw.csv", ("architecture", "model", "language", "task", "mode")),
    "blurb_like": ("blurb_like.csv", ("model", "dataset", "seed", "lr", "batch_size")),
    "ner_like": ("ner_like.csv", ("model", "language", "seed")),
    # real: 6 pretrained models x 36 datasets x 20 seeds (model-recycling; see data/README.md)
    "model_recycling_seeds": ("model_recycling_seeds.csv.gz", ("model", "dataset", "seed")),
    # lme4's example data, under the names R users know (lme4 1.1-31; see data/README.md)
    "sleepstudy": ("sleepstudy.csv", ("Subject",)),
    "Penicillin": ("Penicillin.csv", ("plate", "sample")),
    "Dyestuff": ("Dyestuff.csv", ("Batch",)),
    "InstEval": ("InstEval.csv.gz", ("s", "d", "studage", "lectage", "service", "dept")),
    "cbpp": ("cbpp.csv", ("herd", "period")),
    "grouseticks": ("grouseticks.csv", ("INDEX", "BROOD", "YEAR", "LOCATION")),
    # item-level correctness: 40 items x systems x datasets, 0/1 (synthetic)
    "item_level_binary": ("item_level_binary.csv.gz", ("item", "dataset", "system")),
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
        strings exactly as written in the file, all other columns as numbers. The factors
        of lme4's example data (``sleepstudy``, ``cbpp``, ``InstEval``, ...) are pandas
        Categoricals with the levels in the order lme4's data has them (``cbpp$herd``:
        1, 2, ..., 15, not the string order 1, 10, 11, ...; ``InstEval$dept``: 15, 5, 10,
        ...), so that ``ranef()``, coefficient names and reference levels read as in R on
        ``data(cbpp)`` (``data/levels.json``, written by ``scripts/r_levels.R``).
    """
    if name not in _DATASETS:
        raise ValueError(f"unknown dataset {name!r}; available: {', '.join(list_datasets())}")
    file, factors = _DATASETS[name]
    with resources.as_file(resources.files("crossed") / "data" / file) as path:
        # correctly rounded numbers (R's strtod; pandas 3's default), whatever pandas
        data = pd.read_csv(path, dtype={c: str for c in factors}, **EXACT_FLOATS)
    for column, levels in _r_levels().get(name, {}).items():
        unknown = set(data[column].unique()) - set(levels)
        if unknown:  # (the bundled files and levels.json are written together)
            raise ValueError(f"dataset {name!r}: column {column!r} has values outside R's "
                             f"levels: {sorted(unknown)[:5]}")
        data[column] = pd.Categorical(data[column], categories=levels)
    return data


@functools.cache
def _r_levels() -> dict[str, dict[str, list[str]]]:
    """R's level order of the factors of lme4's example data, by dataset and column."""
    text = (resources.files("crossed") / "data" / "levels.json").read_text(encoding="utf-8")
    return json.loads(text)


def item_level_irt(n_systems: int = 6, n_items: int = 150, n_datasets: int = 3,
                   seed: int = 0, ability_sd: float = 0.6, difficulty_sd: float = 1.2,
                   dataset_sd: float = 0.5, discrimination_sd: float = 0.3) -> pd.DataFrame:
    """A synthetic item-level evaluation table: every system answers every test item of
    every dataset, correct or not, from a two-parameter IRT model.

    For system s, item i of dataset d::

        P(correct) = logistic(a_i · (θ_s − b_i − δ_d))

    with system ability θ_s (evenly spaced over ±1.5 ``ability_sd``: fixed, known
    contrasts), item difficulty b_i ~ N(0, ``difficulty_sd``²), dataset difficulty
    δ_d ~ N(0, ``dataset_sd``²) and item discrimination a_i = exp(N(0,
    ``discrimination_sd``²)) (1 for every item when 0). Deterministic for a given
    ``seed`` (numpy's ``default_rng``).

    Parameters
    ----------
    n_systems, n_items, n_datasets : int
        Systems; items per dataset; datasets. Rows: n_systems × n_items × n_datasets.
    seed : int
    ability_sd, difficulty_sd, dataset_sd, discrimination_sd : float

    Returns
    -------
    pandas.DataFrame
        Columns ``system`` (``"sys01"``, ...), ``dataset`` (``"ds1"``, ...), ``item``
        (``"ds1_i0001"``, ...: unique across datasets), ``correct`` (0/1 int). The true
        parameters are in ``attrs``: ``ability`` (per system), ``difficulty``,
        ``discrimination`` (per item, in item order), ``dataset_shift``.
    """
    import numpy as np

    for name, v in (("n_systems", n_systems), ("n_items", n_items),
                    ("n_datasets", n_datasets)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a whole number >= 1, got {v!r}")
    rng = np.random.default_rng(seed)
    ability = (np.linspace(-1.5, 1.5, n_systems) * ability_sd if n_systems > 1
               else np.zeros(1))
    n_total = n_items * n_datasets
    difficulty = rng.normal(0.0, difficulty_sd, n_total)
    discrimination = np.exp(rng.normal(0.0, discrimination_sd, n_total))
    shift = rng.normal(0.0, dataset_sd, n_datasets)
    sys_idx = np.repeat(np.arange(n_systems), n_total)
    item_idx = np.tile(np.arange(n_total), n_systems)
    ds_idx = item_idx // n_items
    eta = discrimination[item_idx] * (ability[sys_idx] - difficulty[item_idx]
                                      - shift[ds_idx])
    correct = (rng.random(len(eta)) < 1.0 / (1.0 + np.exp(-eta))).astype(np.int64)
    systems = np.array([f"sys{k + 1:02d}" for k in range(n_systems)])
    datasets = np.array([f"ds{k + 1}" for k in range(n_datasets)])
    items = np.array([f"ds{k // n_items + 1}_i{k % n_items + 1:04d}" for k in range(n_total)])
    out = pd.DataFrame({"system": systems[sys_idx], "dataset": datasets[ds_idx],
                        "item": items[item_idx], "correct": correct})
    out.attrs.update(ability=dict(zip(systems.tolist(), ability.tolist(), strict=True)),
                     difficulty=difficulty.tolist(), discrimination=discrimination.tolist(),
                     dataset_shift=dict(zip(datasets.tolist(), shift.tolist(), strict=True)))
    return out


#: File name endings :func:`read_data` reads, and the format of each.
DATA_SUFFIXES: dict[str, str] = {
    ".csv": "csv", ".csv.gz": "csv", ".tsv": "tsv", ".tsv.gz": "tsv",
    ".jsonl": "jsonl", ".jsonl.gz": "jsonl", ".json": "json", ".json.gz": "json",
    ".parquet": "parquet",
}


def data_format(path: str | Path) -> str | None:
    """The format (csv, tsv, jsonl, json, parquet) of a file, from its name; None if unknown."""
    name = Path(path).name.lower()
    for suffix in sorted(DATA_SUFFIXES, key=len, reverse=True):
        if name.endswith(suffix):
            return DATA_SUFFIXES[suffix]
    return None


class _FileError(ValueError):
    """A data file :func:`read_data` refuses (the message names the file)."""


def _duplicates(names: list[str], where: str) -> None:
    dup = [n for n, k in Counter(names).items() if k > 1]
    if dup:
        which = ", ".join(repr(n) for n in dup)
        raise _FileError(f"{where} names the column{'s' if len(dup) > 1 else ''} {which} "
                         f"more than once; column names must be unique")


def _header(path: Path, delimiter: str) -> list[str]:
    with _open_text(path) as fh:
        for row in csv.reader(fh, delimiter=delimiter):
            if row:                          # pandas skips blank lines before the header
                return row
    return []


_SEPARATORS = {",": "comma", ";": "semicolon", "\t": "tab", "|": "pipe"}


def _field_counts(path: Path, delimiter: str, lines: int = 1) -> list[int]:
    """Fields per non-blank row of the first ``lines`` rows, split at ``delimiter``."""
    counts: list[int] = []
    with _open_text(path) as fh:
        for row in csv.reader(fh, delimiter=delimiter):
            if row:
                counts.append(len(row))
            if len(counts) >= lines:
                break
    return counts


def sniff_delimiter(path: str | Path, expected: str) -> str:
    """The delimiter of a delimited text file: ``expected`` (``","`` for .csv, a tab for
    .tsv) unless, split at it, the header is one column while another separator (comma,
    semicolon, tab, pipe) splits it into several (the one giving most columns): a
    ``;``-separated file named .csv (R's ``write.csv2``, common in continental Europe) is
    read as such."""
    path = Path(path)
    header = _field_counts(path, expected)
    if not header or header[0] > 1:
        return expected
    best, width = expected, 1
    for sep in _SEPARATORS:
        if sep == expected:
            continue
        alt = _field_counts(path, sep)
        if alt and alt[0] > width:
            best, width = sep, alt[0]
    return best


def _separator_note(delimiter: str, fmt_delimiter: str) -> str:
    if delimiter == fmt_delimiter:
        return ""
    return f" (read as {_SEPARATORS[delimiter]}-separated, from its header line)"


def _decimal_commas(path: Path, df: pd.DataFrame) -> pd.DataFrame:
    """A ``;``-separated file's numbers written with a decimal comma (``1,5``), as R's
    ``write.csv2`` writes them: the text columns that read as numbers that way become
    numbers (the others are left as they are)."""
    text_cols = [c for c in df.columns if df[c].dtype == object or pd.api.types.is_string_dtype(
        df[c].dtype)]
    if not text_cols:
        return df
    alt = pd.read_csv(path, sep=";", index_col=False, decimal=",", usecols=text_cols,
                      **EXACT_FLOATS)
    df = df.copy()
    for c in text_cols:
        if pd.api.types.is_numeric_dtype(alt[c].dtype) and not pd.api.types.is_bool_dtype(
                alt[c].dtype):
            df[c] = alt[c]
    return df


def _read_delimited(path: Path, delimiter: str) -> pd.DataFrame:
    expected = delimiter
    delimiter = sniff_delimiter(path, expected)
    note = _separator_note(delimiter, expected)
    header = _header(path, delimiter)
    if not header:
        raise _FileError(f"{path.name} is empty: no header row")
    _duplicates(header, f"the header of {path.name}{note}")
    with warnings.catch_warnings():
        # more fields in a row than in the header: pandas would drop or shift them
        warnings.simplefilter("error", pd.errors.ParserWarning)
        try:
            # (correctly rounded numbers, as R and pandas 3 read them: pandas 2's default
            # parser can be one ulp off)
            df = pd.read_csv(path, sep=delimiter, index_col=False,
                             **EXACT_FLOATS)
        except pd.errors.ParserWarning:
            raise _FileError(f"some rows of {path.name} have more fields than its header "
                             f"({len(header)} column{'s' if len(header) != 1 else ''})"
                             f"{note}") from None
        except (ValueError, pd.errors.ParserError) as exc:
            if not note:
                raise
            text = " ".join(str(exc).split())
            raise _FileError(f"cannot read {path.name}{note}: {text}") from None
    return _decimal_commas(path, df) if delimiter == ";" else df


def _open_text(path: Path):
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    return opener(path, "rt", encoding="utf-8-sig", newline="")


def _unique_keys(where: str):
    """A ``json`` object hook that refuses a key given twice (json keeps the last)."""
    def hook(pairs: list[tuple[str, object]]) -> dict:
        _duplicates([k for k, _ in pairs], where)
        return dict(pairs)
    return hook


def _read_jsonl(path: Path) -> pd.DataFrame:
    rows = []
    with _open_text(path) as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            where = f"line {number} of {path.name}"
            try:
                rec = json.loads(line, object_pairs_hook=_unique_keys(where))
            except json.JSONDecodeError as exc:
                raise _FileError(f"{where} is not JSON ({exc.msg}); a .jsonl file holds "
                                 "one JSON object per line") from None
            if not isinstance(rec, dict):
                raise _FileError(f"{where} is not a JSON object; a .jsonl file holds one "
                                 "object (a record) per line")
            rows.append(rec)
    if not rows:
        raise _FileError(f"{path.name} is empty: no records")
    return pd.DataFrame.from_records(rows)


def _read_json(path: Path) -> pd.DataFrame:
    with _open_text(path) as fh:
        try:
            obj = json.load(fh, object_pairs_hook=_unique_keys(path.name))
        except json.JSONDecodeError as exc:
            raise _FileError(f"{path.name} is not JSON ({exc.msg}, line {exc.lineno})") \
                from None
    if isinstance(obj, list) and obj and all(isinstance(r, dict) for r in obj):
        return pd.DataFrame.from_records(obj)
    if isinstance(obj, dict) and obj and all(isinstance(v, list) for v in obj.values()):
        lengths = {len(v) for v in obj.values()}
        if len(lengths) == 1:
            return pd.DataFrame(obj)
    if isinstance(obj, dict) and obj and all(isinstance(v, dict) for v in obj.values()):
        rows = {tuple(v) for v in obj.values()}      # pandas' to_json(): {column: {row: value}}
        if len(rows) == 1:
            return pd.DataFrame(obj).reset_index(drop=True)
    raise _FileError(f"{path.name} must hold a list of records ([{{\"column\": value, ...}}, "
                     "...]) or an object of columns with the same rows ({\"column\": [values], "
                     "...} or {\"column\": {row: value, ...}, ...})")


def _read_parquet(path: Path) -> pd.DataFrame:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise _FileError(f"reading {path.name} (Parquet) needs pyarrow: pip install "
                         "pyarrow") from None
    _duplicates(list(pq.read_schema(path).names), f"the schema of {path.name}")
    return pd.read_parquet(path)


def read_data(path: str | Path) -> pd.DataFrame:
    """Read a data file, its format given by its name.

    Parameters
    ----------
    path : str or Path
        ``.csv``, ``.tsv`` (tab-separated; either is read with the separator its header
        line uses when that is a semicolon, comma, tab or pipe and the expected one would
        give a single column, and a semicolon-separated file's decimal commas are read as
        numbers, as R's ``read.csv2``), ``.jsonl`` (one JSON object per line),
        ``.json`` (a list of records, or an object of columns: lists, or ``{row: value}``
        objects as pandas' ``to_json()`` writes), each optionally
        gzip-compressed (``.gz``), or ``.parquet``.

    Returns
    -------
    pandas.DataFrame

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        A directory, a file name of another format, an empty file, a header naming a
        column twice (pandas would silently rename the second ``Days.1``), rows with more
        fields than the header, or a file the parser rejects; the message names the file.
    """
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{str(path)!r} is a directory, not a data file")
    if not path.exists():
        raise FileNotFoundError(f"no file {str(path)!r}")
    fmt = data_format(path)
    if fmt is None:
        known = ", ".join(DATA_SUFFIXES)
        raise ValueError(f"cannot read {path.name!r}: unknown file type (crossed reads "
                         f"{known})")
    try:
        if fmt in ("csv", "tsv"):
            df = _read_delimited(path, "," if fmt == "csv" else "\t")
        elif fmt == "parquet":
            df = _read_parquet(path)
        elif fmt == "jsonl":
            df = _read_jsonl(path)
        else:
            df = _read_json(path)
    except _FileError:
        raise
    except UnicodeDecodeError as exc:
        raise _FileError(f"cannot read {path.name}: it is not UTF-8 text (it holds the "
                         f"byte {exc.object[exc.start:exc.start + 1]!r}); save it as UTF-8 "
                         "(e.g. 'CSV UTF-8' in Excel, fileEncoding = \"UTF-8\" in R)") from None
    except (ValueError, EOFError, gzip.BadGzipFile) as exc:  # the parsers' own complaints
        text = " ".join(str(exc).split())
        raise _FileError(f"cannot read {path.name} as {fmt.upper()}: {text}") from None
    if df.shape[1] == 0:
        raise ValueError(f"{path.name} holds no columns")
    if len(df) == 0:
        raise ValueError(f"{path.name} holds no rows (columns: "
                         f"{', '.join(str(c) for c in df.columns)})")
    return df
