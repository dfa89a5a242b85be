"""What every claim is made of: ``Claim`` (one claim of the study as one object: its rows,
what it reads, how ``analysis.power`` simulates it, the figure that draws it), ``Design`` (that
simulation), ``ClaimRow`` (one row of verdict.csv before Holm, the rule and the power) and the
views a claim's rows are computed from (``RunsView``: the runs' behavioural events;
``MeasureView``: one measure's units).

Units. Every row is about units: task x level x size cells, the seeds of a cell nested in it
(one number per cell, the median over its seeds; ``analysis.units``). Intervals resample
cells, permutations permute cells within a size, sign tests and counts are over cells;
n_units counts cells and n_runs the runs in them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Callable

import numpy as np
import pandas as pd

from ..load import clear_gap, min_gap_frac
from ..parts import FIGURE_FAMILIES
from ..settings import summary_settings
from ..stats import CELLS
from ..units import unit_events

VERDICT_COLUMNS = ["claim", "measure", "variant", "event", "protocol", "statistic", "value", "ci_lo", "ci_hi",
                   "ci_level", "second_statistic", "second_value", "second_ci_lo", "second_ci_hi", "effect_of_interest",
                   "bound", "forced_by", "n_units", "n_runs",
                   "null", "null_value", "p", "p_holm", "family", "rule", "verdict", "power", "false_rate",
                   "underpowered",
                   "stable", "stability", "headline", "detail"]
RANKME = {"rankme": "uncentred", "rankme_centred": "centred"}
READS = ("runs", "measure", "summary")      # what a claim's rows are computed from (``Claim.reads``)
FIGURES = FIGURE_FAMILIES        # figure families, in drawing order (figures/verdict_{family}.png)


@dataclass(frozen=True)
class Design:
    """How ``analysis.power`` simulates a claim on the grid's own design.

    ``kind``: "simulated" (event steps simulated per run under the scenarios ``nulls`` and
    ``alternative``, analysis.power.SCENARIOS, then the claim's own rows), "binomial" (a share
    over the grid's cells: 1/2 null, 0.8 alternative, through the claim's rows' rule) or "not
    simulated" (the claim reads other quantities than event timing: no power, said so).
    ``measure``: for a claim that reads a measure, the measure whose simulated rows it is
    scored on (its rows for other measures are not simulated); ``events``: the event kinds it has
    rows for (one power row each); ``units``: "hard" or "easy" when its rows count the acquired
    cells of one class only; ``row_measure``: score only the rows of this measure (a claim with
    rows for several behavioural measures)."""
    kind: str = "not simulated"
    nulls: tuple = ()
    alternative: tuple = ()
    measure: str | None = None
    events: tuple = ("",)
    units: str | None = None
    row_measure: str | None = None

    def __post_init__(self):
        if self.kind not in ("simulated", "binomial", "not simulated"):
            raise ValueError(f"Design.kind: {self.kind!r} is not simulated, binomial or not simulated")
        if self.kind == "simulated" and not (self.nulls and self.alternative):
            raise ValueError("Design: a simulated claim needs nulls and an alternative")


NOT_SIMULATED = Design()
BINOMIAL = Design("binomial")


@dataclass(frozen=True)
class Claim:
    """One claim of the study: its ``claim`` column, the study's statement, our test and its
    null, what it reads (``columns``: the ``RUN_COLUMNS`` of a runs-reading claim, which a
    simulated one must name: the power simulation builds exactly those; the floor claims read
    precursor.json's floors, ``RunsView.pres``, and are not simulated), and ``rows(view)``, its
    rows from one view of the data (``reads`` says which: "runs" RunsView, "measure"
    MeasureView, "summary" the summary JSON files);
    ``design``: how analysis.power simulates it; ``figure``: the figure family that draws it
    (figures/verdict_{figure}.png) and ``draws``: what its rows draw there ("value": the
    statistic and its interval; "second": the second statistic's, as the timing test's gain
    over the loss curve); ``caption``: the panel's caption (the statement when empty)."""
    name: str
    per: str                    # what one row is about
    statement: str
    test: str
    null: str
    inputs: str
    reads: str                  # "runs" | "measure" | "summary"
    rows: Callable[..., list]
    design: Design = NOT_SIMULATED
    figure: str = "prediction"
    draws: str = "value"
    caption: str = ""
    effect_of_interest: float | None = None     # the smallest effect of interest, in the rows' bound's units
    effect_reason: str = ""                     # why that size (fixed before the confirmation grid)
    columns: tuple = ()                         # the RUN_COLUMNS a runs-reading claim's rows read (module doc)

    def __post_init__(self):
        if self.reads not in READS:
            raise ValueError(f"claim {self.name!r}: reads {self.reads!r} is not one of {READS}")
        if self.reads == "runs" and self.design.kind == "simulated" and not self.columns:
            raise ValueError(f"claim {self.name!r} reads runs and is simulated: name the columns of RUN_COLUMNS its "
                             f"rows read ({list(RUN_COLUMNS)}), so the power simulation builds them")
        unknown = [c for c in self.columns if c not in RUN_COLUMNS]
        if unknown or (self.columns and self.reads != "runs"):
            raise ValueError(f"claim {self.name!r}: columns {unknown or list(self.columns)} are not run columns of "
                             f"{list(RUN_COLUMNS)} (only a runs-reading claim names them)")
        if self.figure not in FIGURES:
            raise ValueError(f"claim {self.name!r}: figure {self.figure!r} is not one of {FIGURES}")
        if self.draws not in ("value", "second"):
            raise ValueError(f"claim {self.name!r}: draws {self.draws!r} is not value or second")


@dataclass(frozen=True)
class ClaimRow:
    """One row of verdict.csv before Holm, the rule and the power (``as_dict``: its columns)."""
    claim: str
    measure: str
    variant: str
    statistic: str
    value: float | None
    ci: tuple                   # (lo, hi); (None, None): no interval
    n_units: int
    n_runs: int
    null: str
    null_value: float | None
    p: float | None             # one-sided (or TOST), before Holm
    family: str                 # Holm family
    detail: str = ""
    protocol: str = "single-task"
    rule: str = "greater"
    event: str = ""
    ci_level: float = 0.95
    second: tuple = ("", None, None, None)     # (statistic, value, lo, hi)
    headline: bool = False
    effect_of_interest: float | None = None     # the row's smallest effect of interest (else its claim's)
    bound: float | None = None                  # one-sided 1 - alpha bound facing the effect of interest (rule doc)
    forced_by: str = ""                         # a design feature that decides the row by construction: no word

    def as_dict(self) -> dict:
        """The row in VERDICT_COLUMNS order (p_holm, verdict, power are filled by ``finish``)."""
        return {"claim": self.claim, "measure": self.measure, "variant": self.variant, "event": self.event,
                "protocol": self.protocol, "statistic": self.statistic, "value": self.value,
                "ci_lo": self.ci[0], "ci_hi": self.ci[1], "ci_level": self.ci_level if self.ci[0] is not None else None,
                "second_statistic": self.second[0], "second_value": self.second[1], "second_ci_lo": self.second[2],
                "second_ci_hi": self.second[3], "effect_of_interest": self.effect_of_interest, "bound": self.bound,
                "forced_by": self.forced_by, "n_units": self.n_units,
                "n_runs": self.n_runs, "null": self.null,
                "null_value": self.null_value, "p": self.p, "p_holm": None, "family": self.family, "rule": self.rule,
                "verdict": None, "power": None, "false_rate": None, "underpowered": None, "stable": None,
                "stability": "", "headline": self.headline, "detail": self.detail}


def row_dict(*args, **kw) -> dict:
    """A row dict from ClaimRow's fields given positionally (analysis.protocols' mixture rows)."""
    return ClaimRow(*args, **kw).as_dict()


def fmt(x, nd=2) -> str:
    return "NA" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{nd}f}"


# ------------------------------------------------- what the claims read (one view each)
@dataclass(frozen=True)
class RunColumn:
    """One column of the runs view (``RunsView.runs``): what it is, where precursor.json holds
    it (``key``, a path of keys) and what the power simulation puts there (``simulated``:
    "acquired" True, "acquisition" the design's acquisition step, "event" the simulated
    precursor step on the runs' checkpoints). A runs-reading claim names the columns it reads
    (``Claim.columns``); the view and the simulated populations are built from this one table."""
    name: str
    what: str
    key: tuple
    simulated: str

    def read(self, p: dict):
        v = p
        for k in self.key:
            v = (v or {}).get(k)
        return bool(v) if self.simulated == "acquired" else v


RUN_COLUMNS = {c.name: c for c in (
    RunColumn("acquired", "the run acquired", ("acquired",), "acquired"),
    RunColumn("t_acq", "acquisition step (whole answer)", ("acquisition_step",), "acquisition"),
    RunColumn("t_lp", "log-prob half-rise step", ("logprob_half_step",), "event"),
    RunColumn("t_first", "first-token acquisition step", ("first_token_acquisition_step",), "acquisition"),
    RunColumn("t_probe", "final-layer probe acquisition step", ("probes", "acquisition_step"), "event"),
)}


def simulated_runs(units: pd.DataFrame, t_acq, event, unit_cols=CELLS) -> pd.DataFrame:
    """The runs view's table of one simulated population: the design's unit columns, then every
    run column as ``RUN_COLUMNS`` says (``t_acq`` the design's acquisition steps, ``event`` the
    simulated precursor steps)."""
    t_acq = np.asarray(t_acq, dtype=float)
    what = {"acquired": np.isfinite(t_acq), "acquisition": t_acq, "event": np.asarray(event, dtype=float)}
    return units[list(unit_cols)].assign(**{c.name: what[c.simulated] for c in RUN_COLUMNS.values()})


def interval_level(st: dict) -> float:
    """The two-sided level of every row's interval: 1 - 2 alpha (0.90 at the default alpha
    0.05), so that its lower end is the one-sided 1 - alpha bound. The rule reads
    "reproduced" from a one-sided p < alpha and the interval's end beyond the null: with a
    two-sided 1 - alpha interval that end was a 1 - alpha/2 bound, an effective level of
    alpha/2 (a top-down row with p 0.038 read inconclusive by that alone). One level for both."""
    return 1.0 - 2.0 * float(st["alpha"])


def bound_pct(level: float) -> str:
    """The one-sided level of each end of a two-sided ``level`` interval, as a row's detail
    writes it: "95%" at the default 0.90."""
    return f"{100 * (1 + level) / 2:.3g}%"


class SummaryView(dict):
    """The summary JSON files a summary-reading claim's rows read ({file name: content}), and
    ``st``, the ``summary:`` settings (the interval level, ``interval_level``)."""

    def __init__(self, jsons: dict, st: dict):
        super().__init__(jsons)
        self.st = st


def summary_level(jsons) -> float:
    """``interval_level`` of a summary view (the default settings' for a plain dict)."""
    return interval_level(getattr(jsons, "st", None) or summary_settings())


def _settings(st: dict) -> tuple[int, int, int]:
    """(bootstrap resamples, permutations, seed) of the ``summary:`` settings, one home for
    their defaults in the views."""
    return int(st["n_bootstrap"]), int(st["n_permutations"]), int(st["seed"])


@dataclass(frozen=True)
class RunsView:
    """The study runs' behavioural events (one row per run) and their units, for the behaviour
    and floor claims; ``frac`` the runs' clear gap f (``events.precursor_min_gap_frac``, one for
    all the runs a summary pools: ``load.clear_gap``)."""
    runs: pd.DataFrame
    pres: list
    st: dict
    frac: float | None
    unit_cols: tuple = CELLS

    nb = property(lambda self: _settings(self.st)[0])
    seed = property(lambda self: _settings(self.st)[2])
    level = property(lambda self: interval_level(self.st))


def runs_views(pres: list[dict], st: dict, unit_cols=CELLS) -> list[RunsView]:
    """One view of the non-control, non-diverged runs; none when there is no such run."""
    study = [p for p in pres if not p.get("control") and not p.get("diverged")]
    runs = pd.DataFrame([{"task": p["task"], "level": p["level"], "size": p["size"],
                          **{c.name: c.read(p) for c in RUN_COLUMNS.values()},
                          **{c: p.get(c) for c in unit_cols if c not in ("task", "level", "size")}}
                         for p in study])
    frac = clear_gap(min_gap_frac(p) for p in study)
    return [RunsView(runs, study, st, frac, tuple(unit_cols))] if len(runs) else []


@dataclass(frozen=True)
class MeasureView:
    """One measure's units (``analysis.units``) and the settings its claims use; ``frac`` the
    runs' clear gap f of the precursor rule (one for the summary: ``load.clear_gap``)."""
    measure: str
    variant: str
    units: pd.DataFrame         # one row per unit of this measure (all classes)
    st: dict
    frac: float | None
    protocol: str = "single-task"
    strata: str = "size"        # permutations permute units within its values
    runs: pd.DataFrame | None = None    # this measure's per-run rows (the within-unit claims)

    @cached_property
    def acq(self) -> pd.DataFrame:
        return self.units[self.units["acquired"]].reset_index(drop=True)

    nb = property(lambda self: _settings(self.st)[0])
    n_perm = property(lambda self: _settings(self.st)[1])
    seed = property(lambda self: _settings(self.st)[2])
    level = property(lambda self: interval_level(self.st))
    bound_pct = property(lambda self: bound_pct(self.level))

    @property
    def unit_word(self) -> str:
        """What a unit is in this protocol's rows: cells (single-task) or models (mixture)."""
        return "cells" if self.protocol == "single-task" else "models"

    @property
    def delta(self) -> float:
        return float(self.st["equivalence_decades"])

    @property
    def headline(self) -> bool:
        return self.variant == str(self.st["headline_variant"]) and self.measure.startswith("rankme")

    def mean_direction(self, units: pd.DataFrame) -> str:
        """'mean-direction (...)' for an uncentred RankMe row whose curve follows the mean share."""
        if self.variant != "uncentred" or "mean_share_rho" not in units:
            return ""
        rho = pd.to_numeric(units["mean_share_rho"], errors="coerce").dropna()
        bound = float(self.st["mean_direction_rho"])
        if len(rho) and float(rho.median()) >= bound:
            return (f"mean-direction: median rank correlation with 1 - mean share {rho.median():.2f} >= {bound}"
                    f" over {len(rho)} units; ")
        return ""


def measure_views(rows: pd.DataFrame, st: dict, protocol: str = "single-task", unit_cols=CELLS,
                  strata: str = "size") -> list[MeasureView]:
    """One view per geometric measure with an acquired unit, in table order."""
    return views_of_units(unit_events(rows, unit_cols), st, clear_gap(rows["min_gap_frac"]), protocol, strata, rows)


def views_of_units(units: pd.DataFrame, st: dict, frac: float | None, protocol: str = "single-task",
                   strata: str = "size", rows: pd.DataFrame | None = None) -> list[MeasureView]:
    """``measure_views`` from a unit table (``analysis.units.unit_events``); ``frac``: the runs'
    clear gap; ``rows``: the per-run table the units come from (each view gets its measure's runs)."""
    if not len(units):
        return []
    out = []
    for measure, u in units[units["kind"] == "geometric"].groupby("measure", sort=False):
        u = u.reset_index(drop=True)
        if u["acquired"].any():
            r = None if rows is None else rows[rows["measure"] == measure].reset_index(drop=True)
            out.append(MeasureView(measure, str(u["variant"].iloc[0] or ""), u, st, frac, protocol, strata, r))
    return out


def n_runs(u: pd.DataFrame) -> int:
    return int(u["runs"].sum()) if len(u) else 0


def one_sided(rho, p_two):
    """One-sided p for rho > 0 from a two-sided permutation p; prefers an exact one-sided p
    when the statistic carries one (``p_greater``): halving is exact only without ties."""
    if rho is None or p_two is None:
        return None
    return p_two / 2 if rho > 0 else 1 - p_two / 2


def p_greater(e: dict):
    return e.get("p_greater") if e.get("p_greater") is not None else one_sided(e.get("rho"), e.get("p"))


# scenario groups of analysis.power.SCENARIOS that several claims' designs share
TIMING_NULLS = ("exchangeable", "clock", "loss-tied", "seed-clustered", "loss-copy", "class-clock")
PRECURSOR = ("proportional", "proportional-noisy")
LAG_NULLS = ("proportional", "lag")
SIMULTANEOUS = ("simultaneous", "simultaneous-noisy")     # power: the smaller of the two
UNITS_TEXT = "precursor.json of every run: events of each measure and of the loss curve, per cell (analysis.units)"


def k_of_n(s) -> tuple[int, int]:
    """(k, n) of a "k/n" count of a summary JSON file; (0, 0) when it is absent."""
    if not s:
        return 0, 0
    k, n = str(s).split("/")
    return int(k), int(n)
