"""The engine contract and registry (engines/registry.py)."""

from __future__ import annotations

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
