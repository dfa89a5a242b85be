"""``geoanatomy llc-calibrate RUN``: the LLC estimator's calibration sweep at one checkpoint of a
trained run, the devinterp convention (its ``estimate_learning_coeff`` sweep over step size and
n_beta, judged by the loss traces): for every (eps, n_beta) of a grid, the same SGLD chains the
measures stage runs (the same training-distribution pool, seed and minibatch order, the run's
own ``measures.llc`` settings otherwise), their loss traces and the estimate.

Reading it: a usable setting is one whose chains leave ``init_loss`` (they move), settle to a
plateau during the draws (no drift) and agree; a step so small that the chains stay at
``init_loss`` gives an LLC near 0 whatever the landscape, one so large that they climb to the
untrained loss measures the step, not the landscape (flag ``unstable_step`` where eps * n_beta *
lambda_top >= 4). At a checkpoint whose loss is about zero (a task fitted exactly) the chains
sit in a flat valley floor: n_beta * (mean draw loss - init_loss) stays small at every setting
that does not leave the basin, which is what the LLC is there (a degenerate, low-complexity
minimum), not a failed estimate; the traces show which it is.

Writes into ``OUT`` (default ``RUN/llc_calibration``): ``llc_calibration.csv`` (one row per
setting: eps, n_beta, the estimate, its std over chains, init and mean sampled loss, flags),
``llc_calibration_traces.csv`` (one row per setting x chain x SGLD step) and
``llc_calibration.png`` (one panel per setting: every chain's trace, init_loss dashed; the
estimate in the title), each figure panel the table's rows.

A stage-level tool, not a Snakemake rule (as ``stages.sample_size``).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

EPS_GRID = (1e-5, 3e-5, 1e-4, 3e-4)
NBETA_GRID = (10.0, 30.0, 100.0)
SUMMARY_COLUMNS = ["run", "step", "eps", "n_beta", "llc", "std", "init_loss", "mean_sampled_loss", "chains",
                   "draws", "burnin", "batch_size", "n_data", "gamma", "seed", "flags", "clean"]


def calibrate(run_dir, step: int | None = None, eps=EPS_GRID, n_beta=NBETA_GRID, settings: dict | None = None,
              device: str = "cpu", log=print) -> dict:
    """The sweep (module doc) at checkpoint ``step`` (default: the last) of the run folder
    ``run_dir``: {"summary": [row dicts], "traces": [[run, step, eps, n_beta, chain, sgld_step,
    phase, loss, init_loss], ...], "settings": the llc settings used}. ``settings``: overrides of
    the llc block (chains, draws, burnin, batch_size, n_data, gamma, seed)."""
    import torch

    from ..checkpoints import iter_checkpoints
    from ..defaults import DEFAULTS
    from ..measures.llc import llc_at_checkpoint
    from ..tasks import stable_seed
    from .common import checkpoint_identity, open_run, spec_from_record
    from .measures import train_sample
    run_dir = Path(run_dir)
    train = json.loads((run_dir / "train.json").read_text())
    spec = spec_from_record(train)
    c = {**DEFAULTS["measures"]["llc"], **measured_settings(run_dir), **(settings or {})}
    bad = [f"{k}={v!r}" for k, v in (("eps", eps), ("n_beta", n_beta)) if not v or any(float(x) <= 0 for x in v)]
    if bad:
        raise ValueError(f"llc-calibrate: every step size and n_beta must be > 0 ({', '.join(bad)})")
    model, data, ckdir, steps, device = open_run(spec, run_dir, device)
    step = steps[-1] if step is None else int(step)
    if step not in steps:
        raise ValueError(f"llc-calibrate: {spec.name} has no checkpoint at step {step}; its steps: {steps[:5]} ... "
                         f"{steps[-1]}")
    next(iter(iter_checkpoints(ckdir, model, [step], checkpoint_identity(spec))))
    pool = torch.as_tensor(train_sample(data, int(c["n_data"]), "llc"), device=device)
    seed = int(c["seed"]) if "seed" in c else stable_seed(spec.seed, spec.name, "llc") % (2**31)
    summary, traces = [], []
    for nb in n_beta:
        for e in eps:
            r = llc_at_checkpoint(model, pool, data.spec.n_answer, eps=float(e), gamma=float(c["gamma"]),
                                  n_beta=float(nb), chains=int(c["chains"]), draws=int(c["draws"]),
                                  burnin=int(c["burnin"]), batch_size=int(c["batch_size"]), seed=seed,
                                  disagree_threshold=float(c["disagree_threshold"]))
            summary.append({"run": spec.name, "step": step, "eps": float(e), "n_beta": float(nb), "llc": r["value"],
                            "std": r["std"], "init_loss": r["init_loss"], "mean_sampled_loss": r["mean_sampled_loss"],
                            "chains": r["chains"], "draws": r["draws"], "burnin": r["burnin"],
                            "batch_size": r["batch_size"], "n_data": r["n_data"], "gamma": r["gamma"], "seed": seed,
                            "flags": ";".join(r["flags"]), "clean": bool(r["clean"])})
            for ch, tr in enumerate(np.asarray(r["loss_trace"], dtype=float)):
                traces += [[spec.name, step, float(e), float(nb), ch, i, "burnin" if i < r["burnin"] else "draw",
                            float(x), float(r["init_loss"])] for i, x in enumerate(tr)]
            log(f"[llc-calibrate] {spec.name} step {step}: eps {e:g}, n_beta {nb:g}: llc {r['value']:.4g} "
                f"(std {r['std']:.3g}) {' '.join(r['flags']) or 'clean'}")
    return {"summary": summary, "traces": traces, "settings": {k: c[k] for k in sorted(c)}, "seed": seed}


KEPT = ("gamma", "chains", "draws", "burnin", "batch_size", "n_data", "seed", "disagree_threshold")


def measured_settings(run_dir) -> dict:
    """The llc settings the run's measures stage used (its measures.csv llc rows' settings:
    the pool, chains, seed ...), so the sweep's chains are the stage's; {} when it has none."""
    p = Path(run_dir) / "measures.csv"
    if not p.is_file():
        return {}
    from ..table import read_table
    m = read_table(p)
    rows = m[m["measure"] == "llc"]
    if not len(rows):
        return {}
    st = json.loads(rows["settings"].iloc[0])
    return {k: st[k] for k in KEPT if k in st}


TRACE_COLUMNS = ["run", "step", "eps", "n_beta", "chain", "sgld_step", "phase", "loss", "init_loss"]


def write(result: dict, out) -> list[str]:
    """llc_calibration.csv, llc_calibration_traces.csv (with manifests) and llc_calibration.png."""
    import pandas as pd

    from ..manifest import number_text, write_with_manifest
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    s = pd.DataFrame(result["summary"], columns=SUMMARY_COLUMNS)
    text = s.to_csv(index=False, lineterminator="\n", float_format=lambda v: number_text(v, 9))
    st = result["settings"]
    write_with_manifest(out / "llc_calibration.csv", text, title="geoanatomy llc-calibrate: the LLC at each step size "
                        "and n_beta", columns=SUMMARY_COLUMNS, rows=len(s),
                        notes=[f"one row per (eps, n_beta) at one checkpoint; llc = n_beta * (mean draw loss - "
                               f"init_loss), mean over chains; the other llc settings: {json.dumps(st)}; "
                               f"seed {result['seed']} (the measures stage's for this run)"])
    lines = [",".join(TRACE_COLUMNS)] + [",".join([str(a), str(b), number_text(e, 9), number_text(nb, 9), str(ch),
                                                   str(i), ph, number_text(x, 9), number_text(il, 9)])
                                         for a, b, e, nb, ch, i, ph, x, il in result["traces"]]
    write_with_manifest(out / "llc_calibration_traces.csv", "\n".join(lines) + "\n",
                        title="geoanatomy llc-calibrate: every chain's minibatch loss at every SGLD step",
                        columns=TRACE_COLUMNS, rows=len(result["traces"]),
                        notes=["one row per (eps, n_beta) x chain x SGLD step, burn-in first"])
    png = out / "llc_calibration.png"
    save_figure(draw(s, result["traces"]), png)
    return [str(out / "llc_calibration.csv"), str(out / "llc_calibration_traces.csv"), str(png)]


def draw(s, traces):
    """The figure: one panel per setting (rows n_beta, columns eps), each chain's loss trace
    (gid "trace:<eps>:<n_beta>:<chain>"), init_loss dashed, the burn-in shaded; the title gives
    the estimate and its flags."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    eps = sorted(set(s["eps"]))
    nbs = sorted(set(s["n_beta"]))
    fig, axes = plt.subplots(len(nbs), len(eps), figsize=(2.9 * len(eps) + 0.6, 2.3 * len(nbs) + 0.9),
                             squeeze=False, sharex=True)
    arr = np.array([t[2:8] for t in traces], dtype=object)
    for i, nb in enumerate(nbs):
        for j, e in enumerate(eps):
            ax = axes[i][j]
            row = s[(s["eps"] == e) & (s["n_beta"] == nb)].iloc[0]
            sel = arr[(arr[:, 0].astype(float) == e) & (arr[:, 1].astype(float) == nb)]
            for ch in sorted(set(sel[:, 2].astype(int))):
                c = sel[sel[:, 2].astype(int) == ch]
                ax.plot(c[:, 3].astype(int), c[:, 5].astype(float), lw=0.9, gid=f"trace:{e:g}:{nb:g}:{ch}")
            ax.axhline(float(row["init_loss"]), color="0.3", ls="--", lw=0.8)
            if int(row["burnin"]):
                ax.axvspan(-0.5, int(row["burnin"]) - 0.5, color="0.9", lw=0)
            flags = str(row["flags"]) if isinstance(row["flags"], str) and row["flags"] else "clean"
            ax.set_title(f"eps {e:g}, n_beta {nb:g}\nllc {row['llc']:.3g} +- {row['std']:.2g} ({flags})", fontsize=7)
            ax.tick_params(labelsize=6)
            if j == 0:
                ax.set_ylabel("minibatch loss", fontsize=7)
            if i == len(nbs) - 1:
                ax.set_xlabel("SGLD step (burn-in shaded)", fontsize=7)
    r0 = s.iloc[0]
    fig.suptitle(f"LLC calibration: {r0['run']} at step {int(r0['step'])}; {int(r0['chains'])} chains x "
                 f"({int(r0['burnin'])} burn-in + {int(r0['draws'])} draws), batch {int(r0['batch_size'])}, pool "
                 f"{int(r0['n_data'])}, gamma {r0['gamma']:g}; dashed: the loss at the checkpoint", fontsize=8)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return fig


def save_figure(fig, png) -> None:
    import io

    import matplotlib.pyplot as plt

    from ..files import atomic_write_bytes
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=130, metadata={"Software": None})
    plt.close(fig)
    atomic_write_bytes(png, buf.getvalue())
