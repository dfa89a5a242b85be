"""The events stage: a run's ``precursor.json`` and ``trajectory.png`` from its tables.

This stage reads the run's tables (metrics.csv; measures.csv and probes.csv when present)
and train.json, checks that they belong to the run, and writes what
``geoanatomy.precursor.events_record`` builds from them (the definitions: that package;
the file: docs/outputs.md), with a mixture unit's facts (``mixture_facts``).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..baselines import training_baselines
from ..defaults import events_settings
from ..files import json_safe
from ..precursor import events_record, rankme_entry  # noqa: F401 (rankme_entry: re-exported)
from ..precursor.seal import write_sealed
from ..spec import JobSpec, RunSpec
from ..table import read_table
from .common import run_record, task_data, training_dir


def build_precursor(spec: RunSpec, train_summary: dict, df, cfg_events: dict, measures_df=None,
                    probes_df=None, baselines: dict | None = None) -> dict:
    """The precursor.json dict for one run (``precursor.events_record`` of its tables).
    ``baselines``: the training distribution's chance and input-blind levels (computed when
    not given)."""
    data = task_data(spec)
    base = baselines or training_baselines(data)
    n_eval = int(spec.eval["n_samples"])
    # how many different inputs the evaluation set holds (a small input space repeats them:
    # par at 7 bits holds out ~35 of its 128 inputs, so RankMe's N rows have at most 35 ranks)
    distinct = int(np.unique(data.eval_set(n_eval), axis=0).shape[0])
    facts = {"run": spec.name, "task": spec.task, "level": spec.level, "size": spec.size,
             "seed": spec.seed, "control": spec.control, "level_params": spec.level_params,
             "n_params": train_summary.get("n_params"), "steps": spec.train["steps"],
             # what the summary compares before pooling runs (analysis.load.check_pooling)
             "train_settings": {"train": spec.train, "data": spec.data, "block_size": spec.block_size}}
    out = events_record(facts, df, cfg_events, base, n_eval, float(spec.eval["rankme_eps"]),
                        diverged=train_summary.get("diverged", False), measures_df=measures_df, probes_df=probes_df,
                        n_eval_distinct=distinct)
    if spec.is_unit:
        out = mixture_facts(spec, out)
    # the machine training ran on (train.json's fingerprint; None for runs trained before it existed)
    out["machine"] = train_summary.get("machine")
    return json_safe(out)


def mixture_facts(spec: RunSpec, out: dict) -> dict:
    """``out`` with the multi-task protocol's facts after ``control``: protocol, the model
    (the mixture's training run) and the mixture (combinations, sampling shares, this one's)."""
    from ..mixture import combination_names, shares
    names = combination_names(spec.mixture)
    share = dict(zip(names, shares(spec.mixture).tolist()))
    me = spec.name.rsplit("/", 1)[1]
    facts = {"protocol": "mixture", "model": spec.train_name,
             "mixture": {"name": spec.mixture["name"], "combinations": names, "shares": share,
                         "share": share[me], "n_combinations": len(names),
                         "evaluation": "this combination's own held-out samples (unpadded), as its "
                                       "single-task run's with the same seed",
                         "independence": "combinations of one model are not independent: "
                                         "summary statistics resample models"}}
    keys = list(out)
    i = keys.index("control") + 1
    return {**{k: out[k] for k in keys[:i]}, **facts, **{k: out[k] for k in keys[i:]}}


def precursor_of_run(spec: RunSpec, run_dir: str | Path, cfg_events: dict):
    """(precursor dict, metrics DataFrame, {table name: DataFrame}) of a run folder, writing
    nothing. ``cfg_events``: the ``events:`` block, made one frozen object here
    (``defaults.events_settings``) and handed down as such."""
    cfg_events = events_settings(cfg_events)
    run_dir = Path(run_dir)
    summary = run_record(spec, training_dir(spec, run_dir))    # a mixture unit: its mixture's train.json
    recorded = sorted(int(x) for x in summary.get("checkpoint_steps", []))
    hashes = summary.get("checkpoint_sha256") or {}
    tables = {k: read_table(run_dir / f"{k}.csv", checkpoints=hashes) for k in ("metrics", "measures", "probes")
              if k == "metrics" or (run_dir / f"{k}.csv").exists()}
    for k, df in tables.items():
        check_table_against_record(df, run_dir / f"{k}.csv", spec.name, recorded, exact=(k == "metrics"))
    check_table_against_spec(tables["metrics"], run_dir / "metrics.csv", int(spec.eval["n_samples"]))
    extra = {f"{k}_df": tables[k] for k in ("measures", "probes") if k in tables}
    pre = build_precursor(spec, summary, tables["metrics"], cfg_events, **extra)
    legacy = [df.attrs["legacy"] for df in tables.values() if df.attrs.get("legacy")]
    if legacy:                          # tables of an earlier format, read on request: the record says so
        pre["legacy_tables"] = legacy
    return pre, tables["metrics"], tables


def check_table_against_record(df, path: Path, run: str, recorded: list[int], exact: bool) -> None:
    """A per-run table must be this run's (``run`` column) and its steps must be the
    checkpoint steps train.json records (all of them when ``exact``; a subset otherwise)."""
    from ..table import TableError
    fix = f"recompute it with `geoanatomy clean-run {path.parent}` and rerun snakemake"
    runs = sorted(set(df["run"].astype(str))) if len(df) else []
    if runs and runs != [run]:
        raise TableError(f"table {path} holds rows of runs {runs[:5]}, expected only {run!r}; {fix}")
    steps = sorted(set(int(x) for x in df["step"])) if len(df) else []
    if exact and steps != recorded:
        extra, missing = sorted(set(steps) - set(recorded)), sorted(set(recorded) - set(steps))
        raise TableError(f"table {path} does not cover the checkpoints of train.json "
                         f"({len(steps)} steps against {len(recorded)}; extra {extra[:5]}, missing {missing[:5]}); "
                         f"{fix}")
    if not exact and not set(steps) <= set(recorded):
        raise TableError(f"table {path} has steps that are not checkpoints of this run: "
                         f"{sorted(set(steps) - set(recorded))[:5]}; {fix}")
    if not len(df):
        return
    key = ["step", "measure", "layer", "position", "variant"]
    dup = df[df.duplicated(key, keep=False)]
    if len(dup):
        r = dup.iloc[0]
        raise TableError(f"table {path} has {len(dup)} rows sharing one (step, measure, layer, position, variant), "
                         f"e.g. step {r['step']} {r['measure']} {r['layer']} {r['position']} {r['variant']}: "
                         f"a row was duplicated; {fix}")
    all_steps = set(steps)
    for curve, g in df.groupby(key[1:], sort=False, dropna=False):
        have = set(int(x) for x in g["step"])
        if have != all_steps:
            raise TableError(f"table {path}: curve {' '.join(map(str, curve))} lacks steps "
                             f"{sorted(all_steps - have)[:5]} that the table's other curves have "
                             f"(a row was dropped); {fix}")


def check_table_against_spec(df, path: Path, n_samples: int) -> None:
    """metrics.csv must have been made with the evaluation settings the events are read with:
    its RankMe rows' ``n_samples`` is eval.n_samples."""
    from ..table import TableError
    rm = df[df["measure"] == "rankme"] if len(df) else df
    got = sorted(set(int(x) for x in rm["n_samples"])) if len(rm) else []
    if got and got != [int(n_samples)]:
        raise TableError(f"table {path} was made with eval.n_samples {got} but the config says {n_samples}: "
                         f"recompute it with the config's settings (`geoanatomy clean-run {path.parent}`, then "
                         f"snakemake), or read it with the config it was made with")


