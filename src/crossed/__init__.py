"""crossed: mixed-effects analysis of evaluation results."""

from crossed import display  # noqa: F401  (provides LmerFit/GlmerFit.summary)
from crossed.api import glmer, lm, lmer
from crossed.datasets import list_datasets, load_dataset
from crossed.design.frame import BinaryResponseWarning, DataError
from crossed.engines.errors import EngineUnavailableError, UnsupportedModelError
from crossed.engines.pymer4 import from_pymer4
from crossed.evaluation import resample, specs
from crossed.evaluation.compare_engines import compare_engines
from crossed.evaluation.compare_specs import compare_specs
from crossed.evaluation.crossval import cross_validate
from crossed.evaluation.headroom import headroom
from crossed.fit import LmerFit
from crossed.formula import FormulaError, ModelSpec, parse
from crossed.inference.emmeans import emmeans
from crossed.inference.emtrends import emtrends
from crossed.inference.lrt import compare
from crossed.model.control import LmerControl
from crossed.model.finish import ConvergenceWarning, SingularFitWarning
from crossed.model.glmm.family import Family, binomial, poisson
from crossed.model.glmm.result import GlmerFit
from crossed.model.lm import LmFit
from crossed.model.status import ConvergenceStatus
from crossed.simulate import (
    ablation,
    bootstrap,
    emm_contrast,
    extend,
    power_curve,
    power_sim,
    specify,
)


def _version() -> str:
    """The installed distribution's version: set once, in pyproject.toml."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("crossed")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"


__version__ = _version()

__all__ = [
    "ablation",
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
    "specs",
]
