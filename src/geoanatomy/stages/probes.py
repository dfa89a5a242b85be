"""The probes stage: can the answer be read off frozen hidden states, per layer and
checkpoint? -> ``results/{run}/probes.csv`` (format: ``geoanatomy.table``).

At every checkpoint (the metrics stage's, so a probe event and a behavioural event are read
on the same checkpoints with the same ``persist`` rule), one forward pass over the first
``n_samples`` held-out examples (default 400: 200 probe test examples),
never trained on, hidden states of every layer (``model.layer_names()``: embed,
block0.., ln_final). Target at answer position j: the correct answer token j; input:
the hidden state at the position that *predicts* it (j = 0 is the ``=`` position, called
"first", as in metrics.csv; answer positions j >= 1 see the earlier answer tokens under
teacher forcing).

Probe: scikit-learn ``LogisticRegression`` (multinomial, L2, lbfgs; ``C``, ``max_iter``)
on standardised features (``StandardScaler`` fitted on the probe training split).
Split: a fixed seeded permutation of the examples, ``test_frac`` of them for testing,
the same at every checkpoint and layer. Reported on the test split:

* ``probe_accuracy``       share of test examples whose token the probe predicts
* ``probe_chance``         majority-class baseline: the share of the most frequent
                           token in the test split
* ``probe_accuracy_norm``  (acc - chance) / (1 - chance) (NaN if chance = 1)

``positions: first`` probes j = 0 only; ``all`` probes every answer position (position
labels "first", "answer_1", ..., and "answer_mean" = the mean over all answer positions
of the per-position values). ``embed`` at "first" is the same token at the same
position for every example (constant by construction): its probe can only reach chance.

Runs whose size is not in ``probes.sizes`` get a header-only table.

BLAS threads are limited (threadpoolctl) to the job's thread count: a 100-class
LogisticRegression took 3.95 s with 2 threads vs 0.10 s with 1 on a busy 2-core machine.
"""
from __future__ import annotations

import time
import warnings
from pathlib import Path

import numpy as np
import torch

from ..checkpoints import iter_checkpoints, recorded_hashes
from ..spec import JobSpec, RunSpec
from ..table import stamp_checkpoints, write_table
from ..tasks import stable_seed
from .common import checkpoint_identity, open_run, progress, training_dir


