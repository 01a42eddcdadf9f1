"""The shared keyword conventions: seed= (random seed), seed_col= (column of seeds),
progress= (bars); old spellings fail with a TypeError naming the new keyword."""

import numpy as np
import pytest

from crossed._conventions import as_generator, renamed_keywords, show_progress
from crossed.evaluation.resample import _util
from crossed.simulate import execution, response


def test_one_as_generator_everywhere():
    assert _util.as_generator is as_generator
    assert response.as_generator is as_generator
    g = np.random.default_rng(1)
    assert as_generator(g) is g
    np.testing.assert_array_equal(as_generator(7).random(3),
                                  np.random.default_rng(7).random(3))
    np.testing.assert_array_equal(as_generator(np.random.SeedSequence(7)).random(3),
                                  np.random.default_rng(7).random(3))


def test_one_progress_switch_everywhere():
    assert execution.show_progress is show_progress
    assert show_progress(True) is True
    assert show_progress(False) is False
    assert show_progress(None) is False  # pytest captures stderr


def test_renamed_keywords_name_the_new_spelling():
    @renamed_keywords(seed_is_random=True, random_state="seed", progress_bar="progress")
    def f(seed=None, seed_col=None, progress=None):
        return seed, seed_col, progress

    assert f(seed=1, seed_col="s", progress=False) == (1, "s", False)
    with pytest.raises(TypeError, match=r"f: random_state= is now seed= \(the random seed\)"):
        f(random_state=1)
    with pytest.raises(TypeError, match=r"f: progress_bar= is now progress="):
        f(progress_bar=True)
    with pytest.raises(TypeError, match=r"seed= is the random seed; name the column of seeds "
                                        r"with seed_col='run'"):
        f(seed="run")
    assert f.__name__ == "f"


@pytest.mark.parametrize("bad,error", [(-1, ValueError), (1.5, TypeError), ("a", TypeError),
                                       (True, TypeError)])
def test_a_bad_seed_is_refused_by_name_everywhere(bad, error):
    import warnings

    import pandas as pd

    import crossed as cx
    from crossed import resample

    df = pd.DataFrame({"y": [1.0, 2.1, 2.9, 4.2, 5.1, 5.8, 7.2, 8.1],
                       "g": list("aabbccdd")})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cx.lmer("y ~ 1 + (1 | g)", df)
    with pytest.raises(error, match="seed="):
        fit.simulate(2, seed=bad)
    with pytest.raises(error, match="seed="):
        cx.bootstrap(fit, lambda f: f.beta, nsim=2, seed=bad)
    st = resample.from_replicates(pd.DataFrame({"system": list("aabb"), "task": list("xyxy"),
                                                "score": [1.0, 2.0, 3.0, 4.0]}), "score")
    with pytest.raises(error, match="seed="):
        resample.aggregates(st, n_resamples=5, seed=bad)
