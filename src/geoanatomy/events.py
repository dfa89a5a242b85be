"""Event detection on per-checkpoint curves: acquisition, emergence, collapse, floor,
recovery, precursor, difficulty class.

All functions take checkpoint ``steps`` (K,) and a curve (K,) and return a step
(int) or None. NaN points (a diverged run) are ignored. Thresholds come from the
``events:`` block of the config (defaults in ``config.DEFAULTS``); every
precursor.json repeats the values it used.

Definitions (``persist`` = p consecutive checkpoints, default 3):

acquisition
    First checkpoint t_acq whose chance-normalised exact-match accuracy
    a_norm = (acc - chance) / (1 - chance) is >= ``acquisition_threshold`` (0.5)
    and stays >= it at the next p - 1 checkpoints too (p checkpoints in all).
    chance = accuracy of the best constant answer on the evaluation set; for
    multi-token answers it is ~0, so this is the paper's "accuracy >= 50% for 3
    consecutive checkpoints"; for one-token binary answers (par, cmp) it asks for
    75% raw accuracy instead of the 50% a coin reaches.
log-probability emergence
    First checkpoint whose mean per-token answer log-probability exceeds the
    input-blind (marginal) predictor's, ``tasks.marginal_logprob``, by
    ``logprob_margin`` nats for p consecutive checkpoints: the model has begun
    to use the input, usually long before exact matches appear.
loss-plateau exit
    Same criterion on the training loss: first checkpoint where
    train_loss <= -marginal - margin for p consecutive checkpoints.
init, floor
    init = the value at the first checkpoint (step 0); floor = the minimum over
    all checkpoints; floor_step = the first step where it is reached.
collapse
    The curve has *collapsed* when floor <= (1 - ``collapse_drop``) * init.
    collapse_step = first step where value <= init - ``collapse_half`` * (init - floor)
    (the "half-drop" point). None when not collapsed.
recovery
    recovery_step = first step after floor_step where value >= floor * (1 +
    ``recovery_rise``) holds for p consecutive checkpoints. None when not collapsed
    or never recovering.
rise, peak, settle (``rise_events``)
    The mirror image for measures that grow during learning (Hessian top eigenvalue,
    LLC): peak = max, risen when init <= (1 - collapse_drop) * peak, rise_step = first
    value >= init + collapse_half * (peak - init), settle_step = first step after the
    peak with value <= peak / (1 + recovery_rise) for p checkpoints.
transition and precursor
    The geometric transition is the event named by ``transition`` (default
    "floor": the end of the collapse, the turning point of the trajectory).
    precursor = the run acquired, the measure collapsed, the transition exists,
    t_tr < t_acq strictly, and t_acq - t_tr >= ``precursor_min_gap_frac`` * t_acq.
    gap_steps = t_acq - t_tr whenever both exist (may be negative: the measure lags).
difficulty
    Behavioural only (so it can be compared with the geometric events without
    circularity): "easy" if t_acq <= ``easy_max_frac`` * total steps, "hard" if
    acquired later, "unlearned" if never acquired, "diverged" if training
    diverged (non-finite loss).
"""
from __future__ import annotations


import numpy as np


def _clean(steps, values):
    s = np.asarray(steps, dtype=np.int64)
    v = np.asarray(values, dtype=np.float64)
    ok = np.isfinite(v)
    return s[ok], v[ok]


def first_sustained(steps, cond: np.ndarray, persist: int) -> int | None:
    """First step i with cond true at checkpoints i .. i+persist-1 (all must exist)."""
    cond = np.asarray(cond, dtype=bool)
    for i in range(len(cond) - persist + 1):
        if cond[i:i + persist].all():
            return int(steps[i])
    return None


def acquisition_step(steps, acc_norm, threshold: float = 0.5, persist: int = 3) -> int | None:
    """First checkpoint with acc_norm >= threshold at it and the next persist-1 checkpoints."""
    s, v = _clean(steps, acc_norm)
    return first_sustained(s, v >= threshold, persist)


