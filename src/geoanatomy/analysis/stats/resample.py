"""Resampling shared by the tests: permutations within strata, the percentile bootstrap of a
median (over runs) and of any statistic over units (``boot``), and the cluster bootstrap over
cells.

The cluster bootstrap gives intervals of rates and gaps over units: task x level x size cells
resampled with replacement, the runs (seeds) of each drawn cell resampled inside it, so
replicate seeds never count as independent evidence.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import pandas as pd


# The unit of the single-task statistics: a task x level x size cell (its seeds nested inside).
CELLS = ("task", "level", "size")


def strata_permutations(strata, n_perm: int, rng) -> np.ndarray:
    """(n_perm, n) index arrays, each a uniformly random permutation of range(n) that moves
    units only within their stratum (one draw of rng.random per stratum, in np.unique order)."""
    strata = np.asarray(strata)
    idx = np.empty((n_perm, len(strata)), dtype=np.intp)
    for s in np.unique(strata):
        g = np.flatnonzero(strata == s)
        idx[:, g] = g[np.argsort(rng.random((n_perm, len(g))), axis=1)]
    return idx


def bootstrap_median_ci(x, n_resamples: int = 10_000, level: float = 0.95, seed: int = 0) -> tuple:
    """Percentile bootstrap interval of the median of x over its elements."""
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    if len(x) == 0:
        return (None, None)
    rng = np.random.default_rng(seed)
    meds = np.median(x[rng.integers(0, len(x), size=(n_resamples, len(x)))], axis=1)
    lo, hi = np.quantile(meds, [(1 - level) / 2, 1 - (1 - level) / 2])
    return (float(lo), float(hi))


@lru_cache(maxsize=512)
def _cluster_draws(sizes: tuple, n_resamples: int, seed: int) -> tuple:
    """The resamples of a cluster bootstrap over cells of ``sizes`` runs each: per resample the
    (cell, offset in the cell) of every drawn run, as flat arrays. Depends on the cell sizes
    alone, so every measure and class with the same cells reuses one set of draws (the same
    numbers as drawing them again: same generator, same calls, same order)."""
    rng = np.random.default_rng(seed)
    sz = np.asarray(sizes)
    out = []
    for _ in range(n_resamples):
        pick = rng.integers(0, len(sizes), len(sizes))
        within = [rng.integers(0, sz[i], sz[i]) for i in pick]
        out.append((np.repeat(pick, sz[pick]), np.concatenate(within)))
    return tuple(out)


def cluster_bootstrap(df: pd.DataFrame, stat, n_resamples: int = 2000, seed: int = 0,
                      cell_cols=CELLS) -> tuple:
    """Percentile 95% interval of ``stat(idx)`` (idx: positions into ``df``): cells resampled
    with replacement and the runs (seeds) of each drawn cell resampled inside it. ``stat``
    works on positions so that statistics of per-run numbers stay numpy-fast."""
    if not len(df):
        return (None, None)
    codes = df.groupby(list(cell_cols), sort=True).ngroup().to_numpy()
    order = np.argsort(codes, kind="stable")            # the positions of cell g: order[start[g]:start[g+1]]
    sizes = np.bincount(codes, minlength=codes.max() + 1)
    start = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    vals = []
    for cell, off in _cluster_draws(tuple(int(x) for x in sizes), int(n_resamples), int(seed)):
        v = stat(order[start[cell] + off])
        if v is not None and np.isfinite(v):
            vals.append(v)
    if not vals:
        return (None, None)
    lo, hi = np.quantile(vals, [0.025, 0.975])
    return (float(lo), float(hi))


def boot(x: np.ndarray, stat, nb: int, seed: int, level: float = 0.95) -> tuple:
    """Percentile interval of ``stat`` (np.median, np.mean: anything taking axis=1) over units:
    x (one number per unit) resampled with replacement, nb times."""
    x = np.asarray(x, dtype=float)
    if not len(x):
        return (None, None)
    rng = np.random.default_rng(seed)
    vals = stat(x[rng.integers(0, len(x), (nb, len(x)))], axis=1)
    vals = vals[np.isfinite(vals)]
    if not len(vals):
        return (None, None)
    lo, hi = np.quantile(vals, [(1 - level) / 2, 1 - (1 - level) / 2])
    return (float(lo), float(hi))
