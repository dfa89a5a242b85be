"""The per-run tables of docs/validation.md from a finished grid's precursor.json files.

    geoanatomy report grid [results]

Events table, one row per run: difficulty class (and its source: ``file`` = the calibration
class file, ``post-hoc`` = the run's own acquisition step), acquisition step, first-token
acquisition, log-prob half-rise (the depth acquisition is read at), the loss curve's matched
onset (= the loss-plateau exit; the end of the floor window) and extreme, uncentred RankMe
(ln_final, first position) init -> floor @ step (the extreme at or before the loss onset) with
the mean share at the floor ("edge": the floor is the window's last checkpoint, the curve still
moving), the run-wide floor's step, recovery, precursor (gap), centred
RankMe floor @ step (precursor), final held-out accuracy; then the share of non-control runs
that acquired.

Expensive-measures table, one row per run measured: the number of checkpoints (the fixed
schedule), and each measure's headline events (onset, extreme, return) with its precursor flag.
"""
from __future__ import annotations

from pathlib import Path

from ..measures import TABLE_MEASURES


def _s(v) -> str:
    return "never" if v is None else str(v)


def _edge(entry: dict) -> str:
    """' (edge)' for a floor on the last checkpoint of its window (events.at_window_end)."""
    return " (edge)" if entry.get("at_window_end") else ""


def _events_table(rows: list[dict], out: list) -> None:
    out.append("| run | class (source) | acq | first tok | log-prob half | loss onset (window end) | loss extreme | "
          "RankMe unc. init -> floor @ step (mean share) | run-wide floor step | recovery | precursor (gap) | "
          "centred floor @ step (precursor) | final acc |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for d in rows:
        u, c = d["measures"]["rankme"], d["measures"]["rankme_centred"]
        src = "file" if (d.get("difficulty_source") or {}).get("fixed_before_outcome") else "post-hoc"
        cls = d["difficulty"] + (" (control)" if d.get("control") else "") + f" ({src})"
        share = (u.get("mean_share") or {}).get("floor")
        le = d.get("loss_events") or {}
        out.append(f"| {d['run']} | {cls} | {_s(d['acquisition_step'])} | {_s(d['first_token_acquisition_step'])} | "
              f"{_s(d.get('logprob_half_step'))} | {_s(le.get('onset_step'))} | {_s(le.get('extreme_step'))} | "
              f"{u['init']:.2f} -> {u['floor']:.2f} @ {_s(u['floor_step'])}{_edge(u)} "
              f"({'-' if share is None else f'{share:.2f}'}) | {_s(u.get('global_floor_step'))} | "
              f"{_s(u['recovery_step'])} | {'yes' if u['precursor'] else 'no'} ({_s(u['gap_steps'])}) | "
              f"{c['floor']:.2f} @ {_s(c['floor_step'])}{_edge(c)} ({'yes' if c['precursor'] else 'no'}) | "
              f"{d['final_accuracy']:.2f} |")
    real = [d for d in rows if not d.get("control")]
    n_acq = sum(bool(d["acquired"]) for d in real)
    out.append(f"\n{n_acq} of {len(real)} runs (not counting controls) acquired "
          f"({100 * n_acq / max(len(real), 1):.0f}%); controls acquired: "
          f"{sum(bool(d['acquired']) for d in rows if d.get('control'))} of {len(rows) - len(real)}")


def _measures_table(rows: list[dict], out: list) -> None:
    # the registry's measures that some run of the grid measured (a grid made before a measure
    # was added has no column for it)
    names = tuple(n for n in TABLE_MEASURES if any(n in d["measures"] for d in rows))
    out.append("\n| run | checkpoints measured | " + " | ".join(f"{n}: onset / extreme / return (precursor)" for n in
                                                                names)
          + " |")
    out.append("|---|---|" + "---|" * len(names))
    for d in rows:
        ms = d["measures"]
        if not any(n in ms for n in names):
            continue
        n_pts = next((ms[n]["n_points"] for n in names if n in ms), None)
        cells = []
        for n in names:
            m = ms.get(n)
            if m is None:
                cells.append("-")
                continue
            if m["direction"] == "rise":
                on, ex, ret = m.get("rise_step"), m.get("peak_step"), m.get("settle_step")
            else:
                on, ex, ret = m.get("collapse_step"), m.get("floor_step"), m.get("recovery_step")
            cells.append(f"{_s(on)} / {_s(ex)} / {_s(ret)} ({'yes' if m.get('precursor') else 'no'})")
        out.append(f"| {d['run']} | {n_pts} | " + " | ".join(cells) + " |")


def grid_tables(root) -> str:
    """The events table and the expensive-measures table (module doc) of ``root``/*/precursor.json."""
    from ..analysis.load import load_precursor         # the notebook API's checked reader: seal, fields
    paths = sorted(Path(root).glob("*/precursor.json"))
    if not paths:
        raise ValueError(f"{root}: no RUN/precursor.json (is it a results folder or a snapshot?)")
    rows = [load_precursor(p) for p in paths]
    out: list[str] = []
    _events_table(rows, out)
    _measures_table(rows, out)
    return "\n".join(out)
