"""The measures stage: the expensive measures of a run on a subset of its checkpoints ->
``results/{run}/measures.csv`` (format: ``geoanatomy.table``).

Measures (all on the task's answer loss, ``model.answer_loss``, over *all* parameters;
``layer`` = "all_params", ``layer_index`` = -1, ``position`` = "answer"; each kind of
``measures.which`` is an entry of ``measures.registry``, which computes its rows):

=================  ======================  =============================================
measure            variant                 what (module)
=================  ======================  =============================================
grad_erank         roy_vetterli|rankme|eig  effective rank of per-sample gradients G
                                           (empirical Fisher)      (measures.grad_rank)
grad_cov_erank     roy_vetterli|rankme|eig  the same on G - mean   (measures.grad_rank)
hessian_top        top_eigenvalue          top Hessian eigenvalue  (measures.hessian;
                                           Lanczos by default, settings.method)
llc                sgld                    local learning coefficient (measures.llc)
=================  ======================  =============================================

``n_samples`` is the number of examples the value rests on (gradient samples N, Hessian
batch, LLC data pool); ``settings`` holds every hyperparameter and diagnostic (iterations
and convergence of the Lanczos or power iteration; eps, gamma, n_beta, chains, draws, per-chain
values and flags of the LLC) plus ``schedule`` (how the checkpoints were chosen).
When the Hessian is measured too, each LLC row also gets ``eps_nbeta_lambda`` = eps *
n_beta * hessian_top and the flag ``unstable_step`` when it is >= 4: SGLD on a quadratic of
curvature n_beta * lambda diverges along that direction beyond it (only the loss's
saturation bounds the chain, so the estimate measures the step size, not the landscape).

Data: each measure uses its own fixed, seeded sample of the *training* distribution
(held-out inputs excluded, as in training), the same at every checkpoint of a run: these
measures describe the training-loss landscape. Random streams (power-iteration start
vector, SGLD noise and minibatch order) are seeded per run, so the same config and seed
give the same numbers on CPU.

The LLC's chains, checkpoint by checkpoint: ``llc_traces.csv`` beside measures.csv (``TRACE``;
devinterp's loss-trace diagnostic): one row per checkpoint x chain x SGLD step (burn-in
first, ``phase`` "burnin" or "draw"), the chain's minibatch loss there and the loss at the
checkpoint's weights (``init_loss``, the same pool). A chain that stays near ``init_loss``
has not moved (step too small); one far above it has left the basin (step too large, or
n_beta too small to hold it); chains that drift apart disagree (flag ``chains_disagree``).
``geoanatomy llc-calibrate`` sweeps the step size and n_beta at one checkpoint.

Runs whose size is not in ``measures.sizes`` get a header-only table (the paper computed
these measures at small sizes only).

Checkpoints (``measures.n_points``): ``schedule.measure_steps`` of the run's checkpoint
schedule, ``n_points`` checkpoints evenly spaced in checkpoint index (as dense as the
checkpoints: log-dense early, uniform later), first and last included. The schedule is
fixed before training and the same for every run of one size and budget: no checkpoint is
chosen by an event, so no timing of these measures is an artefact of where they were taken.
Each row's ``settings.schedule`` says so.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from ..checkpoints import iter_checkpoints, recorded_hashes
from ..measures.registry import MEASURES, measure
from ..schedule import measure_steps
from ..spec import JobSpec, RunSpec
from ..table import stamp_checkpoints, write_table
from ..tasks import stable_seed
from .common import checkpoint_identity, open_run, progress, training_dir, write_timings

MEASURE_KINDS = tuple(MEASURES)


TRACE_KEY = "loss_trace"        # what an llc row's settings carry until the stage writes llc_traces.csv
TRACE_COLUMNS = ["run", "step", "chain", "sgld_step", "phase", "loss", "init_loss"]


def trace_rows(rows: list[dict]) -> list[list]:
    """Take each llc row's chains' loss traces out of its settings (``TRACE_KEY``): the rows of
    llc_traces.csv (``TRACE_COLUMNS``)."""
    out = []
    for r in rows:
        tr = r["settings"].pop(TRACE_KEY, None) if r["measure"] == "llc" else None
        if tr is None:
            continue
        burn = int(r["settings"].get("burnin", 0))
        for c, chain in enumerate(tr):
            out += [[r["run"], r["step"], c, i, "burnin" if i < burn else "draw", float(x),
                     float(r["settings"].get("init_loss", float("nan")))] for i, x in enumerate(chain)]
    return out


def write_traces(path: Path, rows: list[list]) -> None:
    """llc_traces.csv and its manifest, atomically (header only when no LLC was measured)."""
    from ..manifest import number_text, write_with_manifest
    lines = [",".join(TRACE_COLUMNS)] + [f"{a},{b},{c},{d},{e},{number_text(f, 9)},{number_text(g, 9)}"
                                         for a, b, c, d, e, f, g in rows]
    write_with_manifest(Path(path), "\n".join(lines) + "\n", title="geoanatomy per-run table llc_traces.csv: the"
                        " LLC's SGLD chains", columns=TRACE_COLUMNS, rows=len(rows),
                        types={"run": "string", "step": "integer", "chain": "integer", "sgld_step": "integer",
                               "phase": "string", "loss": "number", "init_loss": "number"},
                        notes=["one row per measured checkpoint x chain x SGLD step (burn-in first): the chain's "
                               "minibatch loss (float64) and the loss at the checkpoint's weights on the same pool "
                               "(init_loss); the estimate is n_beta * (mean draw loss - init_loss), measures.csv"])


# ------------------------------------------------------------------- data
def train_sample(data, n: int, tag: str) -> np.ndarray:
    """A fixed seeded sample (n, S) of training-distribution sequences (no held-out inputs)."""
    return data.training_sample(n, "measures", tag)


# ------------------------------------------------------------ one checkpoint
def measure_checkpoint(model, pools: dict, n_answer: int, cfg: dict, seeds: dict, kinds=MEASURE_KINDS,
                       timings: dict | None = None) -> list[dict]:
    """Rows (without run/step) of the expensive measures ``kinds`` at the model's current
    weights, in that order (``measures.registry``).

    pools: {"grad_rank": (N, S), "hessian": (B, S), "llc": (n, S)} token tensors (each measure's
    config block names its pool); cfg the merged ``measures`` block; seeds {"hessian": int,
    "llc": int}. ``timings`` (optional dict) is incremented with the CPU seconds of each measure.
    """
    rows = []
    for kind in kinds:
        t = time.process_time()
        m = measure(kind)
        given = {r["measure"]: r["value"] for r in rows if r["measure"] in m.uses}   # its declared inputs
        new = m.rows(model, pools[m.config_key], n_answer, cfg[m.config_key],
                     seeds[kind] if m.seeded else None, given)
        dt = time.process_time() - t
        rows += new
        if timings is not None:
            timings[kind] = timings.get(kind, 0.0) + dt
    return rows


# ------------------------------------------------------------------ one run
def run(spec: RunSpec, run_dir: str | Path, cfg_measures: dict, device: str = "auto", log=print) -> dict:
    """Compute the expensive measures of a trained run at its fixed schedule (module doc);
    write ``run_dir/measures.csv``. ``cfg_measures``: the resolved ``measures`` block.
    Returns {"steps": [measured steps], "rows", "cpu_seconds", "wall_seconds", "cpu_seconds_by_measure"}.
    """
    cfg = cfg_measures
    kinds = list(cfg["which"])
    bad = sorted(set(kinds) - set(MEASURES))
    if bad:
        raise ValueError(f"measures.which: unknown {bad}; allowed: {list(MEASURES)}")
    run_dir = Path(run_dir)
    out_csv = run_dir / "measures.csv"
    if spec.size not in cfg["sizes"]:
        write_table(out_csv, [])
        write_traces(run_dir / "llc_traces.csv", [])
        log(f"[measures] {spec.name}: size {spec.size!r} not in measures.sizes {cfg['sizes']}; wrote an empty table")
        return {"steps": [], "rows": 0, "cpu_seconds": 0.0, "wall_seconds": 0.0, "cpu_seconds_by_measure": {}}
    model, data, ckdir, steps, device = open_run(spec, training_dir(spec, run_dir), device)  # a unit: its mixture's
    n_points = int(cfg["n_points"])
    sel = measure_steps(steps, n_points)
    schedule = f"fixed: {len(sel)} of {len(steps)} checkpoints evenly spaced by index (measures.n_points {n_points})"

    need = {m.config_key: int(cfg[m.config_key][m.pool_size_key]) for m in MEASURES.values()}
    pools = {k: torch.as_tensor(train_sample(data, n, k), device=device) for k, n in need.items()}
    seeds = {k: stable_seed(spec.seed, spec.name, k) % (2**31) for k, m in MEASURES.items() if m.seeded}
    na = data.spec.n_answer
    t0, w0 = time.process_time(), time.time()
    timings: dict[str, float] = {}
    rows: list[dict] = []
    for step in progress(iter_checkpoints(ckdir, model, sel, checkpoint_identity(spec)), len(sel), "measures",
                         spec.name, log):
        for r in measure_checkpoint(model, pools, na, cfg, seeds, kinds, timings):
            r["settings"]["schedule"] = schedule
            r.update(run=spec.name, step=step)
            rows.append(r)
    write_traces(run_dir / "llc_traces.csv", trace_rows(rows))      # before measures.csv: its rows lose the traces
    write_table(out_csv, stamp_checkpoints(rows, recorded_hashes(ckdir)))
    write_timings(run_dir / "signal_timings_measures.json", timings, len(sel))
    cpu, wall = time.process_time() - t0, time.time() - w0
    per = ", ".join(f"{k} {v / len(sel):.2f}" for k, v in timings.items())
    log(f"[measures] {spec.name}: {len(sel)} of {len(steps)} checkpoints {sel} (fixed schedule); "
        f"{len(rows)} rows; {cpu:.1f} CPU-s ({wall:.1f} s wall); CPU-s per checkpoint: {per}")
    return {"steps": sel, "rows": len(rows), "cpu_seconds": cpu, "wall_seconds": wall,
            "cpu_seconds_by_measure": timings}


def run_job(job: JobSpec, threads: int = 1) -> dict:
    """The stage's job as the rule passes it (``geoanatomy measures --spec``): its run, folder,
    device and the config blocks it reads (``config.jobs.STAGE_BLOCKS``)."""
    return run(job.run, job.run_dir, job.blocks["measures"], device=job.device)
