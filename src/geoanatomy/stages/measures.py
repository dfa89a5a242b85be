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
hessian_top        power_iteration         top Hessian eigenvalue  (measures.hessian)
llc                sgld                    local learning coefficient (measures.llc)
=================  ======================  =============================================

``n_samples`` is the number of examples the value rests on (gradient samples N, Hessian
batch, LLC data pool); ``settings`` holds every hyperparameter and diagnostic (iterations
and convergence of the power iteration; eps, gamma, n_beta, chains, draws, per-chain
values and flags of the LLC) plus ``selected_because`` (why this checkpoint was measured).
When the Hessian is measured too, each LLC row also gets ``eps_nbeta_lambda`` = eps *
n_beta * hessian_top and the flag ``unstable_step`` when it is >= 4: SGLD on a quadratic of
curvature n_beta * lambda diverges along that direction beyond it (only the loss's
saturation bounds the chain, so the estimate measures the step size, not the landscape).

Data: each measure uses its own fixed, seeded sample of the *training* distribution
(held-out inputs excluded, as in training), the same at every checkpoint of a run: these
measures describe the training-loss landscape. Random streams (power-iteration start
vector, SGLD noise and minibatch order) are seeded per run, so the same config and seed
give the same numbers on CPU.

Runs whose size is not in ``measures.sizes`` get a header-only table (the paper computed
these measures at small sizes only).

