"""Read per-run ``precursor.json`` files and order runs, sizes and tasks.

A precursor.json (written by ``geoanatomy.precursor``) must have the run facts
checked in ``REQUIRED``; every entry of ``measures`` that carries curve events
(``floor_step`` or ``transition_step``) is a geometric measure, whatever its
name (rankme, grad_erank, grad_cov_erank, hessian_top, llc, ...). A ``probes``
entry (top level or under ``measures``) is read by ``behaviour.probes``.

Runs come with seeds and controls: a run's cell is (task, level, size); replicate
seeds of one cell (run name suffix ``_s{seed}``, field ``seed``) are nested in
it, and cross-size statistics use one value per cell (``per_cell``: the median
over its seeds). Shuffled-label control runs (field ``control`` non-empty, name
suffix ``_shuffled``) are controls, not study runs: ``study_runs`` leaves them
out of floors, scale, prediction, top-down and emergence statistics
(``rates.control_rows`` reports them).
"""
from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd

import numpy as np

from ..defaults import DEFAULTS
from ..schedule import train_checkpoint_steps
from ..precursor.seal import loads_strict, seal_problem
from ..sizes import SIZES
from ..spec import parse_mixture_name, parse_run_name
from ..tasks import LEVELS, TASKS

REQUIRED = ("run", "task", "level", "size", "acquired", "acquisition_step", "difficulty", "measures")
DIFFICULTIES = ["easy", "hard", "unlearned", "diverged"]
REFERENCES = {  # reference "measures": behavioural/loss events every comparison is judged against
    "loss_plateau_exit": "loss_plateau_exit_step",
    "logprob_emergence": "logprob_emergence_step",
}


MAX_RECORD_BYTES = 64 << 20     # a precursor.json is tens of kB; a larger file is not one


class SummaryInputError(ValueError):
    """A per-run result file is missing, unreadable or lacks a field; the message names it."""


def _redo(p: Path) -> str:
    """How to rebuild a bad precursor.json: Snakemake does not rerun a job whose output is
    newer than its inputs, so the file has to go first."""
    return f"delete it (rm {p}) and run snakemake again, which rebuilds it from the run's tables"


# Fields by kind, wherever they appear in a record (top level, measure entries, per layer):
# every key ending in ``_step`` is a step (null, or an integer 0 <= step <= the run's steps);
# these are numbers (null or finite) and booleans (true or false; null only where named).
NUMBER_KEYS = frozenset({"init", "floor", "final", "change", "peak", "global_floor", "global_peak",
                         "final_accuracy", "max_accuracy", "chance_accuracy", "first_token_chance",
                         "baseline_logprob_per_token", "rank_corr_with_rankme", "n_params"})
SHARE_KEYS = frozenset({"final_accuracy", "max_accuracy", "chance_accuracy", "first_token_chance"})  # in [0, 1]
BOOL_KEYS = frozenset({"acquired", "diverged", "collapsed", "risen", "precursor", "at_window_end",
                       "constant_by_construction", "changed", "before_behaviour"})
