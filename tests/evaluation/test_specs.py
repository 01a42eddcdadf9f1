"""Specification builders and named specifications (crossed/formulas/*.toml)."""

import pytest

import crossed as cx
from crossed.evaluation import specs


def test_repeated_measures_formula():
    s = cx.specs.repeated_measures("delta", within=["language", "task", "mode"],
                                   subjects="architecture/model")
    assert str(s) == "delta ~ language * task * mode + (1 | architecture/model)"
    assert s.design == "repeated_measures"
    text = s.explain()
    assert "(1 | model:architecture)" in text and "language * task * mode" in text
    assert list(s.terms_table().columns) == ["term", "meaning"]
    assert str(cx.specs.repeated_measures("delta", ["language"], subjects="architecture")) \
        == "delta ~ language + (1 | architecture)"


def test_cross_classified_formulas():
    nuis = ["seed", "lr", "batch_size", "num_epochs"]
    plain = cx.specs.cross_classified("score", systems="model", datasets="dataset",
                                      nuisance=nuis, slopes="none")
    assert str(plain) == ("score ~ seed + lr + batch_size + num_epochs + (1 | model) + "
                          "(1 | dataset) + (1 | model:dataset)")
    slopes = cx.specs.cross_classified("score", nuisance=nuis, slopes="uncorrelated")
    assert str(slopes) == (
        "score ~ seed + lr + batch_size + num_epochs + (1 | model) + (1 | dataset) + "
        "(1 | model:dataset) + (0 + seed + lr + batch_size + num_epochs || model:dataset)")
    bare = cx.specs.cross_classified("score")
    assert str(bare) == "score ~ 1 + (1 | model) + (1 | dataset) + (1 | model:dataset)"
    with pytest.raises(ValueError, match="slopes"):
        cx.specs.cross_classified("score", nuisance=nuis, slopes="correlated")


@pytest.mark.filterwarnings("ignore::crossed.SingularFitWarning")
def test_the_issue_specifications_fit():
    """The builders' formulas fit on the bundled data they were written for."""
    mono = cx.load_dataset("exist_mono")
    fit = cx.specs.repeated_measures("delta", ["language", "task", "mode"]).fit(mono)
    assert fit.ngroups == {"model:architecture": 6, "architecture": 3}
    blurb = cx.load_dataset("blurb_like")
    spec = cx.specs.cross_classified("score", nuisance=["seed", "lr", "batch_size",
                                                        "num_epochs"], slopes="none")
    fit = spec.fit(blurb)
    assert set(fit.ngroups) == {"model", "dataset", "model:dataset"}


def test_named_specifications():
    assert {"repeated_measures", "cross_classified"} <= set(specs.list_named())
    rec = specs.load_named("cross_classified")
    assert "{response}" in rec["formula"]
    s = specs.from_name("repeated_measures", response="delta", within=["language", "task"],
                        subjects="architecture")
    assert str(s) == "delta ~ language * task + (1 | architecture)"
    text = "repeated_measures:response=delta;within=language,task,mode;subjects=architecture"
    assert specs.resolve_formula(text) == \
        "delta ~ language * task * mode + (1 | architecture)"
    assert specs.resolve_formula("y ~ x + (1 | g)") == "y ~ x + (1 | g)"
    text = "cross_classified:response=score;nuisance=seed;slopes=none"
    assert specs.resolve_formula(text) == \
        "score ~ seed + (1 | model) + (1 | dataset) + (1 | model:dataset)"
    with pytest.raises(ValueError, match="no named specification"):
        specs.load_named("nonexistent_design")


def test_user_folder(tmp_path, monkeypatch):
    (tmp_path / "paired.toml").write_text(
        'name = "paired"\nformula = "{response} ~ {system} + (1 | {item})"\n')
    monkeypatch.setenv("CROSSED_FORMULAS", str(tmp_path))
    assert "paired" in specs.list_named()
    s = specs.from_name("paired", response="y", system="model", item="dataset")
    assert str(s) == "y ~ model + (1 | dataset)"
    with pytest.raises(ValueError, match="needs field 'item'"):
        specs.from_name("paired", response="y", system="model")


