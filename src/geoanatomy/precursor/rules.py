"""The study's two rules (torch-free): precursor and difficulty, each for one run (scalars)
and for many runs at once (numpy arrays), with the same answer either way.

precursor (``is_precursor``)
    A transition at step t_tr precedes acquisition at step t_acq when::

        t_tr < t_acq   and   t_acq - t_tr >= min_gap_frac * t_acq

    (``events.precursor_min_gap_frac``). A missing step (None, NaN) never passes. A
    measure's verdict (``precursor_verdict``) also needs the measure to have transitioned
    (collapsed / risen); the reference events and probes use the rule alone.
difficulty (``difficulty``)
    Behavioural only: "diverged" if a loss became non-finite, "unlearned" if never
    acquired, "easy" if t_acq <= easy_max, "hard" otherwise. The algorithmic runs use one
    step threshold for every size (``events.easy_max_step``); the Pythia runs and scanned
    folders a share of the last step (``easy_max_of_budget``).
"""
from __future__ import annotations

import math

import numpy as np

# The precursor.json schema of every writer (algorithmic runs, Pythia, monitor, scan).
# 2: matched detectors, both RankMe variants, training-distribution baselines.
# 3: a collapse's floor is its extreme at or before the loss's matched onset (floor_window;
#    global_floor beside it), loss_events, logprob_half_step, difficulty_source.
SCHEMA_VERSION = 3


def _scalar(*xs) -> bool:
    return all(np.ndim(x) == 0 for x in xs)


def _finite(x) -> bool:
    return x is not None and math.isfinite(x)


def is_precursor(t_tr, t_acq, min_gap_frac: float):
    """The precursor rule (module doc): a bool for scalar steps, a bool array (elementwise,
    broadcast) when either is an array. None and NaN steps never pass."""
    if _scalar(t_tr, t_acq):
        return bool(_finite(t_tr) and _finite(t_acq) and t_tr < t_acq
                    and (t_acq - t_tr) >= min_gap_frac * t_acq)
    t_tr, t_acq = np.asarray(t_tr, dtype=float), np.asarray(t_acq, dtype=float)
    with np.errstate(invalid="ignore"):
        return (t_tr < t_acq) & (t_acq - t_tr >= min_gap_frac * t_acq) & np.isfinite(t_tr) & np.isfinite(t_acq)


def difficulty(t_acq, easy_max, diverged=False):
    """'diverged' | 'unlearned' | 'easy' (t_acq <= easy_max) | 'hard' (module doc): a str for
    scalars, a str array (elementwise, broadcast) when any argument is an array. A missing
    t_acq (None, NaN) is "unlearned"; a missing easy_max makes an acquired run "hard"."""
    if _scalar(t_acq, easy_max, diverged):
        if diverged:
            return "diverged"
        if not _finite(t_acq):
            return "unlearned"
        return "easy" if _finite(easy_max) and t_acq <= easy_max else "hard"
    t = np.asarray(t_acq, dtype=float)
    emax = np.asarray(easy_max, dtype=float)
    with np.errstate(invalid="ignore"):
        cls = np.where(~np.isfinite(t), "unlearned", np.where(t <= emax, "easy", "hard"))
    return np.where(np.asarray(diverged, dtype=bool), "diverged", cls)


def easy_max_of_budget(total_steps, easy_max_frac: float) -> float:
    """The easy threshold as a share of a run's last step (Pythia runs, scanned folders)."""
    return easy_max_frac * total_steps


def precursor_verdict(ev: dict, t_acq, transition: str, min_gap_frac: float) -> dict:
    """Precursor verdict and gaps of one falling curve's events ``ev`` (``events.curve_entry``
    keys: collapsed, collapse_step, floor_step, recovery_step) against acquisition at t_acq:
    the transition is the event named ``transition``; gaps = t_acq - step wherever both exist
    (negative: the event lags)."""
    t_tr = ev.get(f"{transition}_step")
    gaps = {name: (t_acq - ev[f"{name}_step"]) if (t_acq is not None and ev.get(f"{name}_step") is not None)
            else None for name in ("collapse", "floor", "recovery")}
    is_pre = bool(ev.get("collapsed") and is_precursor(t_tr, t_acq, min_gap_frac))
    return {"transition": transition, "transition_step": t_tr, "precursor": is_pre,
            "gap_steps": gaps[transition], "gaps": gaps}