NULLABLE_BOOLS = frozenset({"precursor", "changed", "before_behaviour"})
# settings, not results: a key like events_settings.easy_max_step is a threshold, not a step
SETTINGS_KEYS = frozenset({"events_settings", "train_settings", "eval", "machine", "level_params", "baselines",
                           "difficulty_source", "mixture"})


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def record_problems(d: dict) -> list[str]:
    """What is wrong with a precursor record's fields (types, ranges, the run name against its
    fields), one phrase each naming the field; [] when nothing is."""
    out = []
    steps = d.get("steps")
    if steps is not None and not (_is_int(steps) and steps >= 0):
        out.append(f"'steps' is {steps!r}, not a non-negative integer")
        steps = None

    def walk(x, where: str):
        if isinstance(x, dict):
            for k, v in x.items():
                here = f"{where}.{k}" if where else k
                if not where and k in SETTINGS_KEYS:
                    continue
                if k.endswith("_step") or k == "step":
                    if v is not None and not (_is_int(v) and v >= 0 and (steps is None or v <= steps)):
                        out.append(f"'{here}' is {v!r}, not a step (null or an integer from 0 to the run's "
                                   f"{steps if steps is not None else 'last'} step)")
                elif k in NUMBER_KEYS:
                    if v is not None and not _is_number(v):
                        out.append(f"'{here}' is {v!r}, not a finite number or null")
                    elif v is not None and k in SHARE_KEYS and not 0 <= v <= 1:
                        out.append(f"'{here}' is {v!r}, not a share in [0, 1]")
                    elif v is not None and k == "n_params" and not (_is_int(v) and v > 0):
                        out.append(f"'{here}' is {v!r}, not a positive parameter count")
                elif k in BOOL_KEYS:
                    if not isinstance(v, bool) and not (v is None and k in NULLABLE_BOOLS):
                        out.append(f"'{here}' is {v!r}, not true or false")
                elif isinstance(v, (dict, list)):
                    walk(v, here)
        elif isinstance(x, list):
            for i, v in enumerate(x):
                walk(v, f"{where}[{i}]")

    walk(d, "")
    if not isinstance(d.get("run"), str) or not d.get("run"):
        out.append(f"'run' is {d.get('run')!r}, not a run name")
        return out
    if d.get("level") is not None:                     # an algorithmic run or mixture unit (Pythia: no level)
        for key, allowed in (("task", TASKS), ("level", LEVELS), ("size", list(SIZES))):
            if d.get(key) not in allowed:
                out.append(f"'{key}' is {d.get(key)!r}; allowed: {allowed}")
        named = parse_run_name(d["run"]) or parse_mixture_name(d["run"])
        if named is None or named.get("task") is None:
            out.append(f"'run' {d['run']!r} is not a run name (TASK_LEVEL_SIZE[_shuffled][_sN]) or a mixture unit")
        else:
            for key in ("task", "level", "size", "seed", "control"):
                have = d.get(key, 0 if key == "seed" else "")
                have = "" if key == "control" and have is None else have
                if key in named and named[key] != have and not (key == "seed" and named.get("mixture")):
                    out.append(f"'{key}' is {have!r} but the run name {d['run']!r} says {named[key]!r}")
    if d.get("acquired") is True and d.get("acquisition_step") is None:
        out.append("acquired but 'acquisition_step' is null")
    if d.get("acquired") is False and d.get("acquisition_step") is not None:
        out.append(f"not acquired but 'acquisition_step' is {d['acquisition_step']!r}")
    for name, e in (d.get("measures") or {}).items() if isinstance(d.get("measures"), dict) else ():
        if is_curve_measure(e):
            need = ("peak_step", "risen") if e.get("direction") == "rise" else ("floor_step", "collapsed")
            miss = [k for k in ("transition_step",) + need if k not in e]
            if miss:
                out.append(f"measure '{name}' lacks {miss}")
    return out


def load_precursor(path: str | Path) -> dict:
    """One precursor.json as a dict, parsed strictly (no NaN or Infinity), its seal checked
    (``precursor.seal``: a hand edit is detected) and its fields checked (``record_problems``:
    types, ranges, the run name against its fields). Every error names the file and says how
    to rebuild it."""
    p = Path(path)
    if not p.exists():
        raise SummaryInputError(f"{p} does not exist: run snakemake, whose events job writes it")
    if not p.is_file():              # a FIFO would block the read forever, a device never end
        raise SummaryInputError(f"{p} is not a regular file (a folder, FIFO or device); remove it and run "
                                f"snakemake again, which writes the record")
    if p.stat().st_size > MAX_RECORD_BYTES:
        raise SummaryInputError(f"{p} is {p.stat().st_size:,} bytes, more than a run's record can be "
                                f"({MAX_RECORD_BYTES:,}); {_redo(p)}")
    try:
        d = loads_strict(p.read_text())
    except OSError as e:
        raise SummaryInputError(f"{p} cannot be read ({e.strerror or e}); {_redo(p)}") from e
    except ValueError as e:          # JSONDecodeError is a ValueError; so is NaN / Infinity
        raise SummaryInputError(f"{p} is not valid JSON ({e}); {_redo(p)}") from e
    if not isinstance(d, dict):
        raise SummaryInputError(f"{p}: top level must be an object, got {type(d).__name__}")
    missing = [k for k in REQUIRED if k not in d]
    if missing:
        raise SummaryInputError(f"{p}: lacks field(s) {missing}; {_redo(p)}")
    if not isinstance(d["measures"], dict):
        raise SummaryInputError(f"{p}: field 'measures' must be an object")
    if d["difficulty"] not in DIFFICULTIES:
        raise SummaryInputError(f"{p}: field 'difficulty' is {d['difficulty']!r}; allowed: {DIFFICULTIES}")
    if d["acquired"] and not _is_step(d["acquisition_step"]):
        raise SummaryInputError(f"{p}: acquired but 'acquisition_step' is {d['acquisition_step']!r}")
    bad = record_problems(d)
    if bad:
        more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
        raise SummaryInputError(f"{p}: {'; '.join(bad[:3])}{more}; {_redo(p)}")
    why = seal_problem(d)
    if why:
        raise SummaryInputError(f"{p}: {why}; {_redo(p)}")
    if d["level"] is None:          # Pythia per-benchmark results have no level
        d["level"] = "-"
    d["_path"] = str(p)
    return d


