"""The precursor benchmark: every candidate signal (``measures.signal_registry``) scored as a
detector of acquisition on one grid, beside the loss curve, the log-probability, a probe and a
clock, under four detector settings (docs/benchmark.md).

Per signal and event kind (onset, extreme of the matched detector; direction fixed in the
registry), cells (task x level x size; a control is its own cell) as the units:

lead          (t_acq - t_event) / t_acq per acquiring run, a cell's mean over its runs; the
              median over cells with a cell-bootstrap interval (events after acquisition count,
              negative).
false alarms  share of the negative runs (shuffled-answer controls and runs that never acquire)
              in which the detector finds the event anywhere in the run; Clopper-Pearson interval
              over those runs (n said).
alarm curve   a causal alarm: at checkpoint t the signal's sustained relative change from its first
              value in its direction, r(t) = min over the last ``persist`` checkpoints of
              sign * (v - v0) / scale (scale: the mean |v| of the first three finite points), and
              its running maximum s(t). A positive run is scored at its acquisition step
              (s just before t_acq); a negative one at the same steps (every positive's t_acq of
              its size): the AUROC is P(s_pos(t_acq) > s_neg(t_acq)) over those pairs (ties
              half), so a clock scores 0.5 by construction; cell-bootstrap interval. Scored at
              t_acq it measures detection, not warning: the same AUROC with each positive scored
              at fixed leads before acquisition, at (1 - L) t_acq for L in ``LEADS`` (a quarter:
              the precursor rule's default clear gap; a half: the power simulation's precursor),
              the negatives at the same steps, says whether the signal has moved by then. The
              threshold keeping that time-matched false-alarm rate at ``FA_TARGET`` gives the
              detection rate (positives alarmed before acquisition) and the median lead of the
              alarm (cells, runs alarmed before acquisition).
gain          the timing test of the verdict (``analysis.stats.timing.partial_rank``): partial rank
              correlation of log t_acq with log(t_event + 1) given the loss curve's events that
              precede acquisition in most cells (``preceding_loss_events``; of onset, half,
              extreme, by the same detector setting), the class and the calibration
              step, permutations within size; one-sided p, Holm over the signals per setting.
robust        the gain's reading (p_holm < alpha and r > 0: "beyond the loss curve") is the same
              under all four settings (``SETTINGS``); agreement: Spearman rank correlation over
              runs of the event steps of each other setting with the default's.

The clock: an event at the median acquisition step of the other acquiring cells of the run's
size (the verdict's clock), and the alarm statistic t / budget.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pandas as pd

from .. import detectors as ev
from ..measures.signal_registry import CLOCK, SIGNALS
from ..precursor.rules import precursor_verdict
from .load import calibration_step, is_control, seed_of
from .stats import CELLS, holm
from .stats.timing import partial_rank, preceding_loss_events

EVENT_KINDS = ("onset", "extreme")
FA_TARGET = 0.1
LEADS = (0.25, 0.5)          # the AUROC at these shares of t_acq before acquisition (module doc)
# the default detector, two further thresholds of it, and a change-point family (ruptures' PELT)
SETTINGS = {
    "matched": {},
    "matched_loose": {"onset_frac": 0.05, "collapse_drop": 0.2, "extreme_tol": 0.10},
    "matched_strict": {"onset_frac": 0.2, "collapse_drop": 0.4, "extreme_tol": 0.02},
    "pelt": {"detector": "pelt"},
}
COLUMNS = ["signal", "event", "kind", "direction", "needs", "source", "cpu_ms_per_checkpoint", "n_cells", "n_runs",
           "n_cells_event", "lead", "lead_lo", "lead_hi", "n_negatives", "false_alarms", "false_alarm_rate", "fa_lo",
           "fa_hi", "auroc", "auroc_lo", "auroc_hi",
           *(f"auroc_lead{round(100 * x)}{e}" for x in LEADS for e in ("", "_lo", "_hi")), "threshold_at_fa",
           "fa_achieved", "detect_at_fa", "lead_at_fa",
           "gain_r", "gain_lo", "gain_hi", "gain_p_holm", "gain_n_cells", "reading", "agreement_min", "agreement",
           "robust", "readings"]
NAMES = {"down": {"onset": "collapse_step", "extreme": "floor_step"},
         "up": {"onset": "rise_step", "extreme": "peak_step"}}


# ------------------------------------------------------------------ inputs
def read_curves(paths) -> dict:
    """{run folder name: (curves DataFrame, costs dict or None)} of signal_curves.csv files,
    each read through its manifest (a hand-edited curve is refused, naming the file)."""
    from .tables import read_table
    out = {}
    for p in paths:
        p = Path(p)
        if not p.is_file():
            continue
        costs = None
        cj = p.with_name("signal_costs.json")
        if cj.is_file():
            costs = json.loads(cj.read_text()).get("cpu_seconds_per_checkpoint")
        out[p.parent.name] = (read_table(p), costs)
    return out


def run_table(pres: list[dict]) -> pd.DataFrame:
    """One row per run: cell keys, control, acquired, t_acq, budget, class, calibration step,
    the input-blind loss (the loss curve's start) and whether it is a negative."""
    rows = []
    for p in pres:
        ctrl = is_control(p)
        rows.append({"run": p["run"], "task": p["task"], "level": p["level"],
                     "size": p["size"] + ("_shuffled" if ctrl else ""), "family_size": p["size"],
                     "seed": seed_of(p), "control": ctrl, "diverged": bool(p.get("diverged")),
                     "acquired": bool(p["acquired"]) and not ctrl,
                     "t_acq": float(p["acquisition_step"]) if p.get("acquisition_step") is not None else np.nan,
                     "budget": float(p.get("steps") or np.nan), "difficulty": p.get("difficulty"),
                     "difficulty_fixed": bool((p.get("difficulty_source") or {}).get("fixed_before_outcome"))
                     if isinstance(p.get("difficulty_source"), dict) else False,
                     "calibration_step": calibration_step(p),
                     "blind_loss": _blind_loss(p)})
    df = pd.DataFrame(rows)
    if len(df):
        df["negative"] = (df["control"] | ~df["acquired"]) & ~df["diverged"]
        df["positive"] = df["acquired"] & ~df["diverged"]
    return df


def _blind_loss(p: dict) -> float:
    """The input-blind loss of a run (the loss curve's start); NaN when the record lacks it."""
    b = (p.get("baselines") or {}).get("train_logprob_per_token")
    return -float(b) if b is not None else float("nan")


def _events_cfg(pres: list[dict], setting: str) -> dict:
    e = dict(pres[0]["events_settings"]) if pres else {}
    e.update(SETTINGS[setting])
    return e


# ------------------------------------------------------------------ events
def signal_events(curves: pd.DataFrame, name: str, direction: str, e: dict, start=None, before=None) -> dict:
    """{onset, extreme, changed} of one curve of a run under events settings ``e``."""
    s, v = curves["step"].to_numpy(np.int64), curves[name].to_numpy(float)
    ok = np.isfinite(v)
    if ok.sum() < 3:
        return {"onset": np.nan, "extreme": np.nan, "changed": False, "present": False}
    ent = ev.curve_entry(s[ok], v[ok], direction, e, start=start, before=before)
    flag = ent.get("collapsed" if direction == "down" else "risen")
    k = NAMES[direction]
    f = lambda x: float(x) if (x is not None and flag) else np.nan   # noqa: E731
    return {"onset": f(ent.get(k["onset"])), "extreme": f(ent.get(k["extreme"])), "changed": bool(flag),
            "present": True}


def loss_events(curves: pd.DataFrame, blind_loss: float, e: dict) -> dict:
    """The loss curve's onset, half and extreme steps (from the input-blind loss) under ``e``."""
    s, v = curves["step"].to_numpy(np.int64), curves["loss"].to_numpy(float)
    persist = e["persist"]
    if e.get("detector") == "pelt":
        s, v = ev.pelt_fit(s, v)
        persist = 1
    m = ev.matched_events(s, v, "down", start=blind_loss, onset_frac=e["onset_frac"], extreme_tol=e["extreme_tol"],
                          return_frac=e["return_frac"], min_change=e["collapse_drop"], persist=persist)
    return {k: m[f"{k}_step"] for k in ("onset", "half", "extreme")}


def clock_steps(runs: pd.DataFrame) -> pd.Series:
    """The clock's event per run: the median acquisition step of the other acquiring cells of
    its (family) size (a cell: the median over its seeds)."""
    acq = runs[runs["positive"]]
    cells = acq.groupby(list(CELLS))["t_acq"].median().reset_index()
    out = {}
    for _, r in runs.iterrows():
        c = cells[(cells["size"] == r["family_size"])
                  & ~((cells["task"] == r["task"]) & (cells["level"] == r["level"]))]
        out[r["run"]] = float(c["t_acq"].median()) if len(c) else np.nan
    return pd.Series(out)


def event_table(runs: pd.DataFrame, curves: dict, pres: list[dict], setting: str) -> pd.DataFrame:
    """Long table: run, signal, onset, extreme, changed, present, and the run's loss events
    (loss_onset, loss_half, loss_extreme), every signal re-detected under ``setting``."""
    e = _events_cfg(pres, setting)
    clock = clock_steps(runs)
    rows = []
    for _, r in runs.iterrows():
        if r["run"] not in curves:
            continue
        c = curves[r["run"]][0]
        blind = r["blind_loss"] if np.isfinite(r["blind_loss"]) else None
        le = loss_events(c, blind, e) if "loss" in c else {"onset": None, "half": None, "extreme": None}
        window = le["onset"] if e["floor_window"] == "loss_onset" else None
        base = {"run": r["run"], **{f"loss_{k}": (np.nan if v is None else float(v)) for k, v in le.items()}}
        for s in SIGNALS:
            if s.name not in c:
                continue
            start = r["blind_loss"] if (s.name == "loss" and np.isfinite(r["blind_loss"])) else None
            before = window if (s.direction == "down" and s.name != "loss") else None
            rows.append({**base, "signal": s.name, **signal_events(c, s.name, s.direction, e, start, before)})
        t = clock[r["run"]]
        rows.append({**base, "signal": CLOCK, "onset": t, "extreme": t, "changed": bool(np.isfinite(t)),
                     "present": True})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ alarms
def alarm_path(steps, values, direction: str, persist: int) -> tuple[np.ndarray, np.ndarray]:
    """(steps, s): the running maximum of the sustained relative change (module doc)."""
    s, v = np.asarray(steps, dtype=float), np.asarray(values, dtype=float)
    ok = np.isfinite(v)
    s, v = s[ok], v[ok]
    if len(v) < persist + 1:
        return s, np.full(len(v), np.nan)
    scale = float(np.mean(np.abs(v[:3]))) + 1e-12
    r = (v - v[0]) / scale * (1.0 if direction == "up" else -1.0)
    sus = np.full(len(r), -np.inf)
    for i in range(persist - 1, len(r)):
        sus[i] = r[i - persist + 1:i + 1].min()
    return s, np.maximum.accumulate(sus)


def score_at(path: tuple[np.ndarray, np.ndarray], t: float) -> float:
    """s just before step t (the last checkpoint < t); -inf before any, NaN without a path."""
    s, a = path
    if not len(s) or not np.isfinite(a).any():
        return np.nan
    i = int(np.searchsorted(s, t, side="left")) - 1
    return float(a[i]) if i >= 0 else -np.inf


def alarm_step(path, theta: float) -> float:
    """First checkpoint whose s reaches theta (NaN: never)."""
    s, a = path
    hit = np.nonzero(a >= theta)[0]
    return float(s[hit[0]]) if len(hit) else np.nan


def alarm_scores(runs: pd.DataFrame, curves: dict, name: str, direction: str, persist: int) -> dict:
    """{run: alarm path} of every run where the signal was measured (``alarm_path``; the clock's:
    step / budget)."""
    paths = {}
    for _, r in runs.iterrows():
        if r["run"] not in curves:
            continue
        c = curves[r["run"]][0]
        if name == CLOCK:
            st = c["step"].to_numpy(float)
            paths[r["run"]] = (st, st / r["budget"])
        elif name in c:
            path = alarm_path(c["step"], c[name], direction, persist)
            if len(path[0]) and np.isfinite(path[1]).any():    # runs where the signal was not measured: left out
                paths[r["run"]] = path
    return paths


def _cells(runs: pd.DataFrame) -> pd.Series:
    """The cell key (task/level/size) of each row; an empty Series for no rows."""
    if not len(runs):
        return pd.Series([], index=runs.index, dtype=object)
    return runs[list(CELLS)].astype(str).agg("/".join, axis=1)


def _matched_auroc(pos, neg, paths, t_score, wp, wn):
    """(AUROC, lo, hi, S, valid): positives scored just before their step ``t_score``, each
    negative of the same size family at the same steps (pair matrix S, ``valid`` its scored
    pairs; ties half); the 95% interval from the cell-bootstrap weights ``wp``, ``wn``."""
    sp = np.array([score_at(paths[r], t) for r, t in zip(pos["run"], t_score)])
    S = np.full((len(pos), len(neg)), np.nan)
    for j, rn in enumerate(neg["run"]):
        same = (pos["family_size"] == neg.loc[j, "family_size"]).to_numpy()
        for i in np.nonzero(same)[0]:
            S[i, j] = score_at(paths[rn], t_score[i])
    valid = np.isfinite(S) | np.isinf(S)
    if not valid.any():
        return np.nan, np.nan, np.nan, S, valid
    spv = np.where(np.isnan(sp), -np.inf, sp)
    W = np.where(valid, (spv[:, None] > S) + 0.5 * (spv[:, None] == S), 0.0)
    V = valid.astype(float)
    num = np.einsum("bp,pn,bn->b", wp, W, wn)
    den = np.einsum("bp,pn,bn->b", wp, V, wn)
    boots = num[den > 0] / den[den > 0]
    lo, hi = (float(x) for x in np.percentile(boots, [2.5, 97.5])) if len(boots) else (np.nan, np.nan)
    return float(W[valid].mean()), lo, hi, S, valid


def auroc_block(runs: pd.DataFrame, paths: dict, n_boot: int, rng) -> dict:
    """Time-matched AUROC with its cell-bootstrap interval, the threshold at FA_TARGET, the
    detection rate and the alarm's lead there (module doc)."""
    pos = runs[runs["positive"] & runs["run"].isin(paths)].reset_index(drop=True)
    neg = runs[runs["negative"] & runs["run"].isin(paths)].reset_index(drop=True)
    out = {"auroc": np.nan, "auroc_lo": np.nan, "auroc_hi": np.nan, "threshold_fa": np.nan, "fa_achieved": np.nan,
           **{f"auroc_lead{round(100 * x)}{e}": np.nan for x in LEADS for e in ("", "_lo", "_hi")},
           "detect_at_fa": np.nan, "lead_at_fa": np.nan, "n_pos": len(pos), "n_neg": len(neg)}
    if not len(pos) or not len(neg):
        return out
    cp, cn = _cells(pos), _cells(neg)
    cells = sorted(set(cp) | set(cn))
    idx = {c: k for k, c in enumerate(cells)}
    ip, ineg = np.array([idx[c] for c in cp]), np.array([idx[c] for c in cn])
    counts = rng.multinomial(len(cells), np.full(len(cells), 1.0 / len(cells)), size=n_boot)   # (B, cells)
    t_acq = pos["t_acq"].to_numpy(float)
    S = valid = None
    for lead in (0.0,) + tuple(LEADS):
        auc, lo, hi, S_l, valid_l = _matched_auroc(pos, neg, paths, (1.0 - lead) * t_acq, counts[:, ip],
                                                   counts[:, ineg])
        key = "auroc" if lead == 0.0 else f"auroc_lead{round(100 * lead)}"
        out[key], out[f"{key}_lo"], out[f"{key}_hi"] = auc, lo, hi
        if lead == 0.0:
            S, valid = S_l, valid_l
    if not valid.any():
        return out
    # threshold: the smallest candidate keeping the time-matched false-alarm rate <= FA_TARGET
    negs = S[valid]
    # (an alarm fires at s >= theta: candidates just above each negative score, so a negative's
    # whole mass can be excluded; with few negatives the achieved rate is below the target)
    fin = np.unique(negs[np.isfinite(negs)])
    cand = np.unique(np.concatenate([fin, np.nextafter(fin, np.inf)]))
    fa = np.array([(negs >= c).mean() for c in cand])
    ok = cand[fa <= FA_TARGET]
    theta = float(ok.min()) if len(ok) else np.inf
    out["threshold_fa"] = theta
    out["fa_achieved"] = float((negs >= theta).mean())
    if np.isfinite(theta):
        t_al = np.array([alarm_step(paths[r], theta) for r in pos["run"]])
        before = np.isfinite(t_al) & (t_al < pos["t_acq"].to_numpy())
        out["detect_at_fa"] = float(before.mean())
        lead = np.where(before, (pos["t_acq"].to_numpy() - t_al) / pos["t_acq"].to_numpy(), np.nan)
        per_cell = pd.Series(lead).groupby(cp.to_numpy()).mean().dropna()
        out["lead_at_fa"] = float(per_cell.median()) if len(per_cell) else np.nan
    else:
        out["detect_at_fa"] = 0.0
    return out


# ------------------------------------------------------------------ scores
def _boot_median(values: np.ndarray, n_boot: int, rng) -> tuple:
    if len(values) == 0:
        return (np.nan, np.nan, np.nan)
    b = np.median(values[rng.integers(0, len(values), (n_boot, len(values)))], axis=1)
    return (float(np.median(values)), *(float(x) for x in np.percentile(b, [2.5, 97.5])))


def _log1(x) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    return np.where(np.isfinite(x), np.log(x + 1), np.inf)


def gain_rows(runs: pd.DataFrame, events: pd.DataFrame, st: dict) -> pd.DataFrame:
    """Per signal x event kind: the timing test's partial r given the loss curve's events and
    the design, cells as units (module doc)."""
    n_perm, seed = int(st["n_permutations"]), int(st["seed"])
    acq = runs[runs["positive"]]
    out = []
    for name, g in events.groupby("signal", sort=False):
        m = acq.merge(g, on="run")
        for kind in EVENT_KINDS:
            d = m[np.isfinite(m[kind])]
            cell = d.groupby(list(CELLS)).agg(
                t_acq=("t_acq", "median"), t=(kind, "median"), lo=("loss_onset", "median"),
                lh=("loss_half", "median"), le=("loss_extreme", "median"),
                hard=("difficulty", lambda x: float((x == "hard").mean() > 0.5)),
                fixed=("difficulty_fixed", "all"), cal=("calibration_step", "median")).reset_index()
            used, _ = preceding_loss_events({c: cell[c].to_numpy(float) for c in ("lo", "lh", "le")},
                                            cell["t_acq"].to_numpy(float))        # those before acquisition
            cols = [_log1(cell[c]) for c in used]
            if len(cell) and bool(cell["fixed"].all()):
                cols += [cell["hard"].to_numpy(float), _log1(cell["cal"])]
            L = np.column_stack(cols) if cols else None
            r = (partial_rank(np.log(cell["t_acq"].to_numpy(float)), _log1(cell["t"]), L, cell["size"].to_numpy(),
                              n_perm, seed, 1.0 - float(st["alpha"])) if len(cell) else None)   # one-sided bounds
            out.append({"signal": name, "event": kind, "gain_r": r and r.statistic, "gain_lo": r and r.ci[0],
                        "gain_hi": r and r.ci[1], "gain_p": r and r.p, "gain_n_cells": int(len(cell)),
                        "gain_note": r.reason if r else "no cell with the event"})
    df = pd.DataFrame(out)
    if len(df):
        p = df["gain_p"].astype(float)
        okp = p.notna()
        df["gain_p_holm"] = np.nan
        df.loc[okp, "gain_p_holm"] = holm(p[okp].tolist())
        alpha = float(st["alpha"])
        df["reading"] = np.where((df["gain_p_holm"] < alpha) & (df["gain_r"].astype(float) > 0),
                                 "beyond the loss curve", "not shown")
    return df


def benchmark_table(pres: list[dict], curves: dict, st: dict) -> pd.DataFrame:
    """precursor_benchmark.csv: one row per signal x event kind (module doc)."""
    runs = run_table(pres)
    if not len(runs):
        return pd.DataFrame(columns=COLUMNS)
    n_boot, rng = int(st["n_bootstrap"]), np.random.default_rng(int(st["seed"]))
    persist = int(pres[0]["events_settings"]["persist"])
    events = {k: event_table(runs, curves, pres, k) for k in SETTINGS}
    gains = {k: gain_rows(runs, ev_k, st) for k, ev_k in events.items()}
    main = events["matched"]
    info = {s.name: s for s in SIGNALS}
    costs = pd.DataFrame([{"signal": k, "cpu": v} for _, (_, c) in curves.items() for k, v in (c or {}).items()])
    rows = []
    for name in [s.name for s in SIGNALS] + [CLOCK]:
        g = main[main["signal"] == name]
        if not len(g) or not g["present"].any():
            continue
        s = info.get(name)
        direction = s.direction if s else "up"
        alarm = auroc_block(runs, alarm_scores(runs, curves, name, direction, persist), n_boot, rng)
        cost = costs[(costs["signal"] == name) & costs["cpu"].notna()]["cpu"] if len(costs) else pd.Series([])
        for kind in EVENT_KINDS:
            m = runs.merge(g, on="run")          # present: the run's curve of this signal has points
            pos = m[m["positive"] & np.isfinite(m[kind])]
            lead = (pos["t_acq"] - pos[kind]) / pos["t_acq"]
            per_cell = lead.groupby(_cells(pos).to_numpy()).mean()      # the cell keys of these rows
            med, lo, hi = _boot_median(per_cell.to_numpy(float), n_boot, rng)
            negs = m[m["negative"] & m["present"].astype(bool)]      # where the signal was measured
            k_fa = int((negs["changed"] & np.isfinite(negs[kind])).sum()) if name != CLOCK else int(len(negs))
            from .stats import clopper_pearson
            fa_lo, fa_hi = clopper_pearson(k_fa, len(negs))
            agree = {}
            for alt in SETTINGS:
                if alt == "matched":
                    continue
                a = events[alt]
                j = g[["run", kind]].merge(a[a["signal"] == name][["run", kind]], on="run", suffixes=("", "_alt"))
                j = j[np.isfinite(j[kind]) & np.isfinite(j[f"{kind}_alt"])]
                agree[alt] = (float(pd.Series(j[kind]).rank().corr(pd.Series(j[f"{kind}_alt"]).rank()))
                              if len(j) >= 3 else np.nan)
            readings = {}
            for k2, gk in gains.items():
                hit = gk[(gk["signal"] == name) & (gk["event"] == kind)]
                readings[k2] = hit["reading"].iloc[0] if len(hit) else "not shown"
            gm = gains["matched"]
            gr = gm[(gm["signal"] == name) & (gm["event"] == kind)]
            gr = gr.iloc[0] if len(gr) else {}
            rows.append({
                "signal": name, "event": kind, "kind": s.kind if s else "reference", "direction": direction,
                "needs": s.needs if s else "none", "source": s.source if s else "a fixed step per size",
                "cpu_ms_per_checkpoint": float(cost.median() * 1000) if len(cost) else np.nan,
                "n_cells": int(_cells(m[m["positive"] & m["present"].astype(bool)]).nunique()),
                "n_runs": int((m["positive"] & m["present"].astype(bool)).sum()),
                "n_cells_event": int(len(per_cell)), "lead": med, "lead_lo": lo, "lead_hi": hi,
                "n_negatives": int(len(negs)), "false_alarms": k_fa,
                "false_alarm_rate": k_fa / len(negs) if len(negs) else np.nan, "fa_lo": fa_lo, "fa_hi": fa_hi,
                "auroc": alarm["auroc"], "auroc_lo": alarm["auroc_lo"], "auroc_hi": alarm["auroc_hi"],
                **{k: alarm[k] for k in COLUMNS if k.startswith("auroc_lead")},
                "threshold_at_fa": alarm["threshold_fa"], "fa_achieved": alarm["fa_achieved"],
                "detect_at_fa": alarm["detect_at_fa"],
                "lead_at_fa": alarm["lead_at_fa"],
                "gain_r": gr.get("gain_r"), "gain_lo": gr.get("gain_lo"), "gain_hi": gr.get("gain_hi"),
                "gain_p_holm": gr.get("gain_p_holm"), "gain_n_cells": gr.get("gain_n_cells"),
                "reading": readings["matched"],
                "agreement_min": float(np.nanmin(list(agree.values()))) if any(np.isfinite(list(agree.values())))
                else np.nan,
                "agreement": "; ".join(f"{k} {v:.2f}" for k, v in agree.items()),
                "robust": len(set(readings.values())) == 1,
                "readings": "; ".join(f"{k} {v}" for k, v in readings.items())})
    out = pd.DataFrame(rows, columns=COLUMNS)
    return out.sort_values(["event", "auroc"], ascending=[False, False], na_position="last").reset_index(drop=True)


# ------------------------------------------------------------ the verdict's robust column
def redetect(pre: dict, curves: pd.DataFrame, setting: str) -> dict:
    """A copy of a run's precursor record with the loss events, the floor window and every
    measure whose headline curve is in ``curves`` re-detected under ``setting``; the other
    measures are dropped (their events cannot be recomputed from the curves)."""
    e = dict(pre["events_settings"])
    e.update(SETTINGS[setting])
    out = copy.deepcopy(pre)
    blind = _blind_loss(pre)
    le = loss_events(curves, blind if np.isfinite(blind) else None, e)
    out["loss_events"].update({f"{k}_step": v for k, v in le.items()})
    out["loss_plateau_exit_step"] = le["onset"]
    window = le["onset"] if e["floor_window"] == "loss_onset" else None
    out["floor_window"]["end_step"] = window
    # precursor.json's measure entries -> their registry curve: the two RankMe entries, and every
    # expensive measure the registry scores under its own name (grad_cov_erank has none: dropped)
    col = {"rankme": "rankme_uncentred", "rankme_centred": "rankme_centred",
           **{s.name: s.name for s in SIGNALS if s.table == "measures"}}
    t_acq = pre.get("acquisition_step")
    for m in list(out["measures"]):
        c = col.get(m)
        if c is None or c not in curves or not np.isfinite(curves[c]).any():
            del out["measures"][m]
            continue
        ent = out["measures"][m]
        direction = "down" if ent.get("direction") == "collapse" else "up"
        ok = np.isfinite(curves[c].to_numpy(float))
        new = ev.curve_entry(curves["step"].to_numpy(np.int64)[ok], curves[c].to_numpy(float)[ok], direction, e,
                             before=window if direction == "down" else None)
        ent.update(new)
        if direction == "down":
            ent.update(precursor_verdict(ent, t_acq, e["transition"], e["precursor_min_gap_frac"]))
    return out
