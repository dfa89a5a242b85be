"""``verdict_power.csv``: how often each claim's test says "reproduced" on this grid's own
design when the truth is known, under nulls (its false rate) and under an alternative (its
power).

The design is the grid's: its cells, the seeds of each cell, every run's acquisition step,
first-token acquisition step, class and the loss curve's onset and extreme steps. Only the
measure's event steps are simulated, per run (``SCENARIOS``; t_acq the run's acquisition
step, t_ref the loss curve's event of the same kind, U uniform, N normal, b a cell's effect
shared by its seeds):

======================  ====================================================================
exchangeable            t = t_acq of a random run of the same size x U(0.9, 1.1)
clock                   t = the median t_ref over runs, the same step in every run
class-clock             t = half the median acquisition step of the other cells of the run's size
                        and class: a clock that knows the class file and the size, nothing else
loss-copy               t = the loss onset x U(0.9, 1.1), for every event kind (a geometric event
                        that copies the loss curve; a windowed floor ends there)
loss-tied               t = t_ref x U(0.9, 1.1)
seed-clustered          t = t_ref x exp(b + e), b ~ N(0, 0.3) per cell, e ~ N(0, 0.05) per run
behaviour-clustered     t = t_acq x exp(b + e), as above around acquisition (leads of 0)
proportional            t = 0.5 t_acq x exp(N(0, 0.05)) (a precursor in every cell)
proportional-noisy      t = 0.5 t_acq x 10^N(0, s): s the measure's observed scatter (the standard
                        deviation over acquired cells of its lag, ``observed_scatter``), at least
                        0.13 decade
partial                 proportional in a random half of the cells (all seeds of a cell alike),
                        exchangeable in the others: within-class concordance about 0.65, the
                        modest order the study reports (52-69% of pairs)
short-lead              t = 0.9 t_acq x exp(N(0, 0.05)): a lead of a tenth of t_acq, shorter than
                        the precursor rule's clear gap f (0.25 by default)
hard-only               proportional in hard cells, t = t_acq x U(0.9, 1.1) in easy ones
simultaneous            t = t_acq x 10^N(0, 0.03)
simultaneous-noisy      t = t_acq x 10^N(0, s), s as above (at least 0.1)
lag                     t = t_acq x 10^(0.3 + N(0, 0.03))
lag-noisy               t = t_acq x 10^(0.3 + N(0, s)), s as above (at least 0.1)
======================  ====================================================================

Simulated steps land where a measured event can land: each run's own checkpoint steps or, for
the expensive measures, the checkpoints that measure was taken at (``event_grids``); an onset
(a threshold crossing) on the next one at or after the drawn step, an extreme (floor, peak:
the transition) on the nearest one, as the event detector reads a sampled curve. So the ties a
coarse schedule makes (a lead of zero steps when both events fall on one checkpoint; equal
steps across a cell's seeds) are in the simulated populations as they are in the grid.

A recovery step (the sequence claim) is drawn like the extreme, by the same law. Every
population goes through the real claim code (``verdict.precursor_claims`` on the
simulated per-run table, ``verdict.behaviour_claims``' lead rows on simulated probe steps,
``verdict.finish`` for Holm and the rule, each Holm family padded to the size it has in the
real verdict, ``family_sizes``), with ``n_permutations`` and ``n_bootstrap`` of
``POWER_SETTINGS`` (fewer than the real verdict's, stated in the file). Each claim's
``Design`` says which scenarios are its nulls and which its alternative; power = the rate of
"reproduced" under the alternative, false rate = the largest rate of "reproduced" under its
nulls. ``design`` "grid" is the grid as it is; "grid x k" repeats every cell k times (new
cells with the same seeds per cell, acquisition steps and classes), the cells a conclusive
answer would need; k below 1 keeps a fixed share of the cells (evenly spaced in the order
size, task, level), the power of a row measured on fewer cells than the grid has (the
expensive measures, which run at some sizes only). ``verdict.finish`` gives each row the power
of the largest design with no more cells than the row has.

The claims on floors, layer orders and other sizes read other quantities than event timing;
acquisition rate and top-down propagation are simulated as binomial counts over the grid's
cells (share 1/2 null, 0.8 alternative) through their row functions; the floor and
cross-size claims are listed as not simulated.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .load import CHECKPOINTS, clear_gap, half_widths, run_grids
from .stats import CELLS, binomial_p, clopper_pearson, timing
from .units import unit_events
from .claims import CLAIMS, RunsView, reading, simulated_runs, views_of_units
from ..runtime import parallel_map
from .verdict import ROLE_ALT, ROLE_NULL, Evidence, finish, word

POWER_SETTINGS = {"n_permutations": 999, "n_bootstrap": 499}
SCENARIOS = ("exchangeable", "clock", "class-clock", "loss-copy", "loss-tied", "seed-clustered", "behaviour-clustered",
             "proportional",
             "proportional-noisy", "partial", "short-lead", "hard-only", "simultaneous", "simultaneous-noisy", "lag",
             "lag-noisy")
SCENARIO_TEXT = {
    "exchangeable": "exchangeable: t = t_acq of a random run of the size x U(0.9, 1.1)",
    "clock": "clock: t = median t_ref in every run",
    "class-clock": "class-clock: t = half the median acquisition step of the other cells of the size and class",
    "loss-copy": "loss-copy: t = the loss onset x U(0.9, 1.1), every event kind",
    "loss-tied": "loss-tied: t = t_ref x U(0.9, 1.1)",
    "seed-clustered": "seed-clustered: t = t_ref x exp(b_cell + e_run), b ~ N(0, 0.3), e ~ N(0, 0.05)",
    "behaviour-clustered": "behaviour-clustered: t = t_acq x exp(b_cell + e_run)",
    "proportional": "proportional: t = 0.5 t_acq x exp(N(0, 0.05))",
    "proportional-noisy": "proportional-noisy: t = 0.5 t_acq x 10^N(0, s), s the measure's observed scatter (at least"
                          " 0.13 decade)",
    "partial": "partial: proportional in a random half of the cells, exchangeable in the others (concordance about "
               "0.65)",
    "short-lead": "short-lead: t = 0.9 t_acq x exp(N(0, 0.05)) (a lead shorter than the clear gap f)",
    "hard-only": "hard-only: proportional in hard cells, t_acq x U(0.9, 1.1) in easy cells",
    "simultaneous": "simultaneous: t = t_acq x 10^N(0, 0.03)",
    "simultaneous-noisy": "simultaneous-noisy: t = t_acq x 10^N(0, s), s as above (at least 0.1)",
    "lag": "lag: t = t_acq x 10^(0.3 + N(0, 0.03))",
    "lag-noisy": "lag-noisy: t = t_acq x 10^(0.3 + N(0, s)), s as above (at least 0.1)",
}


def designs() -> list[tuple]:
    """(claim, event) of every simulated claim's power rows, in the claims' table order."""
    return [(c, ev) for c in CLAIMS if c.design.kind == "simulated" for ev in c.design.events]


POWER_COLUMNS = ["claim", "event", "scenario", "role", "design", "n_cells", "n_units", "n_populations", "reproduced",
                 "not_reproduced", "inconclusive"]


def _subset_cells(t: pd.DataFrame, share: float, unit_cols=CELLS) -> pd.DataFrame:
    """The runs of ceil(share x cells) cells, evenly spaced over the cells sorted by size, task,
    level (a fixed choice: it reads no outcome)."""
    keys = sorted({tuple(str(x) for x in k) for k in t[list(unit_cols)].itertuples(index=False)})
    if not keys:
        return t
    m = max(1, int(np.ceil(share * len(keys))))
    keep = {keys[i] for i in np.unique(np.linspace(0, len(keys) - 1, m).round().astype(int))}
    mask = [tuple(str(x) for x in k) in keep for k in t[list(unit_cols)].itertuples(index=False)]
    return t[mask].reset_index(drop=True)


def _design(rows: pd.DataFrame, k: float, unit_cols=CELLS) -> pd.DataFrame:
    """The template runs (one geometric measure's rows of acquired, non-control, non-diverged
    runs), their cells repeated k times (k >= 1) or a share k of them (k < 1)."""
    real = rows[(rows["control"] == "") & ~rows["diverged"].astype(bool) & (rows["kind"] == "geometric")]
    first = real["measure"].iloc[0]
    t = real[(real["measure"] == first) & real["acquired"].astype(bool)].reset_index(drop=True)
    if k < 1:
        return _subset_cells(t, k, unit_cols)
    reps = []
    for i in range(int(k)):
        r = t.copy()
        if i:
            r["task"] = r["task"].astype(str) + f"#{i}"
            r["run"] = r["run"].astype(str) + f"#{i}"
        reps.append(r)
    return pd.concat(reps, ignore_index=True)


NOISY = {"proportional-noisy": 0.13, "simultaneous-noisy": 0.1, "lag-noisy": 0.1}    # default scatter, decades


def _class_clock(t: pd.DataFrame, unit_cols) -> np.ndarray:
    """Per run, half the median acquisition step of the other cells of its size and class (the
    cells' medians over their runs): a clock that knows the class file and the size only."""
    cells = t.groupby(list(unit_cols), sort=False)
    c = cells.agg(t_acq=("acquisition_step", "median"), size=("size", "first"), cls=("difficulty", "first"))
    clock = 0.5 * timing.class_clock(c["t_acq"].to_numpy(float), c["size"].to_numpy(), c["cls"].to_numpy())
    code = cells.ngroup().to_numpy()
    x = clock[code]
    return np.where(np.isfinite(x), x, 0.5 * t["acquisition_step"].to_numpy(float))


def _simulate(t: pd.DataFrame, scenario: str, rng, unit_cols=CELLS) -> dict:
    """{event kind: simulated steps (n,)} for the runs of ``t`` (module doc); a noisy scenario
    also gives its centre and standard-normal draws per kind ("_centre", "_z"), which
    ``_sim_rows`` scales by each measure's scatter."""
    n = len(t)
    t_acq = t["acquisition_step"].to_numpy(float)
    cell = t.groupby(list(unit_cols), sort=False).ngroup().to_numpy()
    b = rng.normal(0, 0.3, cell.max() + 1)[cell]
    e = rng.normal(0, 0.05, n)
    hard = (t["difficulty"] == "hard").to_numpy()
    # partial: one draw per cell (its seeds alike, every event kind alike)
    half = (rng.random(cell.max() + 1) < 0.5)[cell] if scenario == "partial" else None
    onset = pd.to_numeric(t["loss_onset_step"], errors="coerce").to_numpy(float)
    onset = np.where(np.isfinite(onset), onset, t_acq)
    out = {"_centre": {}, "_z": {}}
    for kind, ref in (("onset", "loss_onset_step"), ("extreme", "loss_extreme_step"),
                      ("recovery", "loss_extreme_step")):
        t_ref = pd.to_numeric(t[ref], errors="coerce").to_numpy(float)
        t_ref = np.where(np.isfinite(t_ref), t_ref, t_acq)
        centre = None
        if scenario in ("exchangeable", "partial"):
            perm = np.arange(n)
            for s in t["size"].unique():
                ix = np.flatnonzero(t["size"].to_numpy() == s)
                perm[ix] = rng.permutation(ix)
            x = t_acq[perm] * rng.uniform(0.9, 1.1, n)
            if scenario == "partial":
                x = np.where(half, 0.5 * t_acq * np.exp(rng.normal(0, 0.05, n)), x)
        elif scenario == "clock":
            x = np.full(n, float(np.median(t_ref)))
        elif scenario == "class-clock":
            x = _class_clock(t, unit_cols)
        elif scenario == "loss-copy":
            x = onset * rng.uniform(0.9, 1.1, n)
        elif scenario == "loss-tied":
            x = t_ref * rng.uniform(0.9, 1.1, n)
        elif scenario == "seed-clustered":
            x = t_ref * np.exp(b + e)
        elif scenario == "behaviour-clustered":
            x = t_acq * np.exp(b + e)
        elif scenario == "proportional":
            x = 0.5 * t_acq * np.exp(rng.normal(0, 0.05, n))
        elif scenario == "short-lead":
            x = 0.9 * t_acq * np.exp(rng.normal(0, 0.05, n))
        elif scenario == "hard-only":
            x = np.where(hard, 0.5 * t_acq * np.exp(rng.normal(0, 0.05, n)), t_acq * rng.uniform(0.9, 1.1, n))
        elif scenario == "simultaneous":
            x = t_acq * 10 ** rng.normal(0, 0.03, n)
        elif scenario == "lag":
            x = t_acq * 10 ** (0.3 + rng.normal(0, 0.03, n))
        elif scenario in NOISY:
            centre = {"proportional-noisy": 0.5 * t_acq, "simultaneous-noisy": t_acq,
                      "lag-noisy": t_acq * 10 ** 0.3}[scenario]
            z = rng.normal(0, 1, n)
            out["_centre"][kind], out["_z"][kind] = centre, z
            x = centre * 10 ** (NOISY[scenario] * z)
        else:
            raise ValueError(f"unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}")
        out[kind] = np.maximum(np.round(x), 0.0)
    return out


def observed_scatter(units: pd.DataFrame) -> dict:
    """measure -> the standard deviation over acquired units of its transition's lag behind
    acquisition (decades; ``units.unit_events``): the scatter a noisy alternative is simulated
    at for that measure (at least the scenario's default)."""
    if not len(units):
        return {}
    a = units[units["acquired"] & (units["kind"] == "geometric")]
    out = {}
    for m, g in a.groupby("measure", sort=False):
        lag = g["lag_transition"].to_numpy(float)
        lag = lag[np.isfinite(lag)]
        if len(lag) >= 3:
            out[m] = float(np.std(lag, ddof=1))
    return out


def event_grids(pres: list[dict]) -> dict:
    """{run: ``load.run_grids``}: where each run's events can fall."""
    return {pre["run"]: run_grids(pre) for pre in pres}


def _grid_matrix(t: pd.DataFrame, grids: dict | None, measure: str | None):
    """(n runs, longest grid) steps padded with +inf, and each row's grid length, for the runs
    of ``t`` (repeated cells' runs, "run#i", use their template's grid); None: no grid at all."""
    if not grids:
        return None
    gs = []
    for run in t["run"].astype(str):
        g = grids.get(run.split("#")[0]) or {}
        gs.append(g.get(measure) if measure in g else g.get(CHECKPOINTS))
    if all(g is None for g in gs):
        return None
    width = max(len(g) for g in gs if g is not None)
    mat = np.full((len(gs), width), np.inf)
    for i, g in enumerate(gs):
        if g is not None:
            mat[i, :len(g)] = g
    return mat, np.array([len(g) if g is not None else 0 for g in gs])


def on_grid(x: np.ndarray, grid, how: str = "next") -> np.ndarray:
    """Each step of ``x`` moved onto its run's grid: ``how`` "next", the first grid step at or
    after it (a threshold crossing: the first checkpoint past the threshold); "nearest", the
    closest grid step, the earlier on a tie (an extreme: the sampled floor or peak is the
    checkpoint nearest the curve's own); beyond the ends, the end. Rows without a grid, or
    ``grid`` None, unchanged."""
    if grid is None:
        return x
    mat, n = grid
    last = np.maximum(n - 1, 0)
    rows = np.arange(len(x))
    nxt = np.minimum((mat < x[:, None]).sum(axis=1), last)
    if how == "nearest":
        prev = np.maximum(nxt - 1, 0)
        nxt = np.where(np.abs(mat[rows, prev] - x) <= np.abs(mat[rows, nxt] - x), prev, nxt)
    elif how != "next":
        raise ValueError(f"on_grid: how must be 'next' or 'nearest', got {how!r}")
    return np.where(n > 0, mat[rows, nxt], x)


def _lag_resolution(x: np.ndarray, grid, t_acq: np.ndarray, checkpoints) -> np.ndarray:
    """Per run, ``load.lag_resolution`` of a simulated transition at grid step x (its grid:
    ``_grid_matrix``; NaN without one), by the same formula (``load.half_widths``)."""
    def part(steps, g, quarter):
        return np.full(len(steps), np.nan) if g is None else half_widths(g[0], g[1], steps, quarter)
    return part(x, grid, True) + part(t_acq, checkpoints, False)


def _sim_rows(t: pd.DataFrame, sim: dict, measures, grids=None, scatter=None, scenario: str = "") -> pd.DataFrame:
    """The simulated per-run table: every measure's rows with the population's event steps,
    each on that measure's grid (``grids``: measure -> ``_grid_matrix``); a noisy scenario's
    steps drawn at the measure's observed scatter (``scatter``, decades) when it is larger than
    the scenario's default."""
    rows = []
    for m in measures:
        r = t.copy()
        g = (grids or {}).get(m)
        steps = {}
        centre = sim.get("_centre")            # a noisy scenario's (``_simulate``); a hand-made sim has none
        for kind in ("onset", "extreme", "recovery"):
            x = sim[kind]
            sd = (scatter or {}).get(m)
            if centre and kind in centre and sd is not None and sd > NOISY.get(scenario, 0.0):
                x = np.maximum(np.round(sim["_centre"][kind] * 10 ** (sd * sim["_z"][kind])), 0.0)
            steps[kind] = x
        onset, ext = on_grid(steps["onset"], g, "next"), on_grid(steps["extreme"], g, "nearest")
        r["measure"], r["kind"], r["transitioned"] = m, "geometric", True
        r["variant"] = "centred" if m == "rankme_centred" else ""
        r["onset_step"], r["extreme_step"] = onset, ext
        r["transition_step"] = ext
        r["recovery_step"] = on_grid(steps["recovery"], g, "nearest")
        r["mean_share_rho"] = np.nan
        r["lag_resolution"] = _lag_resolution(ext, g, t["acquisition_step"].to_numpy(float),
                                              (grids or {}).get(CHECKPOINTS))
        rows.append(r)
    return pd.concat(rows, ignore_index=True)


def _population_rows(units: pd.DataFrame, t: pd.DataFrame, sim: dict, st_sim: dict, unit_cols,
                     checkpoints=None, rows: pd.DataFrame | None = None) -> list[dict]:
    """The verdict rows (before Holm and the rule) of one simulated population: its unit table
    through the per-measure claims (those CLAIM_DESIGN names, for RankMe; the lag claims for
    the other measures), and the lead claims on simulated probe and log-prob steps (on the
    runs' checkpoints, ``checkpoints``: a ``_grid_matrix``: probes and log-probs are read at
    every checkpoint)."""
    res = []
    frac = clear_gap(t["min_gap_frac"])
    for v in views_of_units(units, st_sim, frac, rows=rows):
        res += [r.as_dict() for c in reading("measure", "simulated") if c.design.measure == v.measure
                for r in c.rows(v)]
    runs = simulated_runs(t, t["acquisition_step"].to_numpy(float), on_grid(sim["extreme"], checkpoints), unit_cols)
    view = RunsView(runs, [], st_sim, frac, tuple(unit_cols))
    res += [r.as_dict() for c in reading("runs", "simulated") for r in c.rows(view)]
    return res


def family_sizes(rows: pd.DataFrame, units: pd.DataFrame, st: dict, unit_cols=CELLS) -> dict:
    """Holm family -> the rows it has in the real verdict (the per-measure and run-reading
    claims on the grid's own data; resampling counts do not change how many rows there are)."""
    cheap = {**st, "n_permutations": 9, "n_bootstrap": 9}
    fams = [r.family for v in views_of_units(units, cheap, clear_gap(rows["min_gap_frac"]), rows=rows)
            for c in reading("measure")
            for r in c.rows(v)]
    return {f: fams.count(f) for f in dict.fromkeys(fams) if f}


def _words(rows_by_population: list[list[dict]], st_sim: dict, sizes: dict | None = None) -> pd.DataFrame:
    """verdict.finish on every population at once: each population's families kept apart
    (Holm never mixes populations) and padded to the real verdict's family sizes (``sizes``)
    with rows of p = 1, so Holm corrects a simulated row as much as the real one; column
    population."""
    tagged = [{**r, "family": f"{i}#{r['family']}"} for i, rows in enumerate(rows_by_population) for r in rows]
    if sizes:
        have: dict = {}
        for r in tagged:
            have[r["family"]] = have.get(r["family"], 0) + 1
        for fam, k in have.items():
            for _ in range(max(0, sizes.get(fam.split("#", 1)[1], 0) - k)):
                tagged.append({"claim": "(Holm padding)", "measure": "", "variant": "", "event": "", "family": fam,
                               "p": 1.0, "value": 0.0, "n_units": 0, "rule": "greater"})
    df = finish(tagged, st_sim)
    df = df[df["claim"] != "(Holm padding)"].reset_index(drop=True)
    df["population"] = df["family"].str.split("#", n=1).str[0].astype(int)
    df["event"] = df["event"].fillna("")
    return df


# populations per work item of the simulation (each population draws from its own seed, so the
# chunking and the worker count change no number; a chunk this size keeps two workers busy)
CHUNK = 10


def population_rng(seed: int, design: int, scenario: str, population: int) -> np.random.Generator:
    """The random stream of one simulated population: seed, the design's index in
    ``power_multiples``, the scenario and the population's index (numpy's SeedSequence spawn
    key), so a population draws the same numbers in any process, chunk or order."""
    key = (1, int(design), SCENARIOS.index(scenario), int(population))
    return np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=key))