def load_precursors(paths) -> list[dict]:
    """Load every file; duplicate run names are an error naming both files."""
    out, seen = [], {}
    for path in paths:
        d = load_precursor(path)
        if d["run"] in seen:
            raise SummaryInputError(f"run {d['run']!r} appears twice: {seen[d['run']]} and {path}")
        seen[d["run"]] = str(path)
        out.append(d)
    return sort_runs(out)


def _is_step(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def step_or_none(x):
    """An event step as int, or None (missing, null, NaN)."""
    return int(x) if _is_step(x) else None


def family(size: str) -> str:
    """'toy' for this project's GPT sizes, 'pythia' for anything else (e.g. pythia-160m)."""
    return "toy" if size in SIZES else "pythia"


def _size_value(size: str, n_params=None) -> float:
    if size in SIZES:
        return float(list(SIZES).index(size))
    if n_params:
        return float(n_params)
    m = re.search(r"(\d+(?:\.\d+)?)\s*([mbk])", str(size).lower())
    if m:
        return float(m.group(1)) * {"k": 1e3, "m": 1e6, "b": 1e9}[m.group(2)]
    return math.inf


def size_order(sizes, n_params: dict | None = None) -> list[str]:
    """Sizes smallest first: toy sizes in SIZES order, others by parameter count or name."""
    n_params = n_params or {}
    return sorted(dict.fromkeys(sizes), key=lambda s: (family(s) != "toy", _size_value(s, n_params.get(s)), s))


def task_order(tasks) -> list[str]:
    return sorted(dict.fromkeys(tasks), key=lambda t: (TASKS.index(t) if t in TASKS else len(TASKS), t))


def level_order(levels) -> list[str]:
    return sorted(dict.fromkeys(levels), key=lambda lv: (LEVELS.index(lv) if lv in LEVELS else len(LEVELS), lv))


def sort_runs(pres: list[dict]) -> list[dict]:
    sizes = size_order([p["size"] for p in pres], {p["size"]: p.get("n_params") for p in pres})
    tasks, levels = task_order([p["task"] for p in pres]), level_order([p["level"] for p in pres])
    return sorted(pres, key=lambda p: (levels.index(p["level"]), tasks.index(p["task"]), sizes.index(p["size"]),
                                       is_control(p), seed_of(p)))


def is_control(pre: dict) -> bool:
    """A shuffled-label (or other) control run: field ``control`` set, or a ``_shuffled`` name."""
    return bool(pre.get("control")) or bool((parse_run_name(str(pre.get("run") or "")) or {}).get("control"))


def seed_of(pre: dict) -> int:
    """The run's seed: field ``seed``, else the ``_s{seed}`` name suffix, else 0."""
    s = pre.get("seed")
    if isinstance(s, int) and not isinstance(s, bool):
        return s
    parsed = parse_run_name(str(pre.get("run") or ""))
    return parsed["seed"] if parsed else 0


def study_runs(pres: list[dict]) -> list[dict]:
    """The runs the statistics use: control runs left out (module doc)."""
    return [p for p in pres if not is_control(p)]


def per_cell(df: pd.DataFrame, keys: list[str], value: str = "value") -> pd.DataFrame:
    """One row per cell (the ``keys`` columns): ``value`` = median over its rows (its seeds;
    NaN rows skipped, +inf = censored kept, so a cell is censored when at least half its
    seeds are), ``n_seeds`` = rows with a non-NaN value."""
    d = df[keys + [value]].copy()
    d[value] = pd.to_numeric(d[value], errors="coerce").astype(float)
    d = d[d[value].notna()]
    g = d.groupby(keys, sort=False)[value]
    return pd.concat([g.median().rename(value), g.size().rename("n_seeds")], axis=1).reset_index()


def seeds_span(counts) -> str:
    """'3' when every cell has 3 seeds, '1-3' when they differ, '0' when there are no cells."""
    c = [int(v) for v in counts]
    if not c:
        return "0"
    return str(min(c)) if min(c) == max(c) else f"{min(c)}-{max(c)}"


def is_curve_measure(entry) -> bool:
    return isinstance(entry, dict) and ("floor_step" in entry or "transition_step" in entry)


def geometric_measures(pre: dict) -> dict:
    """name -> entry for every curve-event measure in pre['measures'] (probes excluded)."""
    return {k: v for k, v in pre["measures"].items() if k != "probes" and is_curve_measure(v)}


def extreme(entry: dict) -> tuple[str, float | None, int | None]:
    """The level a measure's curve settles at during its transition: ("floor", value, step) for
    collapsing measures (RankMe, gradient ranks); ("peak", value, step) for rising ones
    (``direction: rise``: top Hessian eigenvalue, LLC; geoanatomy.measures.registry: TableMeasure.direction)."""
    if entry.get("direction") == "rise":
        return "peak", entry.get("peak"), step_or_none(entry.get("peak_step"))
    return "floor", entry.get("floor"), step_or_none(entry.get("floor_step"))


def run_facts(pre: dict) -> dict:
    """The per-run columns every table starts with."""
    return {"run": pre["run"], "task": pre["task"], "level": pre["level"], "size": pre["size"],
            "seed": seed_of(pre), "control": pre.get("control") or ("shuffled" if is_control(pre) else ""),
            "family": family(pre["size"]), "n_params": pre.get("n_params"),
            "steps": pre.get("steps"), "difficulty": pre["difficulty"],
            "acquired": bool(pre["acquired"]), "diverged": bool(pre.get("diverged")),
            "acquisition_step": step_or_none(pre["acquisition_step"])}


CHECKPOINTS = "checkpoints"


def run_grids(pre: dict) -> dict:
    """{"checkpoints": the run's checkpoint steps, measure: the steps an expensive measure was
    taken at}: where the run's events can fall. The checkpoint steps are rebuilt from the run's
    training settings (``schedule.train_checkpoint_steps``, what training wrote); a run whose
    settings do not say (a foreign run) has none."""
    g = {}
    tr = ((pre.get("train_settings") or {}).get("train") or {})
    ck = tr.get("checkpoints") or {}
    if tr.get("steps") and all(k in ck for k in ("n_log", "log_end", "n_uniform")):
        g[CHECKPOINTS] = np.asarray(train_checkpoint_steps(tr), float)
    for name, m in (pre.get("measures") or {}).items():
        if isinstance(m, dict) and m.get("measured_steps"):
            g[name] = np.asarray(sorted(m["measured_steps"]), float)
    return g


def half_widths(mat: np.ndarray, n: np.ndarray, steps: np.ndarray, quarter: bool) -> np.ndarray:
    """Per row, in decades of (step + 1): where ``steps[r]`` falls on row r's grid ``mat[r, :n[r]]``
    (ascending; a ragged grid padded on the right), the span between the grid steps either side
    of it over 4 (``quarter``: an extreme read at the nearest grid step, the curve's own lies
    within it), or the span from the grid step before it to it over 2 (a crossing read at the
    next grid step: the true one lies between them, half a step on average). NaN for a row
    with an empty grid. One formula for the verdict's lag interval (``lag_resolution``) and the
    power simulation's (``analysis.power``)."""
    mat, n, steps = np.asarray(mat, float), np.asarray(n, int), np.asarray(steps, float)
    rows = np.arange(len(steps))
    last = np.maximum(n - 1, 0)
    i = np.minimum((mat < steps[:, None]).sum(axis=1), last)
    lo = mat[rows, np.maximum(i - 1, 0)]
    hi = mat[rows, np.minimum(i + 1, last)] if quarter else mat[rows, i]
    return np.where(n > 0, (np.log10(hi + 1) - np.log10(lo + 1)) / (4 if quarter else 2), np.nan)


def lag_resolution(pre: dict, measure: str, t_event, t_acq) -> float:
    """The half-width in decades within which the grids place the lag log10(t_event + 1) -
    log10(t_acq + 1) of one run: the event's on its measure's grid (the checkpoints for a
    measure taken at every one) plus acquisition's on the checkpoints (``half_widths``)."""
    g = run_grids(pre)
    ck = g.get(CHECKPOINTS)

    def part(grid, t, quarter):
        if grid is None or t is None or not len(grid):
            return float("nan")
        return float(half_widths(np.asarray(grid, float)[None, :], np.array([len(grid)]), np.array([float(t)]),
                                 quarter)[0])
    return part(g.get(measure, ck), t_event, True) + part(ck, t_acq, False)


def calibration_step(pre: dict) -> float:
    """The median acquisition step of the class file's calibration runs of the run's cell
    (known before training; +inf for "never", NaN without a class file)."""
    src = pre.get("difficulty_source") or {}
    steps = src.get("calibration_acquisition_steps")
    if not src.get("fixed_before_outcome") or not steps:
        return float("nan")
    vals = [float("inf") if str(x) in ("never", "None", "") else float(x) for x in steps]
    return float(np.median(vals))


def min_gap_frac(pre: dict) -> float:
    """The run's clear-gap fraction f (``events.precursor_min_gap_frac``: a lead counts as a
    precursor's when t_acq - t >= f t_acq), from its own events settings."""
    return float((pre.get("events_settings") or {}).get("precursor_min_gap_frac",
                                                         DEFAULTS["events"]["precursor_min_gap_frac"]))


def clear_gap(fracs) -> float | None:
    """The one clear-gap fraction f of the runs a summary pools (``min_gap_frac`` of each; None
    without a run). Runs with different f are refused, also under summary.allow_mixed_settings:
    a precursor claim applies one rule to every unit it counts."""
    vals = sorted({float(x) for x in fracs if x == x})
    if len(vals) > 1:
        raise SummaryInputError(
            "the runs of this summary use different events.precursor_min_gap_frac "
            f"({', '.join(f'{v:g}' for v in vals)}):"
            " a precursor claim applies one clear gap to every unit, so these runs do not pool even with "
            "summary.allow_mixed_settings; summarize each value's runs on its own (--precursors)")
    return vals[0] if vals else None


def class_counts(pres: list[dict]) -> dict:
    """Runs per difficulty class (every class listed, zeros included)."""
    c = {k: 0 for k in DIFFICULTIES}
    for p in pres:
        c[p["difficulty"]] += 1
    return c


# ------------------------------------------------------------------ pooling
# What must be the same for runs to be pooled into one summary: the event definitions across
# every run; the training and evaluation settings within a size (sizes may differ by
# size_overrides / eval.n_samples_by_size, which the config states per size); a level's task
# parameters within a task x level (rev L1 of length 4 and of length 6 are two tasks, not one cell).
POOLED = (("events_settings", None, "event settings"), ("train_settings", "size", "training settings"),
          ("eval", "size", "evaluation settings"), ("level_params", ("task", "level"), "task-level parameters"))
_EVAL_KEYS = ("n_samples", "split", "positions")


def _flat(d, prefix="") -> dict:
    if not isinstance(d, dict):
        return {prefix or "value": d}
    out = {}
    for k, v in d.items():
        out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)) if isinstance(v, dict) else {f"{prefix}.{k}" if
                                                                                                prefix else str(k): v})
    return out


