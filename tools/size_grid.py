"""How many cells a grid needs, by its own power report: the verdict's power simulation
(``analysis.power.verdict_power``) on a snapshot's committed runs, the design repeated k times
(its cells, seeds, acquisition steps, loss events and checkpoint grids copied), the
alternatives only. Prints, per claim row with any power, the share of simulated populations
that read "reproduced" at each design's number of cells, and writes the whole table.

    python tools/size_grid.py docs/known/data/known_grok --repeats 10 20 40 --populations 40
    python tools/size_grid.py docs/known/data/known_ind --out ind_power.csv --workers 2

A caveat the printout repeats: a repeated design copies the grid's cells, so its acquisition
steps take only the grid's few values; where the loss curve's events before acquisition fit
those values exactly (as many covariates as distinct cells, less one), no timing row has a
residual to read and its power is 0 at every size. That says the copies cannot size the row,
not that more cells of the real family would not.
"""
from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data", type=Path, help="a committed snapshot (DIR/*/precursor.json, DIR/snapshot.json)")
    ap.add_argument("--repeats", type=int, nargs="+", default=[10, 20, 40],
                    help="copies of the design (default 10 20 40)")
    ap.add_argument("--populations", type=int, default=40, help="simulated populations per design and alternative")
    ap.add_argument("--workers", type=int, default=1, help="processes (the table is the same for any number)")
    ap.add_argument("--out", type=Path, help="write the whole table here (CSV)")
    a = ap.parse_args(argv)
    if not sorted(a.data.glob("*/precursor.json")):
        ap.error(f"{a.data}: no */precursor.json: not a snapshot of runs")
    if any(k < 1 for k in a.repeats):
        ap.error(f"--repeats: {min(a.repeats)} is not a whole number of copies >= 1")
    from geoanatomy.analysis import power, rates
    from geoanatomy.analysis.load import load_precursors
    from geoanatomy.analysis.settings import summary_settings
    from geoanatomy.report.recheck import snapshot_settings
    pres = load_precursors(sorted(a.data.glob("*/precursor.json")))
    st = summary_settings({**snapshot_settings(a.data)})
    rows = rates.measure_rows(pres, st["coincide_log10_tol"])
    t0 = time.perf_counter()
    table = power.verdict_power(rows, st, n_populations=a.populations, multiples=(1, *a.repeats),
                                grids=power.event_grids(pres), workers=a.workers, nulls=False,
                                n_populations_multiples=a.populations, progress=lambda *x: None)
    secs = time.perf_counter() - t0
    if a.out:
        table.to_csv(a.out, index=False)
    h1 = table[table["role"].astype(str).str.startswith("H1")].copy()
    h1["event"] = h1["event"].fillna("")
    wide = h1.pivot_table(index=["claim", "event", "scenario"], columns="n_cells", values="reproduced")
    wide = wide[wide.max(axis=1) > 0] if len(wide) else wide
    print(f"{a.data}: power ('reproduced' share of {a.populations} simulated populations) by number of cells;"
          f" rules alpha {st['alpha']}, n_min {st['verdict_min_units']}; {secs:.0f} s on {a.workers} worker(s),"
          f" {platform.processor() or platform.machine()}")
    print(wide.to_string(float_format=lambda v: f"{v:.3f}") if len(wide) else "no claim row has any power")
    zero = sorted({c for c, e, s in h1.set_index(["claim", "event", "scenario"]).index} - {c for c, _, _ in wide.index})
    if zero:
        print("power 0 at every design (see the module doc's caveat): " + "; ".join(zero))
    return table


if __name__ == "__main__":
    main()