def split_indices(n: int, test_frac: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Fixed seeded split of range(n) -> (train_idx, test_idx), both non-empty and sorted."""
    if not 0 < test_frac < 1:
        raise ValueError(f"probes.test_frac must be in (0, 1), got {test_frac}")
    n_test = int(round(test_frac * n))
    if n_test < 1 or n - n_test < 1:
        raise ValueError(f"probe split of {n} examples with test_frac={test_frac} leaves an empty side")
    perm = np.random.default_rng(seed).permutation(n)
    return np.sort(perm[n_test:]), np.sort(perm[:n_test])


def majority_chance(y_test: np.ndarray) -> float:
    """Share of the most frequent label in y_test (n,)."""
    _, c = np.unique(y_test, return_counts=True)
    return float(c.max() / len(y_test))


def probe_accuracy(X: np.ndarray, y: np.ndarray, train_idx: np.ndarray, test_idx: np.ndarray,
                   C: float = 0.1, max_iter: int = 100, standardize: bool = True) -> dict:
    """Fit a logistic-regression probe on X[train] (n, d) -> y[train]; score it on the test split.

    Returns {"accuracy", "chance", "accuracy_norm", "train_accuracy", "n_train", "n_test",
    "n_classes" (in the training split), "converged", "n_iter"}.
    """
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    if X.ndim != 2 or X.shape[0] != y.shape[0]:
        raise ValueError(f"probe: X must be (n, d) and y (n,), got {X.shape} and {y.shape}")
    Xtr, Xte, ytr, yte = X[train_idx], X[test_idx], y[train_idx], y[test_idx]
    chance = majority_chance(yte)
    classes = np.unique(ytr)
    n_iter, converged = 0, True
    if len(classes) == 1:                                               # nothing to separate: constant probe
        pred_tr = np.full_like(ytr, classes[0])
        pred_te = np.full_like(yte, classes[0])
    else:
        if standardize:
            sc = StandardScaler().fit(Xtr)
            Xtr, Xte = sc.transform(Xtr), sc.transform(Xte)
        clf = LogisticRegression(C=C, max_iter=max_iter)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            clf.fit(Xtr, ytr)
        n_iter = int(np.max(clf.n_iter_))
        converged = n_iter < max_iter
        pred_tr, pred_te = clf.predict(Xtr), clf.predict(Xte)
    acc = float((pred_te == yte).mean())
    return {"accuracy": acc, "chance": chance,
            "accuracy_norm": (acc - chance) / (1.0 - chance) if chance < 1 else float("nan"),
            "train_accuracy": float((pred_tr == ytr).mean()), "n_train": int(len(train_idx)),
            "n_test": int(len(test_idx)), "n_classes": int(len(classes)), "converged": bool(converged),
            "n_iter": n_iter}


def probe_checkpoint(model, seq, first_pred_pos: int, n_answer: int, train_idx, test_idx,
                     positions: str = "first", C: float = 0.1, max_iter: int = 100,
                     standardize: bool = True, settings: dict | None = None) -> list[dict]:
    """Probe rows (without run/step) for every layer of ``model`` on sequences seq (N, S).

    Targets: seq[:, first_pred_pos + 1 + j] (answer token j) from hidden states at
    position first_pred_pos + j of the model input seq[:, :-1].
    """
    if positions not in ("first", "all"):
        raise ValueError(f"probes.positions must be 'first' or 'all', got {positions!r}")
    was = model.training
    model.eval()
    with torch.no_grad():
        _, hidden = model(seq[:, :-1], return_hidden=True)              # L+2 x (N, T, d)
    model.train(was)
    js = range(n_answer) if positions == "all" else range(1)
    y_all = seq[:, first_pred_pos + 1:first_pred_pos + 1 + n_answer].cpu().numpy()  # (N, n_answer)
    rows = []
    base = dict(settings or {}, C=C, max_iter=max_iter, standardize=standardize,
                chance_rule="majority class share in the probe test split", split="held-out")
    for li, (name, h) in enumerate(zip(model.layer_names(), hidden)):
        per_pos = []
        for j in js:
            X = h[:, first_pred_pos + j, :].detach().cpu().to(torch.float64).numpy()  # (N, d)
            r = probe_accuracy(X, y_all[:, j], train_idx, test_idx, C, max_iter, standardize)
            per_pos.append(r)
            pos = "first" if j == 0 else f"answer_{j}"
            st = dict(base, answer_token=j, n_train=r["n_train"], n_classes=r["n_classes"],
                      converged=r["converged"], n_iter=r["n_iter"], train_accuracy=r["train_accuracy"])
            if name == "embed" and j == 0:
                st["constant_by_construction"] = True
            rows += _rows(name, li, pos, r["n_test"], r, st)
        if positions == "all":
            mean = {k: float(np.mean([r[k] for r in per_pos])) for k in ("accuracy", "chance", "accuracy_norm")}
            st = dict(base, answer_tokens=n_answer, n_train=per_pos[0]["n_train"],
                      aggregate="mean over answer positions of the per-position probe values")
            rows += _rows(name, li, "answer_mean", per_pos[0]["n_test"], mean, st)
    return rows


def _rows(layer, li, pos, n, r, settings) -> list[dict]:
    common = dict(layer=layer, layer_index=li, position=pos, variant="logreg", n_samples=n, settings=settings)
    return [dict(common, measure="probe_accuracy", value=r["accuracy"]),
            dict(common, measure="probe_chance", value=r["chance"]),
            dict(common, measure="probe_accuracy_norm", value=r["accuracy_norm"])]


def run(spec: RunSpec, run_dir: str | Path, cfg_probes: dict, threads: int = 1, device: str = "auto",
        log=print) -> dict:
    """Probe every layer at every checkpoint of a trained run (the checkpoints the metrics
    stage scores behaviour at, so probe and behaviour events rest on the same points and the
    same persistence rule); write ``run_dir/probes.csv`` atomically. ``cfg_probes``: the
    resolved ``probes`` block."""
    from threadpoolctl import threadpool_limits

    c = cfg_probes
    run_dir = Path(run_dir)
    out_csv = run_dir / "probes.csv"
    if spec.size not in c["sizes"]:
        write_table(out_csv, [])
        log(f"[probes] {spec.name}: size {spec.size!r} not in probes.sizes {c['sizes']}; wrote an empty table")
        return {"checkpoints": 0, "rows": 0, "cpu_seconds": 0.0, "wall_seconds": 0.0}
    model, data, ckdir, steps, device = open_run(spec, training_dir(spec, run_dir), device)  # a unit: its mixture's
    n = int(c["n_samples"])
    if n > data.n_heldout:
        raise ValueError(f"probes.n_samples={n} exceeds the held-out set of {spec.name} ({data.n_heldout})")
    seq = torch.as_tensor(data.eval_set(n), device=device)              # (n, S)
    split_seed = stable_seed(spec.seed, spec.name, "probe_split") % (2**32)
    tr, te = split_indices(n, float(c["test_frac"]), split_seed)
    settings = {"test_frac": c["test_frac"], "split_seed": int(split_seed), "n_examples": n}
    sel = list(steps)
    t0, rows = time.process_time(), []
    w0 = time.time()
    with threadpool_limits(limits=max(1, int(threads))):
        for step in progress(iter_checkpoints(ckdir, model, sel, checkpoint_identity(spec)), len(sel), "probes",
                             spec.name, log):
            for r in probe_checkpoint(model, seq, data.spec.first_answer_pred_pos, data.spec.n_answer, tr, te,
                                      c["positions"], float(c["C"]), int(c["max_iter"]), bool(c["standardize"]),
                                      settings):
                r.update(run=spec.name, step=step)
                rows.append(r)
    write_table(out_csv, stamp_checkpoints(rows, recorded_hashes(ckdir)))
    cpu, wall = time.process_time() - t0, time.time() - w0
    log(f"[probes] {spec.name}: {len(sel)} checkpoints x {len(model.layer_names())} layers, {len(rows)} rows, "
        f"{cpu:.1f} CPU-s ({wall:.1f} s wall, {cpu / len(sel) * 1000:.0f} CPU-ms per checkpoint)")
    return {"checkpoints": len(sel), "rows": len(rows), "cpu_seconds": cpu, "wall_seconds": wall}


def run_job(job: JobSpec, threads: int = 1) -> dict:
    """The stage's job as the rule passes it (``geoanatomy probes --spec``): its run, folder,
    device and the config blocks it reads (``config.jobs.STAGE_BLOCKS``)."""
    return run(job.run, job.run_dir, job.blocks["probes"], threads=threads, device=job.device)
