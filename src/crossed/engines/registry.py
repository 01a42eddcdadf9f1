"""The engine contract (:class:`Engine`) and the registry of engines by name.

An engine turns a :class:`~crossed.design.Design` into a :class:`~crossed.model.result.LmerResult`.
Adding one means adding its module, with an ``ENGINE`` object that follows the protocol,
and one :func:`register` line in ``crossed/engines/__init__.py``. The module is imported
the first time the engine is asked for, so optional software (statsmodels' MixedLM, R
through rpy2) is loaded only when used. :func:`fit_with` is what ``cx.lmer``, refits,
``compare_engines``, the CLI and the conformance suite call.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from crossed.design import Design
    from crossed.model.control import LmerControl
    from crossed.model.result import LmerResult

__all__ = ["ALL_GLMMS", "Capabilities", "Engine", "FunctionEngine", "available",
           "fit_glmm_with", "fit_with", "get_engine", "refusal", "register"]


@dataclass(frozen=True)
class Capabilities:
    """What an engine can fit, declared beside it and checked once, by :func:`refusal`,
    before :func:`fit_with` or :func:`fit_glmm_with` hands it a design.

    Attributes
    ----------
    weights, offsets : bool
        Linear mixed models with prior weights / an offset (``weights=``, ``offset=``,
        ``offset(x)`` terms).
    glmm : tuple of (str, str)
        The (family, link) pairs of the GLMMs it fits (empty: none).
    glmm_weights, glmm_offsets : bool
        GLMMs with prior weights (binomial trials included) / an offset.
    max_nagq : int
        The largest ``nAGQ`` (1: Laplace only).
    glmm_refusal : str, optional
        Why it fits no GLMMs, when there is more to say than that.
    """

    weights: bool = False
    offsets: bool = False
    glmm: tuple[tuple[str, str], ...] = ()
    glmm_weights: bool = False
    glmm_offsets: bool = False
    max_nagq: int = 1
    glmm_refusal: str | None = None


ALL_GLMMS = (("binomial", "logit"), ("binomial", "probit"), ("binomial", "cloglog"),
             ("poisson", "log"))
"""The (family, link) pairs crossed's families offer."""


@runtime_checkable
class Engine(Protocol):
    """What every engine provides.

    Attributes
    ----------
    name : str
        The name users pass as ``engine=`` (and the fit's ``engine``).
    capabilities : Capabilities
        What it can fit beyond an unweighted LMM (checked by :func:`refusal`).
    """

    name: str
    capabilities: Capabilities

    def supports(self, design: Design) -> str | None:
        """None when the engine can fit ``design``; else why not, in a sentence that names
        an engine that can: the message of the :class:`UnsupportedModelError` that
        :meth:`fit` raises for it (ask before fitting, e.g. to compare engines)."""
        ...

    def fit(self, design: Design, reml: bool, control: LmerControl | None,
            data_name: str = "data") -> LmerResult:
        """Fit ``design`` (REML or ML); ``control`` is the native optimiser's settings and
        engines that run their own optimiser refuse anything but None."""
        ...


@dataclass(frozen=True)
class FunctionEngine:
    """An :class:`Engine` made of a fit function (``fit_native``, ``fit_lme4`` ...) and,
    for engines that cannot express every design, a ``supports`` function.

    Attributes
    ----------
    name : str
    fit_function : callable
        ``fit_function(design, reml=..., control=..., data_name=...) -> LmerResult``.
    supports_function : callable, optional
        ``supports_function(design) -> str | None`` (None: every design).
    """

    name: str
    fit_function: Callable[..., LmerResult]
    supports_function: Callable[[Design], str | None] | None = None
    glmm_function: Callable[..., Any] | None = None
    capabilities: Capabilities = Capabilities()

    def supports(self, design: Design) -> str | None:
        return None if self.supports_function is None else self.supports_function(design)

    def fit_glmm(self, design: Design, family: Any, nagq: int, control: Any,
                 data_name: str = "data") -> Any:
        """Fit a GLMM (``glmm_function(design, family=, nagq=, control=, data_name=)``);
        :class:`UnsupportedModelError` when the engine's capabilities exclude it."""
        why = refusal(self, design, family=family, nagq=nagq)
        if why is not None or self.glmm_function is None:
            from crossed.engines.errors import UnsupportedModelError

            raise UnsupportedModelError(why or f"the {self.name!r} engine fits no GLMMs")
        return self.glmm_function(design, family=family, nagq=nagq, control=control,
                                  data_name=data_name)

    def fit(self, design: Design, reml: bool, control: LmerControl | None,
            data_name: str = "data") -> LmerResult:
        return self.fit_function(design, reml=reml, control=control, data_name=data_name)