@dataclass(frozen=True)
class _DesignJob:
    """What simulating populations on one design needs (shipped whole to a worker)."""
    t: pd.DataFrame
    on: dict
    measures: tuple
    scatter: dict
    st_sim: dict
    sizes: dict
    unit_cols: tuple
    seed: int
    index: int


def _simulate_chunk(item) -> pd.DataFrame:
    """The words (claim, event, measure, population, verdict) of populations ``pops`` of one
    design and scenario: simulated event steps, the unit table of all of them at once (the
    population one more unit key), each population's rows through the real claim code, and
    ``verdict.finish`` (Holm within each population's families). Module level: a worker's job."""
    job, sc, pops = item
    t, unit_cols = job.t, job.unit_cols
    sims = [_simulate(t, sc, population_rng(job.seed, job.index, sc, i), unit_cols) for i in pops]
    batch = pd.concat([_sim_rows(t, sim, job.measures, job.on, job.scatter, sc).assign(population=i)
                       for i, sim in enumerate(sims)], ignore_index=True)
    units = unit_events(batch, tuple(unit_cols) + ("population",))
    by_pop = dict(tuple(batch.groupby("population", sort=True)))
    per_pop = [_population_rows(u.drop(columns="population"), t, sims[i], job.st_sim, unit_cols,
                                job.on[CHECKPOINTS], by_pop[i].drop(columns="population").reset_index(drop=True))
               for i, u in units.groupby("population", sort=True)]
    words = _words(per_pop, job.st_sim, job.sizes)
    words["population"] = np.asarray(list(pops))[words["population"].to_numpy()]
    return words[["claim", "event", "measure", "population", "verdict"]]


