"""Print the per-run table of docs/validation.md from a finished grid's precursor.json files.

    python benchmarks/grid_table.py [results]

One row per run: difficulty class, acquisition step, first-token acquisition, log-prob
emergence, loss-plateau exit, uncentred RankMe (ln_final, first position) init -> floor @ step
with the mean share at the floor, recovery, precursor (gap), centred RankMe floor @ step
(precursor), final held-out accuracy; then the share of non-control runs that acquired.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def _s(v) -> str:
    return "never" if v is None else str(v)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    root = Path(argv[0] if argv else "results")
    rows = [json.loads(p.read_text()) for p in sorted(root.glob("*/precursor.json"))]
    print("| run | class | acq | first tok | log-prob em. | plateau exit | RankMe unc. init -> floor @ step "
          "(mean share at floor) | recovery | precursor (gap) | centred floor @ step (precursor) | final acc |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for d in rows:
        u, c = d["measures"]["rankme"], d["measures"]["rankme_centred"]
        cls = d["difficulty"] + (" (control)" if d.get("control") else "")
        share = (u.get("mean_share") or {}).get("floor")
        print(f"| {d['run']} | {cls} | {_s(d['acquisition_step'])} | {_s(d['first_token_acquisition_step'])} | "
              f"{_s(d['logprob_emergence_step'])} | {_s(d['loss_plateau_exit_step'])} | "
              f"{u['init']:.2f} -> {u['floor']:.2f} @ {u['floor_step']} ({share:.2f}) | {_s(u['recovery_step'])} | "
              f"{'yes' if u['precursor'] else 'no'} ({_s(u['gap_steps'])}) | {c['floor']:.2f} @ {c['floor_step']} "
              f"({'yes' if c['precursor'] else 'no'}) | {d['final_accuracy']:.2f} |")
    real = [d for d in rows if not d.get("control")]
    n_acq = sum(bool(d["acquired"]) for d in real)
    print(f"\n{n_acq} of {len(real)} runs (not counting controls) acquired "
          f"({100 * n_acq / max(len(real), 1):.0f}%); controls acquired: "
          f"{sum(bool(d['acquired']) for d in rows if d.get('control'))} of {len(rows) - len(real)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