def emergence_step(steps, logprob_per_token, baseline: float, margin: float, persist: int = 3) -> int | None:
    """First checkpoint where log-prob per token >= baseline + margin for ``persist`` checkpoints."""
    s, v = _clean(steps, logprob_per_token)
    return first_sustained(s, v >= baseline + margin, persist)


def plateau_exit_step(steps, train_loss, baseline_logprob: float, margin: float, persist: int = 3) -> int | None:
    """First checkpoint where training loss <= -baseline_logprob - margin for ``persist`` checkpoints."""
    s, v = _clean(steps, train_loss)
    return first_sustained(s, v <= -baseline_logprob - margin, persist)


def curve_events(steps, values, collapse_drop: float = 0.3, collapse_half: float = 0.5,
                 recovery_rise: float = 0.25, persist: int = 3) -> dict:
    """init, floor, floor_step, collapsed, collapse_step, recovery_step of one curve."""
    s, v = _clean(steps, values)
    out = {"init": None, "floor": None, "floor_step": None, "collapsed": False,
           "collapse_step": None, "recovery_step": None, "final": None}
    if len(v) == 0:
        return out
    init, k = float(v[0]), int(np.argmin(v))
    floor = float(v[k])
    out.update(init=init, floor=floor, floor_step=int(s[k]), final=float(v[-1]))
    if floor <= (1.0 - collapse_drop) * init:
        out["collapsed"] = True
        level = init - collapse_half * (init - floor)
        out["collapse_step"] = int(s[np.argmax(v <= level)])
        after = slice(k + 1, None)
        out["recovery_step"] = first_sustained(s[after], v[after] >= floor * (1.0 + recovery_rise), persist)
    return out


def rise_events(steps, values, collapse_drop: float = 0.3, collapse_half: float = 0.5,
                recovery_rise: float = 0.25, persist: int = 3) -> dict:
    """init, peak, peak_step, risen, rise_step, settle_step, final of a rising curve (module doc)."""
    s, v = _clean(steps, values)
    out = {"init": None, "peak": None, "peak_step": None, "risen": False, "rise_step": None,
           "settle_step": None, "final": None}
    if len(v) == 0:
        return out
    init, k = float(v[0]), int(np.argmax(v))
    peak = float(v[k])
    out.update(init=init, peak=peak, peak_step=int(s[k]), final=float(v[-1]))
    if peak > 0 and init <= (1.0 - collapse_drop) * peak:
        out["risen"] = True
        out["rise_step"] = int(s[np.argmax(v >= init + collapse_half * (peak - init))])
        after = slice(k + 1, None)
        out["settle_step"] = first_sustained(s[after], v[after] <= peak / (1.0 + recovery_rise), persist)
    return out


def headline_layer(cfg_events: dict) -> str:
    """The events block's headline layer ("final" is an alias of ln_final)."""
    return "ln_final" if cfg_events["layer"] == "final" else cfg_events["layer"]


def precursor(ev: dict, t_acq: int | None, transition: str = "floor", min_gap_frac: float = 0.25) -> dict:
    """Precursor verdict and gaps for the curve events ``ev`` against acquisition step t_acq."""
    t_tr = ev.get(f"{transition}_step")
    gaps = {name: (t_acq - ev[f"{name}_step"]) if (t_acq is not None and ev.get(f"{name}_step") is not None)
            else None for name in ("collapse", "floor", "recovery")}
    is_pre = bool(ev.get("collapsed") and t_acq is not None and t_tr is not None and t_tr < t_acq
                  and (t_acq - t_tr) >= min_gap_frac * t_acq)
    return {"transition": transition, "transition_step": t_tr, "precursor": is_pre,
            "gap_steps": gaps[transition], "gaps": gaps}


def difficulty(t_acq: int | None, total_steps: int, easy_max_frac: float, diverged: bool = False) -> str:
    """'diverged' | 'unlearned' | 'easy' | 'hard' (behavioural definition, see module doc)."""
    if diverged:
        return "diverged"
    if t_acq is None:
        return "unlearned"
    return "easy" if t_acq <= easy_max_frac * total_steps else "hard"
