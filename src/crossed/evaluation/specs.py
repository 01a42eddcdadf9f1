"""Specification builders: write the lme4 formula of a common evaluation design, and explain it.

The templates live in the package folder ``crossed/formulas/`` (``src/crossed/formulas/``
in the repository, shipped as package data; one TOML file per design: ``name``,
``summary``, ``formula``, optional ``formula_<variant>``, ``example``, ``notes``), so the
documented design and the formula the code writes are the same text. Fields in a template
(``{response}``, ``{within_product}``, ...) are filled from the builder's arguments.

>>> from crossed import specs
>>> str(specs.repeated_measures("delta", within=["language", "task", "mode"]))
'delta ~ language * task * mode + (1 | architecture/model)'
"""

from __future__ import annotations

import inspect
import os
import string
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from crossed.formula import parse

__all__ = ["Specification", "cross_classified", "formula_list", "from_name", "item_level",
           "list_named", "load_named", "repeated_measures", "resolve_family", "resolve_formula"]

_FIELD_HELP = {
    "response": "the response column",
    "within": "within-system conditions (list), crossed with all interactions",
    "subjects": "the systems' grouping factor(s), e.g. architecture/model",
    "systems": "the systems' grouping factor, e.g. model",
    "datasets": "the datasets' grouping factor, e.g. dataset",
    "nuisance": "nuisance factors of the runs (list), fixed effects",
    "slopes": "'uncorrelated' or 'none'",
    "outcome": "the per-item outcome column (0/1, boolean, or a count for poisson)",
    "items": "the test items' grouping factor, e.g. item",
    "groups": "the grouping factor the items are nested in, e.g. dataset",
}


def formula_dirs() -> list[Path]:
    """Folders searched for named specifications, in order.

    ``$CROSSED_FORMULAS`` (a folder) if set, then the package's ``crossed/formulas/``
    (its TOML files are package data).
    """
    dirs = []
    env = os.environ.get("CROSSED_FORMULAS")
    if env:
        dirs.append(Path(env))
    packaged = Path(__file__).resolve().parents[1] / "formulas"
    if packaged.is_dir():
        dirs.append(packaged)
    return dirs


def list_named() -> list[str]:
    """Names of the named specifications found in :func:`formula_dirs`."""
    names: set[str] = set()
    for d in formula_dirs():
        names |= {p.stem for p in d.glob("*.toml")}
    return sorted(names)


