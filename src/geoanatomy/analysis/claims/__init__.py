"""The claims of the study, one object each (``base.Claim``), one module per family.

A claim carries its rows (``rows(view)``), what it reads (the runs, one measure's units, or
the summary JSON files), how ``analysis.power`` simulates it (``design``), and the figure
family that draws it. ``CLAIMS`` is every claim in the order of verdict.csv's rows (within
what they read): the family modules in this order, each module's claims in its own order.
``analysis.verdict`` assembles the table (Holm, the rules, power, stability); nothing else
lists claims by name. A new claim: its row function and its ``Claim(...)`` in its family's
module (docs/where-things-go.md).
"""
from __future__ import annotations

from . import behaviour, floors, lags, prediction, timing, topdown
from .base import (RANKME, RUN_COLUMNS, VERDICT_COLUMNS, Claim, ClaimRow, Design, MeasureView, RunsView,
                   SummaryView, interval_level, measure_views, row_dict, runs_views, simulated_runs, views_of_units)

FAMILIES = (behaviour, timing, lags, floors, topdown, prediction)
CLAIMS: list[Claim] = [c for module in FAMILIES for c in module.CLAIMS]
BY_NAME: dict[str, Claim] = {c.name: c for c in CLAIMS}
assert len(BY_NAME) == len(CLAIMS), "claim names are unique"

__all__ = ["BY_NAME", "CLAIMS", "RANKME", "RUN_COLUMNS", "VERDICT_COLUMNS", "Claim", "ClaimRow", "Design",
           "MeasureView", "RunsView", "SummaryView", "interval_level", "measure_views", "row_dict", "runs_views",
           "simulated_runs", "views_of_units", "reading"]


def reading(reads: str, kind: str | None = None) -> list[Claim]:
    """The claims that read ``reads`` ("runs", "measure", "summary"), in table order; with
    ``kind``, only those whose power design is of that kind ("simulated", "binomial")."""
    return [c for c in CLAIMS if c.reads == reads and (kind is None or c.design.kind == kind)]