def signal_curves(tables: dict, run_dir: Path | None = None):
    """The curves the precursor benchmark scores, one column per registry signal
    (``measures.signal_registry``; NaN where a run's tables lack it or at steps it was not
    measured), one row per checkpoint step of metrics.csv: a wide DataFrame; and each signal's
    CPU seconds per checkpoint from the timings the metrics and measures stages wrote beside
    their tables (``signal_timings_*.json``; None where not recorded)."""
    import pandas as pd

    from ..files import read_json
    from ..measures.signal_registry import SIGNALS
    timed: dict = {}
    for stage in ("metrics", "measures"):
        p = None if run_dir is None else Path(run_dir) / f"signal_timings_{stage}.json"
        if p is not None and p.is_file():
            timed.update(read_json(p, ValueError, "", "").get("cpu_seconds_per_checkpoint") or {})
    steps = sorted(set(int(x) for x in tables["metrics"]["step"]))
    out, costs = pd.DataFrame({"step": steps}), {}
    for s in SIGNALS:
        df = tables.get(s.table)
        vals = {}
        if df is not None and len(df):
            sel = s.select(df)
            vals = dict(zip(sel["step"].astype(int), sel["value"].astype(float)))
        out[s.name] = [vals.get(t, float("nan")) for t in steps]
        costs[s.name] = timed.get(s.cost_key) if s.cost_key else None
    return out, costs


