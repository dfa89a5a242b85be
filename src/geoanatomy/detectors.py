"""Event detection on per-checkpoint curves (torch-free): every detector of the project.

All functions take checkpoint ``steps`` (K,) and a curve (K,) and return steps (int) or
None. NaN points (a diverged run) are ignored. Thresholds come from the ``events:``
block of the config (defaults in ``config.DEFAULTS``); every precursor.json repeats the
values it used. docs/events.md states every definition with its formula.

Definitions (``persist`` = p consecutive checkpoints, default 3):

acquisition (``acquisition_step``)
    First checkpoint whose chance-normalised accuracy (acc - chance) / (1 - chance)
    is >= ``acquisition_threshold`` (0.5) there and at the next p - 1 checkpoints;
    chance is the training distribution's (``geoanatomy.baselines``).
log-probability emergence (``emergence_step``)
    First checkpoint whose per-token answer log-probability exceeds the input-blind
    baseline by ``logprob_margin`` nats for p consecutive checkpoints.
matched events (``matched_events``, the default detector for every curve)
    onset / extreme / return of a falling or rising curve, measured as progress from a
    start level to the run's extreme (module function doc); ``curve_entry`` names them
    collapse / floor / recovery or rise / peak / settle.
change-point events (``pelt_fit``; ``detector: pelt``)
    A second detector family for the robustness check: the curve is segmented by PELT
    (ruptures, least-squares cost, penalty 2 sigma^2 ln K with sigma from the median absolute
    first difference), each segment replaced by its mean, and the matched definitions read on
    that piecewise-constant curve with persist 1: every event falls on a change point.
legacy events (``curve_events``, ``rise_events``, ``plateau_exit_step``)
    The first version's rules: floor = argmin, collapse = half-drop point, recovery
    relative to the floor value; plateau exit = training loss below the input-blind loss
    by ``logprob_margin``. Kept as ``detector: legacy`` / ``plateau_rule: margin``.
transition, precursor, difficulty
    The study's rules on these events live in ``geoanatomy.precursor`` (the precursor
    rule, the precursor verdict of a measure, the difficulty classes).
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


def matched_events(steps, values, direction: str, start: float | None = None, onset_frac: float = 0.1,
                   extreme_tol: float = 0.05, return_frac: float = 0.25, min_change: float = 0.3,
                   persist: int = 3, before: int | None = None) -> dict:
    """The matched event family, the same for every curve (geometric or behavioural).

    ``direction`` "down" (a collapse: RankMe, gradient ranks, a loss) or "up" (a rise:
    accuracy, log-probability, Hessian top eigenvalue, LLC). ``start`` is the level the
    change is measured from: the value at the first checkpoint by default (geometry); for
    behaviour the input-blind level (chance accuracy, the baseline log-probability or loss).
    With extreme = min (down) or max (up) over the run and progress
    p(t) = (v(t) - start) / (extreme - start)::

        changed      |extreme - start| / max(|start|, |extreme|) >= min_change
        onset_step   first checkpoint with p >= onset_frac, held for ``persist`` checkpoints
        half_step    first checkpoint with p >= 0.5, held for ``persist`` checkpoints
        extreme_step first checkpoint with p >= 1 - extreme_tol (within tolerance of the
                     extreme: on a flat floor this is where the floor is reached, not the
                     noisy argmin)
        return_step  first checkpoint after extreme_step with p <= 1 - return_frac, held for
                     ``persist`` checkpoints (the curve has come back by return_frac of its change)

    ``before`` (a step, optional): the extreme is the extreme of the checkpoints at or
    before it (a collapse's floor *before* the run's behavioural change, ``before`` = the
    loss's matched onset), and ``changed``, progress, onset and extreme step are measured
    against that extreme; the return is looked for over the rest of the run. The run's own
    extreme is reported beside it in any case: ``global_extreme``, ``global_extreme_step``
    (first checkpoint within ``extreme_tol`` of it) and ``window_end`` (``before``);
    ``at_window_end`` is True when the window's extreme is its last checkpoint and the run
    goes on (the curve was still moving when the window closed: a censored floor).

    Steps are None when the curve did not change (``changed`` False) or never got there.
    """
    if direction not in ("down", "up"):
        raise ValueError(f"direction must be 'down' or 'up', got {direction!r}")
    s, v = _clean(steps, values)
    out = {"direction": direction, "start": None, "extreme": None, "extreme_argstep": None, "final": None,
           "change": None, "changed": False, "onset_step": None, "half_step": None, "extreme_step": None,
           "return_step": None, "window_end": None if before is None else int(before),
           "global_extreme": None, "global_extreme_step": None, "at_window_end": False}
    if len(v) == 0:
        return out
    v0 = float(v[0]) if start is None else float(start)
    pick = np.argmin if direction == "down" else np.argmax
    kg = int(pick(v))
    out.update(global_extreme=float(v[kg]))
    if v[kg] != v0:                                     # first checkpoint within tolerance of the run's extreme
        pg = (v - v0) / (v[kg] - v0)
        out["global_extreme_step"] = int(s[int(np.argmax(pg >= 1.0 - extreme_tol))])
    else:
        out["global_extreme_step"] = int(s[kg])
    n_win = len(v) if before is None else int(np.searchsorted(s, int(before), side="right"))
    n_win = max(n_win, 1)
    k = int(pick(v[:n_win]))
    ext = float(v[k])
    # the window's extreme sits on its last checkpoint while the curve goes on past it: the
    # collapse had not bottomed out by the window's end (a censored floor, flagged)
    out["at_window_end"] = bool(n_win < len(v) and k == n_win - 1)
    delta = ext - v0
    scale = max(abs(v0), abs(ext))
    change = abs(delta) / scale if scale > 0 else 0.0
    out.update(start=v0, extreme=ext, extreme_argstep=int(s[k]), final=float(v[-1]), change=change)
    moved = delta < 0 if direction == "down" else delta > 0
    if not moved or change < min_change:
        return out
    p = (v - v0) / delta
    out["changed"] = True
    out["onset_step"] = first_sustained(s, p >= onset_frac, persist)
    out["half_step"] = first_sustained(s, p >= 0.5, persist)
    i = int(np.argmax(p[:n_win] >= 1.0 - extreme_tol))
    out["extreme_step"] = int(s[i])
    out["return_step"] = first_sustained(s[i + 1:], p[i + 1:] <= 1.0 - return_frac, persist)
    return out


def pelt_fit(steps, values) -> tuple[np.ndarray, np.ndarray]:
    """(steps, piecewise-constant values) of a curve segmented by PELT (module doc): the
    ruptures package's Pelt with the least-squares cost, minimum segment 2 checkpoints,
    penalty 2 sigma^2 ln K (sigma: the noise level of the first differences, MAD-estimated)."""
    import ruptures
    s, v = _clean(steps, values)
    if len(v) < 4:
        return s, v
    d = np.diff(v)
    sigma = float(np.median(np.abs(d - np.median(d)))) / 0.6745 / np.sqrt(2.0)
    sigma = sigma if sigma > 0 else float(np.std(v)) * 1e-3 + 1e-12
    bkps = ruptures.Pelt(model="l2", min_size=2, jump=1).fit(v.reshape(-1, 1)).predict(
        pen=2.0 * sigma ** 2 * np.log(len(v)))
    fit = np.empty_like(v)
    start = 0
    for end in bkps:
        fit[start:end] = v[start:end].mean()
        start = end
    return s, fit


COLLAPSE_KEYS = {"onset": "collapse", "extreme": "floor", "return": "recovery"}
RISE_KEYS = {"onset": "rise", "extreme": "peak", "return": "settle"}


def curve_entry(steps, values, direction: str, cfg_events: dict, start: float | None = None,
                before: int | None = None, constant: bool = False) -> dict:
    """A curve's events under the configured detector, with the names the rest of the project
    reads: collapse, floor, recovery (direction "down") or rise, peak, settle ("up"),
    each ``<name>_step``, plus ``init``, ``final``, ``collapsed``/``risen``.

    ``detector: matched`` (default) is ``matched_events`` (onset -> collapse/rise, extreme ->
    floor/peak, return -> recovery/settle); ``detector: legacy`` is ``curve_events`` /
    ``rise_events`` (the first version's rules: argmin floor, half-drop collapse, recovery
    relative to the floor). ``before``: the extreme is searched at or before that step
    (``matched_events``; the matched detector only), the run's own extreme reported as
    ``global_<floor|peak>`` and ``global_<floor|peak>_step``. ``constant``: the curve is
    constant by construction (RankMe of a layer and position that hold the same vector in
    every row), so its wiggles are float rounding and depend on the CPU: it gets no event, its
    extreme is its first point (``constant_entry``), online and offline alike."""
    e = cfg_events
    names = COLLAPSE_KEYS if direction == "down" else RISE_KEYS
    if constant:
        return constant_entry(steps, values, direction, e.get("detector", "matched"))
    if e.get("detector", "matched") == "legacy":
        fn = curve_events if direction == "down" else rise_events
        out = fn(steps, values, e["collapse_drop"], e["collapse_half"], e["recovery_rise"], e["persist"])
        out["detector"] = "legacy"
        return out
    persist = e["persist"]
    if e.get("detector", "matched") == "pelt":
        steps, values = pelt_fit(steps, values)
        persist = 1
    m = matched_events(steps, values, direction, start=start, onset_frac=e["onset_frac"],
                       extreme_tol=e["extreme_tol"], return_frac=e["return_frac"],
                       min_change=e["collapse_drop"], persist=persist, before=before)
    flag = "collapsed" if direction == "down" else "risen"
    out = {"detector": e.get("detector", "matched"), "init": m["start"], names["extreme"]: m["extreme"],
           f"{names['extreme']}_step": m["extreme_step"], flag: m["changed"],
           f"{names['onset']}_step": m["onset_step"], f"{names['return']}_step": m["return_step"],
           "half_step": m["half_step"], "argextreme_step": m["extreme_argstep"], "final": m["final"],
           "change": m["change"], "window_end": m["window_end"], "at_window_end": m["at_window_end"],
           f"global_{names['extreme']}": m["global_extreme"],
           f"global_{names['extreme']}_step": m["global_extreme_step"]}
    if m["extreme_step"] is None:  # unchanged curve: report where the extreme value sits
        out[f"{names['extreme']}_step"] = m["extreme_argstep"] if len(_clean(steps, values)[1]) else None
    return out


def constant_entry(steps, values, direction: str, detector: str = "matched") -> dict:
    """``curve_entry``'s keys for a curve constant by construction: nothing happened; init,
    extreme and final are its first and last points' values, the extreme's step its first."""
    names = COLLAPSE_KEYS if direction == "down" else RISE_KEYS
    s, v = _clean(steps, values)
    first = int(s[0]) if len(s) else None
    x0 = float(v[0]) if len(v) else None
    flag = "collapsed" if direction == "down" else "risen"
    return {"detector": detector, "init": x0, names["extreme"]: x0, f"{names['extreme']}_step": first, flag: False,
            f"{names['onset']}_step": None, f"{names['return']}_step": None, "half_step": None,
            "argextreme_step": first, "final": float(v[-1]) if len(v) else None, "change": 0.0,
            "window_end": None, "at_window_end": False, f"global_{names['extreme']}": x0,
            f"global_{names['extreme']}_step": first, "constant_by_construction": True}


def headline_layer(cfg_events: dict) -> str:
    """The events block's headline layer ("final" is an alias of ln_final)."""
    return "ln_final" if cfg_events["layer"] == "final" else cfg_events["layer"]