def test_templates_are_a_real_package_folder(monkeypatch):
    # before: src/crossed/formulas was a symlink to ../../formulas, which sdists and Windows
    # checkouts do not carry.
    import tomllib
    from pathlib import Path

    monkeypatch.delenv("CROSSED_FORMULAS", raising=False)
    folder = Path(specs.__file__).resolve().parents[1] / "formulas"
    assert folder.is_dir() and not (Path(specs.__file__).parents[1] / "formulas").is_symlink()
    assert specs.formula_dirs() == [folder]
    assert {"cross_classified", "repeated_measures"} <= set(specs.list_named())
    root = Path(__file__).resolve().parents[2]
    if (root / "meson.build").exists():  # a source checkout: the package folder ships whole
        # (meson.build installs src/crossed as it is, package data included; the wheel's
        # contents are checked by scripts/check_wheel.sh)
        build = (root / "meson.build").read_text()
        assert "install_subdir(\n  'src/crossed'," in build
        assert tomllib.loads((root / "pyproject.toml").read_text())["build-system"][
            "build-backend"] == "mesonpy"
        assert (root / "src" / "crossed" / "py.typed").exists()


@pytest.mark.parametrize("kw", [{"subjects": None}, {"subjects": ""}, {"response": 3}])
def test_repeated_measures_refuses_a_missing_name_by_field(kw):
    # subjects=None raised "'NoneType' object has no attribute 'strip'"
    args = {"response": "y", "within": ["f"], "subjects": "g", **kw}
    field = next(iter(kw))
    with pytest.raises(ValueError, match=f"{field} must be a column name"):
        specs.repeated_measures(**args)


@pytest.mark.parametrize("kw", [{"systems": None}, {"datasets": 2}, {"response": None}])
def test_cross_classified_refuses_a_missing_name_by_field(kw):
    args = {"response": "y", "systems": "g", "datasets": "h", **kw}
    field = next(iter(kw))
    with pytest.raises(ValueError, match=f"{field} must be a column name"):
        specs.cross_classified(**args)


@pytest.mark.parametrize("text, where", [
    ('name = "bad"\nformula = "y ~ x"\n[oops\n', "line 3"),
    ('name = "bad"\nformula = "y ~ x\n', "line 2"),
    ('name = "bad"\nnotes = """\nnever closed\n', "line 3"),
])
def test_malformed_toml_names_the_file_and_line(tmp_path, monkeypatch, text, where):
    (tmp_path / "bad.toml").write_text(text)
    monkeypatch.setenv("CROSSED_FORMULAS", str(tmp_path))
    with pytest.raises(ValueError, match="bad.toml") as err:
        specs.from_name("bad", response="y")
    assert "not valid TOML" in str(err.value) and where in str(err.value)


@pytest.mark.parametrize("text, what", [
    ('name = "bad"\nsummary = "no formula"\n', "has no 'formula'"),
    ('name = "bad"\nformula = 3\n', "'formula' must be a string, got int"),
    ('name = "bad"\nformula = "y ~ x"\nnotes = ["a"]\n', "'notes' must be a string"),
])
def test_a_record_without_a_formula_string_names_the_file(tmp_path, monkeypatch, text, what):
    (tmp_path / "bad.toml").write_text(text)
    monkeypatch.setenv("CROSSED_FORMULAS", str(tmp_path))
    with pytest.raises(ValueError, match=what) as err:
        specs.load_named("bad")
    assert "bad.toml" in str(err.value)


def test_a_file_that_is_not_utf8_names_the_file(tmp_path, monkeypatch):
    (tmp_path / "bad.toml").write_bytes(b'name = "\xff\xfe"\nformula = "y ~ x"\n')
    monkeypatch.setenv("CROSSED_FORMULAS", str(tmp_path))
    with pytest.raises(ValueError, match="bad.toml.*not UTF-8"):
        specs.load_named("bad")
