"""The engine contract and registry (engines/registry.py)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import crossed
from crossed.engines import (
    AVAILABLE,
    Engine,
    UnsupportedModelError,
    available,
    fit_with,
    get_engine,
    register,
    registry,
)
from reference import load_case


def test_the_registered_engines_follow_the_protocol():
    assert available() == AVAILABLE == ("native", "statsmodels", "lme4")
    for name in available():
        engine = get_engine(name)
        assert isinstance(engine, Engine)
        assert engine.name == name


def test_alias_and_unknown_names():
    assert get_engine("pymer4") is get_engine("lme4")
    with pytest.raises(ValueError, match="unknown engine 'nope'; available: native, statsmodels"):
        get_engine("nope")
    with pytest.raises(ValueError, match="unknown engine"):
        crossed.lmer("Yield ~ 1 + (1 | Batch)", load_case("dyestuff").data, engine="nope")


def test_supports_gives_the_reason_fit_with_raises():
    case = load_case("blurb_ccmem_slopes")
    design = crossed.lmer.__globals__["build_design"](
        crossed.parse(case.formula, reference=case.reference), case.data)
    reason = get_engine("statsmodels").supports(design)
    assert reason is not None and "engine='native'" in reason
    assert get_engine("native").supports(design) is None
    with pytest.raises(UnsupportedModelError) as exc:
        fit_with("statsmodels", design, reml=True, control=None)
    assert str(exc.value) == reason


def test_a_new_engine_is_one_module_and_one_registration(monkeypatch):
    monkeypatch.setattr(registry, "_TARGETS", dict(registry._TARGETS))
    monkeypatch.setattr(registry, "_ALIASES", dict(registry._ALIASES))
    monkeypatch.setattr(registry, "_LOADED", dict(registry._LOADED))
    register("native-again", "crossed.engines.native.engine:ENGINE")
    assert available()[-1] == "native-again"
    case = load_case("dyestuff")
    fit = crossed.lmer(case.formula, case.data, engine="native-again")
    assert fit.engine == "native"  # the module's engine object did the work
    with pytest.raises(ValueError, match="already registered"):
        register("native", "crossed.engines.native.engine:ENGINE")


def test_capabilities_are_declared_and_checked_in_one_place():
    """Each engine declares what it fits beyond an unweighted LMM; :func:`refusal` reads
    the declaration for LMMs and GLMMs alike (it was a name test of 'native' in fit_with
    and a getattr of fit_glmm in fit_glmm_with)."""
    from crossed.engines.registry import refusal
    from crossed.model.glmm.family import binomial, poisson

    native, sm, lme4 = (get_engine(n) for n in ("native", "statsmodels", "lme4"))
    case = load_case("sleepstudy_slopes")
    d = crossed.lmer(case.formula, case.data).design
    weighted = replace(d, weights=np.ones(d.n))
    assert refusal(native, weighted) is None
    assert "weights" in refusal(lme4, weighted)
    assert "weights" in refusal(sm, weighted)
    assert "variational Bayes" in refusal(sm, d, family=binomial())
    assert refusal(native, d, family=binomial("probit"), nagq=25) is None
    assert "nAGQ up to 25" in refusal(native, d, family=poisson(), nagq=26)
    assert refusal(lme4, d, family=binomial("cloglog")) is None
    with pytest.raises(UnsupportedModelError, match="weights"):
        fit_with("statsmodels", weighted, reml=True, control=None)