def verdict_power(rows: pd.DataFrame, st: dict, n_populations: int = 200, multiples=(1,), seed: int = 0,
                  unit_cols=CELLS, n_populations_multiples: int | None = None, grids: dict | None =
                  None, progress=print, workers: int = 1, nulls: bool = True) -> pd.DataFrame:
    """verdict_power.csv (module doc) for the grid whose per-run table is ``rows``; designs
    repeated k times (``multiples`` > 1) run the alternatives only, with
    ``n_populations_multiples`` populations (default: a quarter of n_populations). ``grids``
    (``event_grids`` of the runs): where their events can fall; None: anywhere on whole steps.
    ``progress``: called with one line per design and scenario (the simulation takes minutes).
    ``workers``: processes the populations are simulated in (``runtime.parallel_map``); every
    population is seeded on its own (``population_rng``), so the table is the same for any
    number of workers. ``nulls`` False: the alternatives only (power and how often each claim's
    own alternative is refuted, ``verdict.refutation_rates``), no false rates."""
    bad = [k for k in multiples if not (0 < k < 1 or float(k).is_integer())]
    if bad:
        raise ValueError(f"summary.power_multiples: {bad[0]!r} is neither a share below 1 nor a whole number"
                         " of repeats")
    st_sim = {**st, **POWER_SETTINGS}
    out = []
    if not len(rows) or not (rows["kind"] == "geometric").any():
        return pd.DataFrame(columns=POWER_COLUMNS)
    measures = tuple(sorted({c.design.measure for c, _ in designs() if c.design.measure}))
    real_units = unit_events(rows, unit_cols)
    scatter = observed_scatter(real_units)
    sizes = family_sizes(rows, real_units, st, unit_cols)
    work, plan = [], []          # work items; per design and scenario: what its rows need
    for ki, k in enumerate(multiples):
        t = _design(rows, k, unit_cols)
        if not len(t):
            continue
        on = {**{m: _grid_matrix(t, grids, m) for m in measures}, CHECKPOINTS: _grid_matrix(t, grids, CHECKPOINTS)}
        n_pop = n_populations if k == 1 else (n_populations_multiples or max(1, n_populations // 4))
        n_cells = int(t.groupby(list(unit_cols)).ngroups)
        n_class = {c: int(t[t["difficulty"] == c].groupby(list(unit_cols)).ngroups) for c in ("hard", "easy")}
        wanted = {sc for c, _ in designs() for sc in (c.design.nulls if k == 1 and nulls else ())
                  + c.design.alternative}
        n_min = int(st["verdict_min_units"])
        if n_cells < n_min:
            # every row of this design has fewer than n_min units, so every word is inconclusive:
            # the rates are known without simulating (a two-run summary spent 42 minutes on them)
            progress(f"[summarize power] {design_name(k)}: {n_cells} cells < summary.verdict_min_units {n_min}:"
                     " not simulated (every row inconclusive by rule)")
            out += [{"claim": c.name, "event": ev, "scenario": sc, "role": ROLE_ALT if sc in c.design.alternative
                     else ROLE_NULL, "design": design_name(k), "n_cells": n_cells,
                     "n_units": n_class.get(c.design.units, n_cells), "n_populations": 0, "reproduced": 0.0,
                     "not_reproduced": 0.0, "inconclusive": 1.0}
                    for c, ev in designs()
                    for sc in (c.design.nulls if k == 1 and nulls else ()) + c.design.alternative]
            continue
        job = _DesignJob(t, on, measures, scatter, st_sim, sizes, tuple(unit_cols), int(seed), ki)
        for sc in (s for s in SCENARIOS if s in wanted):
            chunks = [range(a, min(a + CHUNK, n_pop)) for a in range(0, n_pop, CHUNK)]
            plan.append((k, sc, n_pop, n_cells, n_class, len(work), len(chunks)))
            work += [(job, sc, c) for c in chunks]
    t0 = time.perf_counter()
    done = parallel_map(_simulate_chunk, work, workers)
    for j, (k, sc, n_pop, n_cells, n_class, first, n_chunks) in enumerate(plan, 1):
        words = pd.concat(done[first:first + n_chunks], ignore_index=True)
        for c, event in designs():
            claim, alts = c.name, c.design.alternative
            if not ((sc in c.design.nulls and k == 1 and nulls) or sc in alts):
                continue
            sel = words[(words["claim"] == claim) & (words["event"] == event)]
            if c.design.row_measure:
                sel = sel[sel["measure"] == c.design.row_measure]
            ws = sel.groupby("population")["verdict"].first().reindex(range(n_pop)).fillna("inconclusive")
            out.append({"claim": claim, "event": event, "scenario": sc,
                        "role": ROLE_ALT if sc in alts else ROLE_NULL,
                        "design": design_name(k), "n_cells": n_cells,
                        "n_units": n_class.get(c.design.units, n_cells), "n_populations": n_pop,
                        "reproduced": float((ws == "reproduced").mean()),
                        "not_reproduced": float((ws == "not reproduced").mean()),
                        "inconclusive": float((ws == "inconclusive").mean())})
    if plan:
        progress(f"[summarize power] {len(plan)} designs x scenarios, {sum(len(w[2]) for w in work)} populations in"
                 f" {len(work)} chunks on {max(1, min(int(workers), len(work)))} workers:"
                 f" {time.perf_counter() - t0:.1f} s")
    binomial_rng = np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=(0,)))
    out += _binomial_power(rows, st, n_populations, binomial_rng, unit_cols, multiples)
    out += [{"claim": c, "event": "", "scenario": "not simulated", "role": "", "design": "", "n_cells": None,
             "n_units": None,
             "n_populations": 0, "reproduced": None, "not_reproduced": None, "inconclusive": None}
            for c in (c.name for c in CLAIMS if c.design.kind == "not simulated")]
    return pd.DataFrame(out, columns=POWER_COLUMNS)