_TARGETS: dict[str, str] = {}  # name -> "module:attribute" of its ENGINE object
_ALIASES: dict[str, str] = {}  # other accepted name -> registered name
_LOADED: dict[str, Engine] = {}


def register(name: str, target: str, aliases: tuple[str, ...] = ()) -> None:
    """Register the engine ``name``, found at ``target`` (``"package.module:ENGINE"``)
    when first used; ``aliases`` are other names that select it."""
    if name in _TARGETS or name in _ALIASES:
        raise ValueError(f"an engine named {name!r} is already registered")
    _TARGETS[name] = target
    for alias in aliases:
        _ALIASES[alias] = name


def available() -> tuple[str, ...]:
    """The registered engine names, in registration order."""
    return tuple(_TARGETS)


def get_engine(name: str) -> Engine:
    """The engine registered as ``name`` (or an alias); ValueError naming the choices."""
    key = _ALIASES.get(name, name) if isinstance(name, str) else None
    if key not in _TARGETS:
        raise ValueError(f"unknown engine {name!r}; available: {', '.join(available())}")
    if key not in _LOADED:
        module, attribute = _TARGETS[key].split(":")
        engine = getattr(importlib.import_module(module), attribute)
        if not isinstance(engine, Engine):  # pragma: no cover - a registration error
            raise TypeError(f"{_TARGETS[key]} does not follow the Engine protocol")
        _LOADED[key] = engine
    return _LOADED[key]


def fit_with(engine: str, design: Design, reml: bool, control: LmerControl | None,
             data_name: str = "data") -> LmerResult:
    """Fit ``design`` with the named engine.

    Parameters
    ----------
    engine : str
        A registered name (:func:`available`) or alias.
    design : Design
    reml : bool
    control : LmerControl or None
        Optimiser settings of the native engine (None for the others).
    data_name : str

    Returns
    -------
    LmerResult

    Raises
    ------
    ValueError
        For an unknown engine name.
    UnsupportedModelError
        When the engine cannot fit the design: raised by the engine's ``fit``, with the
        reason its ``supports`` gives (``supports`` is for asking before fitting).
    """
    chosen = get_engine(engine)
    why = refusal(chosen, design)
    if why is not None:
        from crossed.engines.errors import UnsupportedModelError

        raise UnsupportedModelError(why)
    return chosen.fit(design, reml=reml, control=control, data_name=data_name)


def refusal(engine: Engine, design: Design, family: Any = None, nagq: int = 1
            ) -> str | None:
    """Why ``engine`` cannot fit ``design`` (a GLMM when ``family`` is given), by its
    declared :class:`Capabilities` — the one place they are checked; None when it can.
    (What only the engine can judge, e.g. statsmodels' structures, is its ``supports``.)"""
    caps = engine.capabilities
    name = engine.name
    weighted = getattr(design, "weights", None) is not None
    offset = getattr(design, "offset", None) is not None
    if family is None:
        if (weighted and not caps.weights) or (offset and not caps.offsets):
            return (f"engine {name!r} is not given prior weights or offsets (weights=, "
                    "offset=, offset(x)): it would fit the unweighted model; use "
                    "engine='native'")
        return None
    if not caps.glmm:
        return caps.glmm_refusal or (f"the {name!r} engine cannot fit GLMMs; use "
                                     "engine='native' or 'lme4'")
    pair = (family.name, family.link.name)
    if pair not in caps.glmm:
        return f"the {name!r} engine does not fit the {family} family; use engine='native'"
    if nagq > caps.max_nagq:
        return f"the {name!r} engine fits nAGQ up to {caps.max_nagq}, not {nagq}"
    if (weighted and not caps.glmm_weights) or (offset and not caps.glmm_offsets):
        return (f"the {name!r} engine is not given a GLMM's prior weights or offset; use "
                "engine='native'")
    return None


def fit_glmm_with(engine: str, design: Design, family: Any = "binomial", nagq: int = 1,
                  control: Any = None, data_name: str = "data") -> Any:
    """Fit a GLMM ``design`` with the named engine (its ``fit_glmm``).

    Raises
    ------
    UnsupportedModelError
        When the engine cannot fit GLMMs, naming one that can.
    """
    from crossed.engines.errors import UnsupportedModelError
    from crossed.model.glmm.family import family_of

    eng = get_engine(engine)
    fam = family_of(family)
    why = refusal(eng, design, family=fam, nagq=nagq)
    if why is not None:
        raise UnsupportedModelError(why)
    fit_glmm = getattr(eng, "fit_glmm", None)
    if fit_glmm is None:  # pragma: no cover - an engine declaring GLMMs it cannot fit
        raise UnsupportedModelError(f"the {eng.name!r} engine fits no GLMMs")
    return fit_glmm(design, family=fam, nagq=nagq, control=control, data_name=data_name)