def _read_record(path: Path) -> dict:
    """The TOML record in ``path``, checked: a string ``formula`` template and string
    values for the documented keys.

    Raises
    ------
    ValueError
        The file is not UTF-8 text or not TOML (the message names the file and the TOML
        error's line and column), or lacks a ``formula`` string.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"specification file {str(path)!r} is not UTF-8 text") from None
    try:
        rec = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        if "at end of document" in msg:  # tomllib gives no line there: the last one
            msg = msg.replace("at end of document",
                              f"at end of document, line {len(text.splitlines()) or 1}")
        raise ValueError(f"specification file {str(path)!r} is not valid TOML: "
                         f"{msg}") from None
    if "formula" not in rec:
        raise ValueError(f"specification file {str(path)!r} has no 'formula'; it needs "
                         "a template string, e.g. formula = \"{response} ~ 1 + (1 | {groups})\"")
    for key, value in rec.items():
        if (key in ("name", "summary", "example", "notes", "family")
                or key.startswith("formula")) and not isinstance(value, str):
            raise ValueError(f"specification file {str(path)!r}: {key!r} must be a string, "
                             f"got {type(value).__name__}")
    return rec


def load_named(name: str) -> dict:
    """The TOML record of a named specification (or of a ``.toml`` file path).

    Raises
    ------
    ValueError
        No such specification, or its file is malformed (the message names the file and,
        for a TOML syntax error, its line).
    """
    path = Path(name)
    if path.suffix == ".toml" and path.exists():
        return _read_record(path)
    for d in formula_dirs():
        candidate = d / f"{name}.toml"
        if candidate.exists():
            return _read_record(candidate)
    raise ValueError(f"no named specification {name!r}; available: "
                     f"{', '.join(list_named()) or '(none found; set CROSSED_FORMULAS)'}")


@dataclass(frozen=True)
class Specification:
    """A model formula written for a named design, with the reasons for each term.

    Attributes
    ----------
    design : str
        Name of the design (the TOML file's ``name``).
    formula : str
        The lme4 formula; ``str(spec)`` gives it, and it can be passed to :func:`crossed.lmer`.
    fields : dict
        The values the template was filled with.
    terms : list of (str, str)
        Each term of the formula with what it stands for.
    notes : str
        The design's documentation (from ``crossed/formulas/``).
    family : str or None
        None: a linear mixed model (:func:`crossed.lmer`); ``"binomial"`` / ``"poisson"``:
        a GLMM (:func:`crossed.glmer`).
    """

    design: str
    formula: str
    fields: dict = field(default_factory=dict)
    terms: tuple[tuple[str, str], ...] = ()
    notes: str = ""
    family: str | None = None

    def __post_init__(self) -> None:
        # field values pasted into the template may not smuggle in code: the formula must
        # parse and pass the allow-list of crossed.formula.safety (FormulaError otherwise)
        parse(self.formula)

    def __str__(self) -> str:
        return self.formula

    def explain(self) -> str:
        """A plain-text explanation: the formula, one line per term, the design notes."""
        width = max((len(t) for t, _ in self.terms), default=0)
        lines = [f"{self.design}: {self.formula}", ""]
        lines += [f"  {t:<{width}}  {why}" for t, why in self.terms]
        if self.family is not None:
            lines += ["", f"family: {self.family} (a GLMM: crossed.glmer, or --family "
                          f"{self.family} on the command line)"]
        if self.notes:
            lines += ["", self.notes.strip()]
        return "\n".join(lines)

    def terms_table(self) -> pd.DataFrame:
        """The terms as a table: ``term`` (as written in the formula), ``meaning``."""
        return pd.DataFrame(list(self.terms), columns=["term", "meaning"])

    def fit(self, data: pd.DataFrame, **kwargs):
        """``crossed.lmer(self.formula, data, **kwargs)``, or ``crossed.glmer(self.formula,
        data, family=self.family, **kwargs)`` for a GLMM specification."""
        from crossed.api import glmer, lmer

        if self.family is not None:
            return glmer(self.formula, data, **{"family": self.family, **kwargs})
        return lmer(self.formula, data, **kwargs)


def _list(x: str | Sequence[str] | None, what: str) -> list[str]:
    if x is None:
        return []
    out = [x] if isinstance(x, str) else list(x)
    for v in out:
        if not isinstance(v, str) or not v.strip():
            raise ValueError(f"{what} must be column names, got {v!r}")
    return [v.strip() for v in out]


def _name(x: object, what: str) -> str:
    """One column name (or ``a/b``), else a ValueError naming the field."""
    if not isinstance(x, str) or not x.strip():
        raise ValueError(f"{what} must be a column name, got {x!r}")
    return x.strip()


def _subjects_terms(subjects: str) -> list[tuple[str, str]]:
    parts = [p.strip() for p in subjects.split("/")]
    out = [(f"(1 | {parts[0]})", f"random intercept: each {parts[0]}'s overall level")]
    for i in range(1, len(parts)):
        inner = ":".join(reversed(parts[: i + 1]))
        out.append((f"(1 | {inner})",
                    f"random intercept: each {parts[i]} within its {parts[i - 1]}"))
    return out


def repeated_measures(response: str, within: Sequence[str],
                      subjects: str = "architecture/model") -> Specification:
    """Systems measured under every combination of within-system conditions.

    Writes ``{response} ~ a * b * ... + (1 | {subjects})`` from ``crossed/formulas/
    repeated_measures.toml``: the fixed part crosses the conditions with all their
    interactions, the random intercept(s) absorb each system's overall level (``a/b``
    nests b in a).

    Parameters
    ----------
    response : str
        The response column (e.g. the headroom ``delta``).
    within : list of str
        Conditions every system is measured under (e.g. ``["language", "task", "mode"]``).
    subjects : str
        Grouping factor(s) of the systems, ``"architecture/model"`` for models nested in
        architectures or a single column.

    Returns
    -------
    Specification
        ``str(spec)`` is the formula, e.g. ``delta ~ language * task * mode +
        (1 | architecture/model)``; ``spec.explain()`` says what each term is for.
    """
    within_l = _list(within, "within")
    response, subjects = _name(response, "response"), _name(subjects, "subjects")
    if not within_l:
        raise ValueError("repeated_measures needs at least one within-system condition")
    rec = load_named("repeated_measures")
    fields = {"response": response, "within_product": " * ".join(within_l),
              "subjects": subjects.strip()}
    formula = _fill(rec["formula"], fields, rec["name"])
    terms = [(" * ".join(within_l),
              "fixed effects of the conditions and all their interactions")]
    terms += _subjects_terms(subjects)
    return Specification(design=rec["name"], formula=formula,
                         fields={"response": response, "within": within_l,
                                 "subjects": subjects},
                         terms=tuple(terms), notes=rec.get("notes", ""))


def cross_classified(response: str, systems: str = "model", datasets: str = "dataset",
                     nuisance: Sequence[str] | None = None,
                     slopes: str = "uncorrelated") -> Specification:
    """Systems crossed with datasets (a cross-classified mixed-effects model, CCMEM).

    Writes, from ``crossed/formulas/cross_classified.toml``::

        {response} ~ n1 + n2 + ... + (1 | systems) + (1 | datasets) + (1 | systems:datasets)
                     [+ (0 + n1 + n2 + ... || systems:datasets)]

    Parameters
    ----------
    response : str
        The score column.
    systems, datasets : str
        Grouping factors of the systems and of the datasets.
    nuisance : list of str, optional
        Nuisance factors of the runs (seeds, learning rates, batch sizes, epochs): fixed
        effects, so their influence is estimated and tested rather than averaged away.
    slopes : {"uncorrelated", "none"}
        ``"uncorrelated"`` adds random slopes of the nuisance factors by system × dataset
        cell with independent variances (``||``; factors get one indicator per level), so
        the effect of a seed or a learning rate may differ per cell; ``"none"`` keeps
        random intercepts only. Ignored without nuisance factors.

    Returns
    -------
    Specification
        ``str(spec)`` is the formula; ``spec.explain()`` says what each term is for.
    """
    nuis = _list(nuisance, "nuisance")
    response = _name(response, "response")
    systems, datasets = _name(systems, "systems"), _name(datasets, "datasets")
    if slopes not in ("uncorrelated", "none"):
        raise ValueError(f"slopes must be 'uncorrelated' or 'none', got {slopes!r}")
    rec = load_named("cross_classified")
    fields = {"response": response, "systems": systems.strip(), "datasets": datasets.strip(),
              "nuisance_sum": " + ".join(nuis) if nuis else "1",
              "nuisance_indicators": " + ".join(nuis)}
    use_slopes = slopes == "uncorrelated" and bool(nuis)
    template = rec["formula_slopes"] if use_slopes else rec["formula"]
    formula = _fill(template, fields, rec["name"])
    s, d = fields["systems"], fields["datasets"]
    terms = []
    if nuis:
        terms.append((" + ".join(nuis), "fixed effects of the nuisance factors of the runs"))
    terms += [(f"(1 | {s})", f"random intercept: each {s}'s overall level"),
              (f"(1 | {d})", f"random intercept: each {d}'s difficulty"),
              (f"(1 | {s}:{d})", f"random intercept: how much a {s}'s level depends on the "
                                 f"{d} ({s} × {d} interaction)")]
    if use_slopes:
        terms.append((f"(0 + {fields['nuisance_indicators']} || {s}:{d})",
                      f"uncorrelated random slopes: the nuisance effects vary by {s} × {d} "
                      "cell"))
    return Specification(design=rec["name"], formula=formula,
                         fields={"response": response, "systems": systems,
                                 "datasets": datasets, "nuisance": nuis, "slopes": slopes},
                         terms=tuple(terms), notes=rec.get("notes", ""))


def item_level(outcome: str, systems: str = "system", items: str = "item",
               groups: str | None = None, family: str = "binomial") -> Specification:
    """One outcome per system × test item: a GLMM with crossed item effects.

    Writes, from ``crossed/formulas/item_level.toml``::

        {outcome} ~ {systems} + (1 | {items})                   (no groups)
        {outcome} ~ {systems} + (1 | {groups}/{items})          (items nested in groups)

    with a binomial family (logit link), to be fitted by :func:`crossed.glmer`
    (``spec.fit(data)`` does). This is the standard analysis of item-level evaluation
    data (correct or not, exact match, pass@1): system contrasts as odds ratios, item
    difficulty as a random intercept shared by all systems.

    Parameters
    ----------
    outcome : str
        The per-item outcome column: 0/1 or boolean (binomial), a count (``"poisson"``).
    systems : str
        The systems' column (fixed effects: the systems compared).
    items : str
        The test items' grouping factor (random intercepts).
    groups : str, optional
        A grouping factor the items are nested in (datasets, benchmarks, annotators'
        batches): ``(1 | groups/items)``.
    family : {"binomial", "poisson"}
        The family of the GLMM.

    Returns
    -------
    Specification
        ``str(spec)`` is the formula, ``spec.family`` the family, ``spec.fit(data)`` the
        :class:`~crossed.GlmerFit`; ``spec.explain()`` says what each term is for.
    """
    outcome = _name(outcome, "outcome")
    systems, items = _name(systems, "systems"), _name(items, "items")
    group = None if groups is None else _name(groups, "groups")
    if family not in ("binomial", "poisson"):
        raise ValueError(f"family must be 'binomial' or 'poisson', got {family!r}")
    for what, col in (("systems", systems), ("items", items), ("groups", group)):
        if col is not None and "/" in col:
            raise ValueError(f"{what} must be one column name, got {col!r}; nest items in "
                             "a grouping factor with groups=")
    rec = load_named("item_level")
    fields = {"response": outcome, "systems": systems, "items": items, "groups": group}
    template = rec["formula"] if group is None else rec["formula_groups"]
    formula = _fill(template, fields, rec["name"])
    link = "logit" if family == "binomial" else "log"
    terms = [(systems, f"fixed effects: each {systems}'s {link}-scale level (contrasts "
                       f"{'odds' if family == 'binomial' else 'rate'} ratios)")]
    if group is None:
        terms.append((f"(1 | {items})", f"random intercept: each {items}'s difficulty, "
                                        f"shared by all {systems} levels"))
    else:
        terms += [(f"(1 | {group})", f"random intercept: each {group}'s overall level"),
                  (f"(1 | {group}:{items})", f"random intercept: each {items}'s difficulty "
                                             f"within its {group}")]
    return Specification(design=rec["name"], formula=formula,
                         fields={"outcome": outcome, "systems": systems, "items": items,
                                 "groups": group},
                         terms=tuple(terms), notes=rec.get("notes", ""), family=family)


_BUILDERS = {"repeated_measures": repeated_measures, "cross_classified": cross_classified,
             "item_level": item_level}
_LIST_FIELDS = {"within", "nuisance"}


def _check_fields(name: str, builder, fields: dict) -> None:
    """A ValueError naming the missing or unknown fields of a named specification."""
    params = inspect.signature(builder).parameters
    unknown = [k for k in fields if k not in params]
    if unknown:
        raise ValueError(f"specification {name!r} has no field {', '.join(map(repr, unknown))}"
                         f"; its fields: {', '.join(params)}")
    missing = [k for k, p in params.items()
               if p.default is inspect.Parameter.empty and k not in fields]
    if missing:
        what = "; ".join(f"{k}: {_FIELD_HELP.get(k, 'a value')}" for k in missing)
        raise ValueError(f"specification {name!r} needs the field"
                         f"{'s' if len(missing) > 1 else ''} {', '.join(missing)} ({what})")


def from_name(name: str, **fields) -> Specification:
    """Build a named specification (a file in :func:`formula_dirs`) from its fields.

    ``repeated_measures`` and ``cross_classified`` go through their builders (keyword
    arguments as theirs); any other TOML file's ``formula`` template is filled with
    ``fields`` as given (lists are joined with ``" + "``).
    """
    if name in _BUILDERS:
        _check_fields(name, _BUILDERS[name], fields)
        return _BUILDERS[name](**fields)
    rec = load_named(name)
    filled = {k: " + ".join(v) if isinstance(v, list | tuple) else v for k, v in fields.items()}
    formula = _fill(rec["formula"], filled, name)
    return Specification(design=rec.get("name", name), formula=formula, fields=fields,
                         notes=rec.get("notes", ""))


def _fill(template: str, fields: dict, name: str) -> str:
    """A template with its ``{field}`` slots filled; only plain field names are allowed
    (no ``{field.attribute}`` or ``{field[index]}`` lookups from a template file)."""
    for _, field_name, _, _ in string.Formatter().parse(template):
        if field_name is not None and not field_name.isidentifier():
            raise ValueError(f"specification {name!r}: template field {{{field_name}}} is "
                             "not a plain name")
    try:
        return template.format(**fields)
    except KeyError as exc:
        raise ValueError(f"specification {name!r} needs field {exc.args[0]!r}") from None


def resolve_formula(text: str) -> str:
    """A formula as given, or the formula of a named specification written as text.

    A text containing ``~`` is returned unchanged. Otherwise it names a specification with
    its fields, ``NAME:key=value;key=value``, list values comma-separated; e.g.
    ``repeated_measures:response=delta;within=language,task,mode;subjects=architecture``
    (this is how the command line accepts named specifications wherever it takes a formula).
    """
    named = _named(text)
    return text.strip() if named is None else named.formula


def resolve_family(text: str) -> str | None:
    """The GLMM family of a named specification written as text (``item_level:...``:
    ``"binomial"``), None for a formula or a linear mixed model's specification."""
    named = _named(text)
    return None if named is None else named.family