def design_name(k: float) -> str:
    """The ``design`` column: "grid", or "grid x k" (k cells per cell, or a share k of them)."""
    return "grid" if k == 1 else f"grid x {k:g}"


def _binomial_power(rows, st, n_populations, rng, unit_cols, multiples=(1,)) -> list[dict]:
    """Acquisition rate and top-down: k ~ Binomial(cells, share) through their row functions,
    on the grid's cells (nulls and alternative) and on every other design's (alternative)."""
    real = rows[(rows["control"] == "") & ~rows["diverged"].astype(bool)]
    n_grid = int(real.groupby(list(unit_cols)).ngroups)
    out = []
    alpha, n_min = float(st["alpha"]), int(st["verdict_min_units"])
    for claim in (c.name for c in CLAIMS if c.design.kind == "binomial"):
        for mult, share, role, sc in ([(1, 0.5, ROLE_NULL, "share 1/2")]
                                      + [(m, 0.8, ROLE_ALT, "share 0.8") for m in sorted(set(multiples) | {1})]):
            n = max(1, int(np.ceil(mult * n_grid))) if mult < 1 else int(mult * n_grid)
            ws = []
            for _ in range(n_populations):
                k = int(rng.binomial(n, share))
                ws.append(word(Evidence(binomial_p(k, n, "greater"), clopper_pearson(k, n, 1 - 2 * alpha)[0],
                                        k / n if n else None,
                                        n, 0.5), alpha, n_min))
            ws = pd.Series(ws)
            out.append({"claim": claim, "event": "", "scenario": sc, "role": role, "design": design_name(mult),
                        "n_cells": n, "n_units": n,
                        "n_populations": n_populations, "reproduced": float((ws == "reproduced").mean()),
                        "not_reproduced": float((ws == "not reproduced").mean()),
                        "inconclusive": float((ws == "inconclusive").mean())})
    return out


def cells_needed(table: pd.DataFrame, bound: float = 0.8) -> dict:
    """claim -> the smallest design (cells) whose power reaches ``bound``, or '> N cells'."""
    a = table[table["role"] == ROLE_ALT].copy()
    a["event"] = a["event"].fillna("")
    out = {}
    for (c, e), g in a.groupby(["claim", "event"]):
        g = g.groupby("n_cells")["reproduced"].min().reset_index()      # the weakest alternative
        hit = g[g["reproduced"] >= bound]
        out[(c, e)] = int(hit["n_cells"].iloc[0]) if len(hit) else f"> {int(g['n_cells'].max())}"
    return out