Checkpoint subset (``measures:`` config block): every ``every_k``-th checkpoint (by index,
starting at the first) plus the last, and around each event detected from the cheap
metrics.csv (``events``: acquisition, rankme_collapse, rankme_floor, rankme_recovery; the
rankme events on the events block's headline layer/position/variant) the event's
checkpoint and ``around_events`` checkpoints on each side.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from .. import events as ev
from ..checkpoints import iter_checkpoints
from ..measures.registry import MEASURES, measure
from ..spec import RunSpec
from ..table import curve, read_table, write_table
from ..tasks import stable_seed
from .common import checkpoint_identity, open_run, training_dir

EVENT_NAMES = ("acquisition", "rankme_collapse", "rankme_floor", "rankme_recovery")
MEASURE_KINDS = tuple(MEASURES)


# ----------------------------------------------------------- checkpoint subset
def detect_events(metrics_df, cfg_events: dict) -> dict[str, int | None]:
    """Steps of acquisition and the headline RankMe collapse/floor/recovery from metrics.csv rows."""
    e = cfg_events
    s, a = curve(metrics_df, "accuracy_norm", position="answer")
    out: dict[str, int | None] = {"acquisition": ev.acquisition_step(s, a, e["acquisition_threshold"], e["persist"])}
    s, v = curve(metrics_df, "rankme", layer=ev.headline_layer(e), position=e["position"], variant=e["variant"])
    cev = ev.curve_entry(s, v, "down", e)
    for k in ("collapse", "floor", "recovery"):
        out[f"rankme_{k}"] = cev[f"{k}_step"]
    return out


def select_checkpoints(steps: list[int], every_k: int, around: int = 0,
                       event_steps: dict[str, int | None] | None = None) -> dict[int, list[str]]:
    """{step: reasons} for the subset: every k-th checkpoint + last + event neighbourhoods."""
    if every_k < 1:
        raise ValueError(f"measures.every_k must be >= 1, got {every_k}")
    if around < 0:
        raise ValueError(f"measures.around_events must be >= 0, got {around}")
    steps = sorted(int(s) for s in steps)
    out: dict[int, list[str]] = {}
    for i, s in enumerate(steps):
        if i % every_k == 0:
            out.setdefault(s, []).append(f"every_{every_k}")
    if steps:
        out.setdefault(steps[-1], []).append("last")
    for name, t in (event_steps or {}).items():
        if t is None or t not in steps:
            continue
        i = steps.index(t)
        for j in range(max(0, i - around), min(len(steps), i + around + 1)):
            out.setdefault(steps[j], []).append(name if j == i else f"{name}{j - i:+d}")
    return dict(sorted(out.items()))


# ------------------------------------------------------------------- data
def train_sample(data, n: int, tag: str) -> np.ndarray:
    """A fixed seeded sample (n, S) of training-distribution sequences (no held-out inputs)."""
    return data.training_sample(n, "measures", tag)


# ------------------------------------------------------------ one checkpoint
def measure_checkpoint(model, pools: dict, n_answer: int, cfg: dict, seeds: dict, kinds=MEASURE_KINDS,
                       timings: dict | None = None) -> list[dict]:
    """Rows (without run/step) of the expensive measures ``kinds`` at the model's current
    weights, in that order (``measures.registry``).

    pools: {"grad": (N, S), "hessian": (B, S), "llc": (n, S)} token tensors (each measure's
    config block names its pool); cfg the merged ``measures`` block; seeds {"hessian": int,
    "llc": int}. ``timings`` (optional dict) is incremented with the CPU seconds of each measure.
    """
    rows, context = [], {}
    for kind in kinds:
        t = time.process_time()
        m = measure(kind)
        rows += m.rows(model, pools[m.config_key], n_answer, cfg[m.config_key],
                       seeds[kind] if m.seeded else None, context)
        if timings is not None:
            timings[kind] = timings.get(kind, 0.0) + time.process_time() - t
    return rows


# ------------------------------------------------------------------ one run
def run(spec: RunSpec, run_dir: str | Path, cfg_measures: dict, cfg_events: dict | None = None,
        device: str = "auto", log=print) -> dict:
    """Compute the expensive measures of a trained run on its checkpoint subset; write
    ``run_dir/measures.csv``. ``cfg_measures``: the resolved ``measures`` block;
    ``cfg_events``: the ``events`` block, needed when ``measures.events`` picks checkpoints
    around the events of ``run_dir/metrics.csv``.
    Returns {"steps": {step: reasons}, "rows", "cpu_seconds", "cpu_seconds_by_measure"}.
    """
    cfg = cfg_measures
    kinds = list(cfg["which"])
    bad = sorted(set(kinds) - set(MEASURES))
    if bad:
        raise ValueError(f"measures.which: unknown {bad}; allowed: {list(MEASURES)}")
    bad = sorted(set(cfg["events"]) - set(EVENT_NAMES))
    if bad:
        raise ValueError(f"measures.events: unknown {bad}; allowed: {list(EVENT_NAMES)}")
    run_dir = Path(run_dir)
    out_csv = run_dir / "measures.csv"
    if spec.size not in cfg["sizes"]:
        write_table(out_csv, [])
        log(f"[measures] {spec.name}: size {spec.size!r} not in measures.sizes {cfg['sizes']}; wrote an empty table")
        return {"steps": {}, "events": {}, "rows": 0, "cpu_seconds": 0.0, "wall_seconds": 0.0,
                "cpu_seconds_by_measure": {}}
    model, data, ckdir, steps, device = open_run(spec, training_dir(spec, run_dir), device)  # a unit: its mixture's
    metrics = run_dir / "metrics.csv"
    ev_steps = {}
    if cfg["events"]:
        if cfg_events is None:
            raise ValueError(f"measures.events {cfg['events']} picks checkpoints around events: "
                             f"give the events block")
        if metrics.exists():
            found = detect_events(read_table(metrics), cfg_events)
            ev_steps = {k: found[k] for k in cfg["events"]}
        else:
            log(f"[measures] {spec.name}: no {metrics}; measuring every {cfg['every_k']}-th checkpoint only")
    sel = select_checkpoints(steps, int(cfg["every_k"]), int(cfg["around_events"]), ev_steps)

    need = {m.config_key: int(cfg[m.config_key][m.pool_size_key]) for m in MEASURES.values()}
    pools = {k: torch.as_tensor(train_sample(data, n, k), device=device) for k, n in need.items()}
    seeds = {k: stable_seed(spec.seed, spec.name, k) % (2**31) for k, m in MEASURES.items() if m.seeded}
    na = data.spec.n_answer
    t0, w0 = time.process_time(), time.time()
    timings: dict[str, float] = {}
    rows: list[dict] = []
    for step in iter_checkpoints(ckdir, model, list(sel), checkpoint_identity(spec)):
        why = sel[step]
        for r in measure_checkpoint(model, pools, na, cfg, seeds, kinds, timings):
            r["settings"]["selected_because"] = why
            r.update(run=spec.name, step=step)
            rows.append(r)
    write_table(out_csv, rows)
    cpu, wall = time.process_time() - t0, time.time() - w0
    per = ", ".join(f"{k} {v / len(sel):.2f}" for k, v in timings.items())
    log(f"[measures] {spec.name}: {len(sel)} of {len(steps)} checkpoints {list(sel)}; events {ev_steps}; "
        f"{len(rows)} rows; {cpu:.1f} CPU-s ({wall:.1f} s wall); CPU-s per checkpoint: {per}")
    return {"steps": sel, "events": ev_steps, "rows": len(rows), "cpu_seconds": cpu, "wall_seconds": wall,
            "cpu_seconds_by_measure": timings}