def _named(text: str) -> Specification | None:
    text = text.strip()
    if "~" in text:
        return None
    name, _, rest = text.partition(":")
    fields: dict = {}
    for item in filter(None, (p.strip() for p in rest.split(";"))):
        if "=" not in item:
            raise ValueError(f"named specification fields are key=value, got {item!r}")
        key, value = (s.strip() for s in item.split("=", 1))
        fields[key] = [v.strip() for v in value.split(",") if v.strip()] \
            if key in _LIST_FIELDS else value
    return from_name(name.strip(), **fields)


def formula_list(data: object, formulas: object, who: str) -> list[str | Specification]:
    """The formulas given to ``who(data, formulas, ...)`` as a list (of formula strings and
    specifications); an empty ``data`` is refused too.

    One formula (a string or a :class:`Specification`) is a list of one. A DataFrame as
    ``data`` is required, and ``formulas`` must be strings or specifications: the
    arguments given the other way round, a DataFrame or a number are refused naming
    ``who``'s order (iterating a string or a table would read its characters or column
    names as formulas).
    """
    if not isinstance(data, pd.DataFrame):
        swapped = " (arguments in the other order? the data comes first)" if isinstance(
            formulas, pd.DataFrame) else ""
        raise TypeError(f"{who}(data, formulas): data must be a pandas DataFrame, got "
                        f"{type(data).__name__}{swapped}")
    if len(data) == 0:
        raise ValueError(f"{who}(data, formulas): the data table is empty (0 rows)")
    if isinstance(formulas, str | Specification):
        formulas = [formulas]
    if not isinstance(formulas, Sequence) or isinstance(formulas, bytes):
        raise TypeError(f"{who}(data, formulas): formulas must be a list of lme4 formulas, "
                        f"got {type(formulas).__name__}")
    bad = [f for f in formulas if not isinstance(f, str | Specification)]
    if bad:
        raise TypeError(f"{who}(data, formulas): each formula must be a string such as "
                        f"'y ~ x + (1 | g)', got {bad[0]!r}")
    if not formulas:
        raise ValueError(f"{who}(data, formulas): no formulas given")
    return list(formulas)
