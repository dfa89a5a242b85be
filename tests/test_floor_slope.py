"""The "floors equal across sizes" claim: the within task x level slope of log10 floor on
log10 parameter count and its bootstrap (groups resampled, each cell's seeds resampled),
against hand-computed slopes, the exact bootstrap distribution of a median, and simulated
grids with a planted slope through the real claim function."""
import numpy as np
import pytest

from geoanatomy.analysis.settings import summary_settings
from geoanatomy.analysis import claims, verdict
from geoanatomy.analysis.claims import floors as cfloors

ST = summary_settings({"alpha": 0.05, "n_bootstrap": 2000, "n_permutations": 200, "seed": 0, "verdict_min_units": 5,
      "slope_equivalence": 0.1})


def test_the_slope_is_the_pooled_within_group_slope():
    # group 1: x centred -0.5, 0.5; y (medians 1, 1.5) centred -0.25, 0.25 -> sxy 0.25, sxx 0.5
    # group 2: x -1, 0, 1; medians 5, 5.2, 5.4 -> sxy 0.4, sxx 2; pooled (0.25 + 0.4) / 2.5
    cells = [[(0.0, np.array([1.0])), (1.0, np.array([1.4, 1.5, 9.0]))],
             [(0.0, np.array([5.0, 5.0])), (1.0, np.array([5.2])), (2.0, np.array([5.4]))]]
    assert cfloors._within_group_slope(cells) == pytest.approx(0.26)


def test_without_seed_noise_every_bootstrap_slope_is_the_planted_one():
    # groups with 2 or 3 sizes (padding), every seed of a cell equal: 0.3 x + a group offset
    rng = np.random.default_rng(1)
    cells = []
    for g in range(7):
        xs = [5.0, 5.5, 6.0][: 2 + g % 2]
        cells.append([(x, np.full(1 + (g + i) % 3, 0.3 * x + g)) for i, x in enumerate(xs)])
    boots = cfloors._within_group_slope_bootstrap(cells, 500, rng)
    assert boots.shape == (500,) and np.allclose(boots, 0.3)


@pytest.mark.parametrize("seeds, exact", [
    ([0.0, 1.0, 2.0], {0.0: 7 / 27, 1.0: 13 / 27, 2.0: 7 / 27}),      # median of 3 draws
    ([0.0, 1.0], {0.0: 0.25, 0.5: 0.5, 1.0: 0.25})])                  # mean of the two middle values
def test_each_cells_seeds_are_resampled_as_a_bootstrap_of_its_median(seeds, exact):
    # one group, two cells at x 0 and 1: the slope is median(B) - median(A), A constant 0
    cells = [[(0.0, np.zeros(3)), (1.0, np.array(seeds))]]
    boots = cfloors._within_group_slope_bootstrap(cells, 40000, np.random.default_rng(0))
    vals, counts = np.unique(np.round(boots, 9), return_counts=True)
    assert set(vals) == set(exact)
    for v, c in zip(vals, counts):
        assert c / len(boots) == pytest.approx(exact[v], abs=0.01)


def _pres(slope, n_groups=8, seeds=2, noise=0.02, seed=0):
    """A grid's precursor records: n_groups task x level groups at two sizes, each run's RankMe
    floors (both variants) log10 floor = slope x log10 params + group effect + seed noise."""
    rng = np.random.default_rng(seed)
    sizes = {"nano": 409088, "micro": 1351680}
    tasks = ["copy", "rev", "sort", "add", "mod", "mul", "par", "cmp"]
    out = []
    for g in range(n_groups):
        task, level, effect = tasks[g % 8], f"L{1 + g // 8}", rng.normal(0, 0.3)
        for size, n in sizes.items():
            for s in range(seeds):
                lf = slope * np.log10(n) + effect + rng.normal(0, noise)
                m = {"direction": "collapse", "floor": float(10 ** lf), "floor_step": 10, "init": 30.0,
                     "collapsed": True, "layer": "ln_final", "position": "first"}
                out.append({"run": f"{task}_{level}_{size}_s{s}", "task": task, "level": level, "size": size,
                            "seed": s, "n_params": n, "steps": 1500, "difficulty": "easy", "acquired": True,
                            "acquisition_step": 100, "diverged": False, "control": "",
                            "measures": {"rankme": {**m, "variant": "uncentred"},
                                         "rankme_centred": {**m, "variant": "centred"}}})
    return out


def _words(slope, seed):
    pres = _pres(slope, seed=seed)
    rows = cfloors.floors_equal_across_sizes(claims.runs_views(pres, ST)[0])
    df = verdict.finish([r.as_dict() for r in rows], ST)
    return list(df["verdict"])


def test_the_claim_finds_equal_floors_and_rejects_a_planted_slope():
    # through the real claim function and the rule: floors equal (slope 0) reproduced, a slope
    # of 0.5 decade per decade not reproduced, in most simulated grids of 8 groups x 2 seeds
    flat = [w for s in range(6) for w in _words(0.0, s)]
    steep = [w for s in range(6) for w in _words(0.5, s)]
    assert flat.count("reproduced") >= 10 and steep.count("reproduced") == 0
    assert steep.count("not reproduced") >= 10