def write_signal_curves(path: Path, curves, costs: dict) -> None:
    """signal_curves.csv with its manifest (floats written exactly: repr) and beside it
    signal_costs.json ({signal: CPU seconds per checkpoint}), atomically."""
    from ..files import atomic_write_json
    from ..manifest import write_with_manifest
    atomic_write_json(path.with_name("signal_costs.json"), {
        "what": "CPU seconds per checkpoint of each signal, from the stages' signal_timings_*.json (signals computed "
                "together share one figure); null: not recorded", "cpu_seconds_per_checkpoint": costs})
    cols = list(curves.columns)
    lines = [",".join(cols)]
    for row in curves.itertuples(index=False):
        lines.append(",".join(str(int(v)) if c == "step" else repr(float(v)) for c, v in zip(cols, row)))
    write_with_manifest(path, "\n".join(lines) + "\n", title="geoanatomy per-run table signal_curves.csv: the "
                        "precursor benchmark's curves", columns=cols, rows=len(lines) - 1,
                        types={c: ("integer" if c == "step" else "number") for c in cols},
                        notes=["one row per checkpoint step; one column per signal of the registry "
                               "(geoanatomy.measures.signal_registry); NaN: not measured at that step"])


def run(spec: RunSpec, run_dir: str | Path, cfg_events: dict, log=print) -> dict:
    """Write ``run_dir/precursor.json``, ``run_dir/signal_curves.csv`` and
    ``run_dir/trajectory.png`` from train.json, metrics.csv and (when present) measures.csv
    and probes.csv. Returns the precursor dict."""
    from ..plots import plot_run
    run_dir = Path(run_dir)
    pre, df, tables = precursor_of_run(spec, run_dir, cfg_events)
    curves, costs = signal_curves(tables, run_dir)
    write_signal_curves(run_dir / "signal_curves.csv", curves, costs)
    pre = write_sealed(run_dir / "precursor.json", pre)
    plot_run(df, pre, run_dir / "trajectory.png")
    rm = pre["measures"]["rankme"]
    log(f"[events] {spec.name}: {pre['difficulty']}, acquisition {pre['acquisition_step']}, "
        f"rankme floor {rm['floor']} @ {rm['floor_step']}, precursor {rm['precursor']}, gap {rm['gap_steps']}")
    return pre


def run_job(job: JobSpec, threads: int = 1) -> dict:
    """The stage's job as the rule passes it (``geoanatomy events --spec``): its run, folder,
    device and the config blocks it reads (``config.jobs.STAGE_BLOCKS``)."""
    return run(job.run, job.run_dir, job.blocks["events"])