def settings_mix(pres: list[dict]) -> list[str]:
    """The settings that differ between runs that would be pooled (``POOLED``), one line each
    naming the setting, its values and runs: [] when the runs agree."""
    out = []
    for key, within, what in POOLED:
        groups: dict = {}
        for p in pres:
            g = (tuple(p.get(w) for w in within) if isinstance(within, tuple) else p.get(within)) if within else None
            groups.setdefault(g, []).append(p)
        for g, runs in groups.items():
            flat = {}
            for p in runs:
                v = p.get(key)
                if key == "eval" and isinstance(v, dict):
                    v = {k: v.get(k) for k in _EVAL_KEYS if k in v}
                for k, x in _flat(v or {}).items():
                    flat.setdefault(k, {}).setdefault(json_key(x), []).append(p["run"])
                for k in set(flat) - set(_flat(v or {})):      # a setting this run does not record
                    flat[k].setdefault("(not recorded)", []).append(p["run"])
            for k, vals in sorted(flat.items()):
                if len(vals) > 1:
                    where = ((f" at {' '.join(within)} {' '.join(map(str, g))}" if isinstance(within, tuple)
                              else f" at {within} {g}") if within else "")
                    shown = "; ".join(f"{v} in {', '.join(r[:3])}{' ...' if len(r) > 3 else ''} ({len(r)} runs)"
                                      for v, r in vals.items())
                    out.append(f"{what} {key}.{k}{where} differ: {shown}")
    return out


def json_key(x) -> str:
    import json
    return json.dumps(x, sort_keys=True)


def check_pooling(pres: list[dict], allow: bool) -> list[str]:
    """Refuse (SummaryInputError naming runs and settings) to pool runs whose settings differ,
    unless ``allow`` (summary.allow_mixed_settings); returns the differences (for the headers)."""
    mix = settings_mix(pres)
    if mix and not allow:
        more = f" (and {len(mix) - 3} more)" if len(mix) > 3 else ""
        raise SummaryInputError(
            "the runs of this summary were made with different settings, so their numbers do not pool: "
            + " | ".join(mix[:3]) + more + ". Summarize each setting's runs on its own (--precursors), or set "
            "summary.allow_mixed_settings: true to pool them anyway (every summary header then lists the mix)")
    return mix
