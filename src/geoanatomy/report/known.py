"""``geoanatomy report known GRID...``: the known-transition tables and figure
(``analysis.known``) of finished grids or their snapshots, into one folder:

* ``known_claims.csv``   one row per published claim on the grid of its regime
* ``known_runs.csv``     one row per run: its behavioural events (training fit, acquisition, delay,
                         induction head)
* ``known_transitions.png``  one grokking run and one induction run, every signal's events
                         against the behavioural events (the hardest level, seed 0, of each)

and the claims as a Markdown table (what docs/known-transitions.md shows)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..analysis.known import behaviour_table, claim_rows, plot_runs, read_grid
from ..analysis.tables import write_csv

CLAIM_COLUMNS = ["claim", "family", "arm", "signal", "event", "compared_with", "paper_says", "n_runs", "n_with_event",
                 "share_before", "n_resolved_delay", "share_in_delay", "lead_median", "lead_min", "lead_max",
                 "n_negatives", "false_alarms", "benchmark_word", "gain_r", "gain_p_holm", "n_cells", "auroc",
                 "statement", "source"]


def figure_run(grid: dict) -> str | None:
    """The run a family's panel shows: its hardest level's seed-0 run that acquired, else any."""
    pres = [p for p in grid["pres"] if not p.get("control") and p["run"] in grid["curves"]]
    acquired = [p for p in pres if p.get("acquisition_step") is not None] or pres
    if not acquired:
        return None
    return max(acquired, key=lambda p: (p["level"], -int(p.get("seed") or 0)))["run"]


def _fmt(v, digits: int = 2) -> str:
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return "-"
    return f"{v:.{digits}f}" if isinstance(v, float) else str(v)


def markdown(claims: pd.DataFrame) -> str:
    """The claims as the docs page's table."""
    head = ("| claim | grid | signal, event | before | runs with event | before | inside the delay (runs) | "
            "median lead [range] | false alarms | benchmark (cells) |\n|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for _, r in claims.iterrows():
        grid = r["family"] + (f" ({r['arm']})" if r["arm"] else "")
        rows.append(f"| {r['statement']} | {grid} | {r['signal']} {r['event']} | {r['compared_with']} | "
                    f"{r['n_with_event']}/{r['n_runs']} | {_fmt(r['share_before'])} | {_fmt(r['share_in_delay'])} "
                    f"({r['n_resolved_delay']}) | "
                    f"{_fmt(r['lead_median'])} [{_fmt(r['lead_min'])}, {_fmt(r['lead_max'])}] | "
                    f"{r['false_alarms']}/{r['n_negatives']} | {r['benchmark_word']} ({r['n_cells']}) |")
    return "\n".join([head, *rows])


def _params(text: str) -> str:
    """``train_frac 0.7`` from the table's ``{'train_frac': 0.7}``."""
    import ast
    try:
        d = ast.literal_eval(str(text))
    except (ValueError, SyntaxError):
        return str(text)
    return ", ".join(f"{k} {v}" for k, v in d.items()) if isinstance(d, dict) else str(text)


def runs_markdown(runs: pd.DataFrame) -> str:
    """The runs' behavioural events as the docs page's table (one row per family, arm and level:
    its runs' steps, seed by seed)."""
    head = ("| grid | level | level parameters | runs | training set fitted | held-out acquisition | delay | "
            "induction head | final accuracy |\n|---|---|---|---|---|---|---|---|---|")
    rows = []
    runs = runs.copy()
    runs["control"] = runs["control"].fillna("").astype(str)
    for (fam, arm, lv, ctrl), g in runs.groupby(["family", "arm", "level", "control"], sort=False, dropna=False):
        arm = "" if not isinstance(arm, str) else arm
        col = lambda c: ", ".join(_fmt(v if not (isinstance(v, float) and v.is_integer()) else int(v), 3)  # noqa: E731
                                  if v is not None and v == v else "never" for v in g[c])
        rows.append(f"| {fam}{' (' + arm + ')' if arm else ''}{' shuffled' if ctrl else ''} | {lv} | "
                    f"{_params(g['level_params'].iloc[0])} | {', '.join(g['run'])} | {col('train_acquisition_step')} | "
                    f"{col('acquisition_step')} | {col('generalisation_delay')} | "
                    f"{col('induction_head_step') if fam == 'ind' else '-'} | {col('final_accuracy')} |")
    return "\n".join([head, *rows])


def known_report(folders: list[str | Path], out: str | Path) -> str:
    """Write the tables and the figure of the grid folders into ``out``; the Markdown table."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    grids = [read_grid(f) for f in folders]
    claims = claim_rows(grids)
    claims = claims[[c for c in CLAIM_COLUMNS if c in claims.columns]]
    src = ", ".join(str(g["folder"]) for g in grids)
    write_csv(claims, out / "known_claims.csv", "geoanatomy known_claims.csv: published precursor claims on the "
              "grids of their regimes", [f"grids: {src}", "lead: (t_before - t_event) / t_before over the "
                                         "acquiring runs; share_in_delay: after the training set is fitted, "
                                         "before acquisition", "benchmark_word: precursor_benchmark.csv's gain "
                                         "reading for the signal on that grid (frozen rule)"])
    beh = behaviour_table(grids)
    beh["level_params"] = beh["level_params"].astype(str)
    write_csv(beh, out / "known_runs.csv", "geoanatomy known_runs.csv: behavioural events per run",
              [f"grids: {src}", "train_acquisition_step: chance-normalised exact match on a fixed training "
                                "sample >= 0.5; acquisition_step: the same on held-out inputs; "
                                "induction_head_step: a head's prefix-matching score >= 0.5 at the final ="])
    panels = [(g, figure_run(g)) for g in grids if g["arm"] != "nowd"]
    panels = [(g, r) for g, r in panels if r is not None]
    if panels:
        plot_runs(panels, out / "known_transitions.png")
    return markdown(claims)
