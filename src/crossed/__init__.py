"""crossed: mixed-effects analysis of evaluation results.

The public names are loaded on first use (PEP 562): ``import crossed`` is cheap, and
importing a part of the package (``crossed.model.pls``) loads only what that part imports.
``crossed.lmer``, ``from crossed import LmerFit`` and ``dir(crossed)`` work as usual.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # (what static tools and the API reference read; loaded lazily below)
    from crossed.api import glmer, lm, lmer
    from crossed.datasets import list_datasets, load_dataset
    from crossed.design.frame import BinaryResponseWarning, DataError
    from crossed.display.publication import (
        anova_table,
        comparison_table,
        emm_table,
        regression_table,
        variance_table,
    )
    from crossed.engines.errors import EngineUnavailableError, UnsupportedModelError
    from crossed.evaluation import ablation, resample, specs
    from crossed.evaluation.compare_engines import compare_engines
    from crossed.evaluation.compare_specs import compare_specs
    from crossed.evaluation.crossval import cross_validate
    from crossed.evaluation.headroom import headroom
    from crossed.evaluation.random_selection import RandomSelection, select_random
    from crossed.fit import GlmerFit, LmerFit, from_pymer4, specify
    from crossed.formula import FormulaError, ModelSpec, parse
    from crossed.inference.emmeans import emmeans
    from crossed.inference.emtrends import emtrends
    from crossed.inference.lrt import compare
    from crossed.model.control import LmerControl
    from crossed.model.finish import ConvergenceWarning, SingularFitWarning
    from crossed.model.glmm.family import Family, binomial, poisson
    from crossed.model.lm import LmFit
    from crossed.model.status import ConvergenceStatus
    from crossed.simulate import bootstrap, emm_contrast, extend, power_curve, power_sim

# public name -> the module that defines it
_EXPORTS = {
    "ablation": "crossed.evaluation",
    "anova_table": "crossed.display.publication",
    "comparison_table": "crossed.display.publication",
    "emm_table": "crossed.display.publication",
    "regression_table": "crossed.display.publication",
    "variance_table": "crossed.display.publication",
    "bootstrap": "crossed.simulate",
    "emm_contrast": "crossed.simulate",
    "extend": "crossed.simulate",
    "power_curve": "crossed.simulate",
    "power_sim": "crossed.simulate",
    "specify": "crossed.fit",
    "ConvergenceStatus": "crossed.model.status",
    "BinaryResponseWarning": "crossed.design.frame",
    "ConvergenceWarning": "crossed.model.finish",
    "DataError": "crossed.design.frame",
    "EngineUnavailableError": "crossed.engines.errors",
    "FormulaError": "crossed.formula",
    "LmerControl": "crossed.model.control",
    "LmFit": "crossed.model.lm",
    "Family": "crossed.model.glmm.family",
    "GlmerFit": "crossed.fit",
    "LmerFit": "crossed.fit",
    "binomial": "crossed.model.glmm.family",
    "glmer": "crossed.api",
    "poisson": "crossed.model.glmm.family",
    "ModelSpec": "crossed.formula",
    "SingularFitWarning": "crossed.model.finish",
    "UnsupportedModelError": "crossed.engines.errors",
    "compare": "crossed.inference.lrt",
    "compare_engines": "crossed.evaluation.compare_engines",
    "compare_specs": "crossed.evaluation.compare_specs",
    "cross_validate": "crossed.evaluation.crossval",
    "emmeans": "crossed.inference.emmeans",
    "emtrends": "crossed.inference.emtrends",
    "from_pymer4": "crossed.fit",
    "headroom": "crossed.evaluation.headroom",
    "RandomSelection": "crossed.evaluation.random_selection",
    "select_random": "crossed.evaluation.random_selection",
    "list_datasets": "crossed.datasets",
    "lm": "crossed.api",
    "lmer": "crossed.api",
    "load_dataset": "crossed.datasets",
    "parse": "crossed.formula",
    "resample": "crossed.evaluation",
    "specs": "crossed.evaluation",
}


def __getattr__(name: str) -> Any:
    """A public name (imported from its module on first use) or a subpackage."""
    module = _EXPORTS.get(name)
    if module is not None:
        parent = importlib.import_module(module)
        value = (getattr(parent, name) if hasattr(parent, name)  # (a name or a subpackage)
                 else importlib.import_module(f"{module}.{name}"))
    elif name == "__version__":
        value = _version()
    else:
        try:
            value = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    loaded = [name for name, value in globals().items()
              if isinstance(value, type(importlib)) and value.__name__.startswith(__name__)]
    return sorted({*_EXPORTS, *loaded, "__version__"})


def _version() -> str:
    """The installed distribution's version: set once, in pyproject.toml."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("crossed")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"


__all__ = [
    "ablation",
    "anova_table",
    "comparison_table",
    "emm_table",
    "regression_table",
    "variance_table",
    "bootstrap",
    "emm_contrast",
    "extend",
    "power_curve",
    "power_sim",
    "specify",
    "ConvergenceStatus",
    "BinaryResponseWarning",
    "ConvergenceWarning",
    "DataError",
    "EngineUnavailableError",
    "FormulaError",
    "LmerControl",
    "LmFit",
    "Family",
    "GlmerFit",
    "LmerFit",
    "binomial",
    "glmer",
    "poisson",
    "ModelSpec",
    "SingularFitWarning",
    "UnsupportedModelError",
    "compare",
    "compare_engines",
    "compare_specs",
    "cross_validate",
    "emmeans",
    "emtrends",
    "from_pymer4",
    "headroom",
    "list_datasets",
    "lm",
    "lmer",
    "load_dataset",
    "parse",
    "resample",
    "RandomSelection",
    "select_random",
    "specs",
]
