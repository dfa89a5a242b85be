"""Cost and cross-checks of the expensive measures and probes, measured in one run on one thread.

    python benchmarks/bench_measures.py [--run mod_L3] [--steps 200] [--llc-chains 4] [--llc-draws 50] [--llc-seeds 5]
    python benchmarks/bench_measures.py --llc-only          # only the LLC comparison (nano, ~1 CPU-minute)
    python benchmarks/bench_measures.py --hessian-only [--run-dir results/mod_L3_nano]
                                                            # only ours vs PyHessian at steps 22 and 1500
    python benchmarks/bench_measures.py --llc-settings-only [--run-dir results/mod_L3_nano]
                                                            # only the cheaper-LLC-settings check

Trains a short run of the task at nano and at micro (config.yaml's settings, ``--steps``
updates) in a temporary folder, then at the final checkpoint prints

  per checkpoint   CPU seconds (process time) of each measure with config.yaml's settings:
                   grad_rank (vmap; the one-off torch.func import is reported apart),
                   hessian, llc, probes (all layers, one checkpoint); and the per-run total
                   projected for the default checkpoint subset and the default grid's
                   checkpoint count
  LLC vs devinterp our SGLD LLC and devinterp 2.x's ``llc()`` on the same checkpoint, data
                   pool, loss (answer cross-entropy) and hyperparameters:
                   (1) independent: both with their own random streams, --llc-seeds
                   independent repeats each; mean and standard error (over seeds) of each,
                   the difference in units of its standard error, and the time ratio
                   (chains share their minibatch order in both, so the spread over chains
                   alone misses the data-order variance). devinterp seeds chain c of
                   init_seed s with the torch seed s + c, so consecutive init_seeds share
                   noise streams and are not independent repeats: repeat s uses init_seed
                   100 + s * chains (``--llc-dvi-seeding consecutive`` uses s, the old,
                   correlated choice that made 0.210 vs 0.151 look like 1.85 s.e.).
                   (2) paired: ours with ``rng="devinterp"`` (devinterp's noise and
                   minibatch streams) at each of those init_seeds: the largest per-chain
                   difference, i.e. the implementation difference without Monte Carlo noise.
                   Without devinterp installed, an independent plain-loop reference
                   (``reference_llc`` below) takes its place and (2) is skipped.
  Hessian vs plain ours (config's ``measures.hessian.method``, Lanczos when unset; gradient
                   graph built once, PyHessian's way) and the same method rebuilding the
                   double-backward graph for every product; same batch, start vector and
                   tolerance: time ratio and relative difference.
  Hessian vs       at checkpoints --at-steps (22, 1500) of a nano run of --run with
   PyHessian       config.yaml's training schedule (trained here, 1,500 steps, unless
                   --run-dir names a trained run folder): ours, PyHessian 0.1's
                   ``hessian.eigenvalues(top_n=1)`` and our power iteration on the same batch
                   (measures.hessian.batch_size), tol and max_iter, each from the same
                   --hessian-seeds start vectors (PyHessian's torch.manual_seed(s) + randn per
                   parameter). Per method: CPU seconds (total and per start vector), Hessian-
                   vector products, eigenvalues and their largest relative error against a
                   tight Lanczos (tol 1e-8); the time ratio ours / PyHessian. The iteration
                   count of power iteration, and so its time, depends on the start vector (14
                   to 46 products on one checkpoint): compare totals over start vectors.
  LLC settings     at the same checkpoints, config.yaml's LLC (chains x (burnin + draws)) vs
                   each --llc-settings "burnin+draws" (same chains), over --llc-settings-seeds
                   seeds. Every chain runs for the longest setting once; a shorter setting is
                   its prefix, which is exactly the shorter chain (same streams), so the
                   comparison is paired. Per setting: mean, seed-to-seed s.d., mean s.d. over
                   chains (the estimator's own spread), the paired difference from the default
                   (+- s.e., and in units of the default's spread over chains), the share of
                   flagged estimates (negative or chains disagreeing) and the SGLD steps.

Writes the figures to benchmarks/out/bench_measures.json (--llc-only:
bench_measures_llc.json, --hessian-only: bench_measures_hessian.json, --llc-settings-only:
bench_measures_llc_settings.json) as well.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
os.environ.setdefault("TQDM_DISABLE", "1")                               # devinterp's per-chain progress bars


def cpu_time(fn, *a, **k):
    t, w = time.process_time(), time.perf_counter()
    out = fn(*a, **k)
    return out, time.process_time() - t, time.perf_counter() - w


def reference_llc(model, pool, n_answer, eps, gamma, n_beta, chains, draws, batch_size, seed):
    """Independent plain SGLD loop (no code shared with geoanatomy.measures.llc)."""
    import copy

    import torch

    from geoanatomy.model import answer_loss
    with torch.no_grad():
        init = float(answer_loss(model, pool, n_answer))
    vals = []
    for c in range(chains):
        m = copy.deepcopy(model)
        w0 = [p.detach().clone() for p in m.parameters()]
        g = torch.Generator().manual_seed(seed + 17 * c)
        losses = []
        for t in range(draws):
            idx = torch.randint(0, pool.shape[0], (batch_size,), generator=g)
            loss = answer_loss(m, pool[idx], n_answer)
            losses.append(float(loss))
            m.zero_grad()
            loss.backward()
            with torch.no_grad():
                for p, p0 in zip(m.parameters(), w0):
                    p -= eps / 2 * (n_beta * p.grad + gamma * (p - p0))
                    p += math.sqrt(eps) * torch.randn(p.shape, generator=g)
        vals.append(n_beta * (sum(losses) / len(losses) - init))
    return vals


def devinterp_llc(model, pool, n_answer, eps, gamma, n_beta, chains, draws, batch_size, seed, tmp):
    """devinterp 2.x llc() with our loss: per-sample answer CE broadcast over the sequence."""
    import torch.nn.functional as F
    from datasets import Dataset
    from devinterp.slt.llc import llc

    def loss_fn(m, input_ids):                                           # (B, S) -> (B, S-1)
        x, y = input_ids[:, :-1], input_ids[:, 1:]
        logits = m(x)[:, -n_answer:, :]
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y[:, -n_answer:].reshape(-1), reduction="none")
        per = ce.view(-1, n_answer).mean(1)                              # (B,)
        return per[:, None].expand(-1, x.shape[1])

    ds = Dataset.from_dict({"input_ids": pool.tolist()}).with_format("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = llc(model, ds, {}, lr=eps, n_beta=n_beta, localization=gamma, num_chains=chains, num_draws=draws,
                  num_burnin_steps=0, batch_size=batch_size, init_seed=seed, device="cpu",
                  num_init_loss_batches=pool.shape[0] // batch_size, output_path=str(tmp / "samples.zarr"),
                  loss_fn=loss_fn)
    return [float(v) for v in res["llc_per_chain"].values], float(res["init_loss"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", default="mod_L3", help="task_level (trained at nano and micro)")
    ap.add_argument("--steps", type=int, default=200, help="training steps of the benchmark runs")
    ap.add_argument("--sizes", default="nano,micro")
    ap.add_argument("--llc-chains", type=int, default=4)
    ap.add_argument("--llc-draws", type=int, default=50)
    ap.add_argument("--llc-seeds", type=int, default=5, help="independent repeats (data order + noise) per side")
    ap.add_argument("--llc-dvi-seeding", choices=("disjoint", "consecutive"), default="disjoint",
                    help="devinterp init_seed of repeat s: 100 + s*chains (independent) or s (shares noise streams)")
    ap.add_argument("--llc-only", action="store_true",
                    help="only the LLC comparison, at the first size (skips timings, probes and the Hessian check)")
    ap.add_argument("--hessian-only", action="store_true", help="only the Hessian comparison with PyHessian")
    ap.add_argument("--llc-settings-only", action="store_true", help="only the cheaper-LLC-settings check")
    ap.add_argument("--run-dir", default=None,
                    help="a trained nano run folder of --run (e.g. results/mod_L3_nano) for the PyHessian comparison "
                         "and the LLC settings check; default: train one here with config.yaml's schedule")
    ap.add_argument("--at-steps", default="22,1500", help="checkpoint steps of those two checks")
    ap.add_argument("--hessian-seeds", type=int, default=8, help="start vectors per method and step")
    ap.add_argument("--llc-settings", default="5+10", help="comma-separated burnin+draws settings to check")
    ap.add_argument("--llc-settings-seeds", type=int, default=16, help="seeds per checkpoint of the LLC settings check")
    args = ap.parse_args()

    from geoanatomy.runtime import limit_threads
    limit_threads(1)
    import torch

    from geoanatomy.checkpoints import list_checkpoints, load_weights
    from geoanatomy.config import load_config, run_spec
    from geoanatomy.schedule import checkpoint_steps
    from geoanatomy.stages.common import build
    from geoanatomy.schedule import measure_steps
    from geoanatomy.stages.measures import train_sample
    from geoanatomy.stages.train import run as train_run

    task, level = args.run.split("_")
    sizes = args.sizes.split(",")[:1] if args.llc_only else args.sizes.split(",")
    base = load_config(REPO / "config.yaml")
    out: dict = {"run": args.run, "steps": args.steps, "torch": torch.__version__, "threads": 1, "sizes": {}}
    tmp = Path(tempfile.mkdtemp(prefix="bench_measures_"))
    if args.hessian_only or args.llc_settings_only:
        print(f"# bench_measures: {args.run}_nano, 1 thread, torch {torch.__version__}")
        nano = _nano_run(args, tmp)
        if args.hessian_only:
            _hessian_vs_pyhessian(out, args, nano)
        if args.llc_settings_only:
            _llc_settings_check(out, args, nano)
        _write(out, {(True, False): "bench_measures_hessian.json", (False, True): "bench_measures_llc_settings.json",
                     (True, True): "bench_measures_nano.json"}[(args.hessian_only, args.llc_settings_only)])
        return
    print(f"# bench_measures: {args.run} at {sizes}, {args.steps} training steps, 1 thread, torch {torch.__version__}")

    # the default grid's checkpoint count and the default subset size
    tr = base["train"]
    n_ck = len(checkpoint_steps(tr["steps"], **tr["checkpoints"]))
    mc = base["measures"]
    # the fixed schedule: measures.n_points checkpoints of the run's n_ck
    n_sub = len(measure_steps(list(range(n_ck)), mc["n_points"]))

    for size in sizes:
        cfg = load_config(REPO / "config.yaml", overrides={"grid": [{"tasks": [task], "levels": [level], "sizes":
                                                                     [size]}],
                                                           "results_dir": str(tmp),
                                                           "allow_results_outside_workdir": True})
        cfg["train"]["steps"] = args.steps
        cfg["train"]["warmup"] = min(cfg["train"]["warmup"], args.steps // 5)
        cfg["train"]["checkpoints"] = {"n_log": 4, "log_end": 0.1, "n_uniform": 2}
        cfg.get("size_overrides", {}).pop(size, None)
        spec = run_spec(cfg, f"{args.run}_{size}")
        rd = tmp / spec.name
        _, t_train, _ = cpu_time(train_run, spec, rd, device="cpu", log=lambda *a, **k: None)
        model, data = build(spec, "cpu")
        step = list_checkpoints(rd / "checkpoints")[-1]
        load_weights(rd / "checkpoints" / f"step_{step:06d}.safetensors", model)
        na = data.spec.n_answer
        m = cfg["measures"]
        pools = {"grad_rank": torch.as_tensor(train_sample(data, m["grad_rank"]["n_samples"], "grad_rank")),
                 "hessian": torch.as_tensor(train_sample(data, m["hessian"]["batch_size"], "hessian")),
                 "llc": torch.as_tensor(train_sample(data, m["llc"]["n_data"], "llc"))}
        seeds = {"hessian": 1, "llc": 2}
        if args.llc_only:
            out["sizes"][size] = {"n_params": model.n_params(), "checkpoint_step": step, "train_cpu_s": t_train}
            print(f"\n## {size} ({model.n_params():,} parameters), checkpoint step {step} (--llc-only)")
        else:
            _timings(out, args, size, model, data, pools, na, m, seeds, cfg, t_train, step, n_sub, n_ck)
        if size != sizes[0]:
            continue
        if not args.llc_only:
            _hessian_check(out, size, model, pools, na, m)
        _llc_check(out, args, size, model, pools, na, m, tmp)
    if not args.llc_only:
        nano = _nano_run(args, tmp)
        _hessian_vs_pyhessian(out, args, nano)
        _llc_settings_check(out, args, nano)
    _write(out, "bench_measures_llc.json" if args.llc_only else "bench_measures.json")


def _write(out: dict, name: str) -> None:
    od = REPO / "benchmarks" / "out"
    od.mkdir(parents=True, exist_ok=True)
    of = od / name
    of.write_text(json.dumps(out, indent=2, default=float) + "\n")
    print(f"\nwritten {of}")


def _timings(out, args, size, model, data, pools, na, m, seeds, cfg, t_train, step, n_sub, n_ck):
    """CPU seconds per checkpoint of each measure and of the probes; projected per-run cost."""
    import torch

    from geoanatomy.stages.measures import measure_checkpoint
    from geoanatomy.stages.probes import probe_checkpoint, split_indices
    # one-off costs: the torch.func/dynamo import of the first vmap call
    tim: dict = {}
    _, t_first, _ = cpu_time(measure_checkpoint, model, pools, na, m, seeds, ("grad_rank",), tim)
    tim = {}
    measure_checkpoint(model, pools, na, m, seeds, ("grad_rank", "hessian", "llc"), tim)
    p = cfg["probes"]
    seq = torch.as_tensor(data.eval_set(p["n_samples"]))
    trn, tst = split_indices(p["n_samples"], p["test_frac"], 0)
    probe_checkpoint(model, seq, data.spec.first_answer_pred_pos, na, trn, tst, p["positions"], p["C"],
                     p["max_iter"], p["standardize"])                 # warm-up (sklearn import)
    _, t_probe, _ = cpu_time(probe_checkpoint, model, seq, data.spec.first_answer_pred_pos, na, trn, tst,
                             p["positions"], p["C"], p["max_iter"], p["standardize"])
    per_ck = sum(tim.values())
    row = {"n_params": model.n_params(), "checkpoint_step": step, "train_cpu_s": t_train,
           "cpu_s_per_checkpoint": {**tim, "probes_all_layers": t_probe},
           "grad_rank_first_call_cpu_s": t_first,
           "projected_run_cpu_s": {"measures": n_sub * per_ck + max(0.0, t_first - tim["grad_rank"]),
                                   "probes": n_ck * t_probe, "checkpoints_measured": n_sub,
                                   "checkpoints_probed": n_ck}}
    out["sizes"][size] = row
    print(f"\n## {size} ({model.n_params():,} parameters), checkpoint step {step}; CPU-s per checkpoint:")
    for k, v in row["cpu_s_per_checkpoint"].items():
        print(f"  {k:<18} {v:7.3f}")
    print(f"  (first grad_rank call in this process: {t_first:.2f} CPU-s, incl. any one-off torch.func imports)")
    pr = row["projected_run_cpu_s"]
    print(f"  projected per run: measures {pr['measures']:.1f} CPU-s on {n_sub} checkpoints, "
          f"probes {pr['probes']:.1f} CPU-s on {n_ck} checkpoints -> {pr['measures'] + pr['probes']:.1f} CPU-s "
          f"(training this {args.steps}-step run: {t_train:.1f} CPU-s)")


def _hessian_method(h: dict) -> str:
    """Our Hessian method: the config's ``measures.hessian.method``, Lanczos where it has none."""
    return h.get("method", "lanczos")


def _hessian_check(out, size, model, pools, na, m):
    """Hessian: ours (graph once) vs plain double backward (graph every iteration)."""
    from geoanatomy.measures.hessian import hessian_top
    h = m["hessian"]
    meth = _hessian_method(h)
    ours, t_o, _ = cpu_time(hessian_top, model, pools["hessian"], na, h["max_iter"], h["tol"], 5, method=meth)
    plain, t_p, _ = cpu_time(hessian_top, model, pools["hessian"], na, h["max_iter"], h["tol"], 5, plain=True,
                             method=meth)
    out["hessian_vs_plain"] = {"ours": ours["value"], "plain": plain["value"], "iterations": [ours["iterations"],
                               plain["iterations"]], "time_ratio": t_o / t_p,
                               "rel_diff": abs(ours["value"] - plain["value"]) / abs(plain["value"]),
                               "batch_size": h["batch_size"], "tol": h["tol"], "max_iter": h["max_iter"],
                               "method": meth}
    hv = out["hessian_vs_plain"]
    print(f"\n## Hessian top eigenvalue ({size}, {meth}, batch {h['batch_size']}, tol {h['tol']}, "
          f"max_iter {h['max_iter']})")
    print(f"  ours {ours['value']:.6g} ({ours['iterations']} it, {t_o:.2f} CPU-s)   plain double backward "
          f"{plain['value']:.6g} ({plain['iterations']} it, {t_p:.2f} CPU-s)")
    print(f"  time ratio ours/plain {hv['time_ratio']:.2f}   relative difference {hv['rel_diff']:.2e}")


def _nano_run(args, tmp):
    """(spec, config, run folder, training CPU-s) of the nano run of --run with config.yaml's
    schedule: --run-dir, or trained here."""
    from geoanatomy.config import load_config, run_spec
    from geoanatomy.stages.train import run as train_run
    task, level = args.run.split("_")
    cfg = load_config(REPO / "config.yaml", overrides={"grid": [{"tasks": [task], "levels": [level], "sizes":
                                                                 ["nano"]}],
                                                       "results_dir": str(tmp), "allow_results_outside_workdir": True})
    spec = run_spec(cfg, f"{args.run}_nano")
    if args.run_dir:
        return spec, cfg, Path(args.run_dir), None
    rd = tmp / "full_schedule" / spec.name
    _, t_train, _ = cpu_time(train_run, spec, rd, device="cpu", log=lambda *a, **k: None)
    return spec, cfg, rd, t_train


def _at_steps(args, rd):
    """The checkpoint steps --at-steps, each checked to exist in run folder rd."""
    from geoanatomy.checkpoints import list_checkpoints
    steps = [int(x) for x in args.at_steps.split(",")]
    have = list_checkpoints(rd / "checkpoints")
    missing = [s for s in steps if s not in have]
    if missing:
        raise SystemExit(f"{rd}: no checkpoint at steps {missing} (has {have[:8]} .. {have[-3:]})")
    return steps


def _hessian_vs_pyhessian(out, args, nano):
    """Ours vs PyHessian 0.1 (and our power iteration) at --at-steps of a nano run (module doc)."""
    import numpy as np

    from geoanatomy.checkpoints import load_weights
    from geoanatomy.measures.hessian import hessian_top, pyhessian_top
    from geoanatomy.stages.common import build
    from geoanatomy.stages.measures import train_sample
    spec, cfg, rd, t_train = nano
    h = cfg["measures"]["hessian"]
    meth, tol, max_iter, B = _hessian_method(h), float(h["tol"]), int(h["max_iter"]), int(h["batch_size"])
    steps = _at_steps(args, rd)
    model, data = build(spec, "cpu")
    na = data.spec.n_answer
    seq = __import__("torch").as_tensor(train_sample(data, B, "hessian"))
    seeds = list(range(1, args.hessian_seeds + 1))
    fns = {f"ours ({meth})": lambda s: hessian_top(model, seq, na, max_iter, tol, s, method=meth),
           "PyHessian 0.1": lambda s: pyhessian_top(model, seq, na, max_iter, tol, s),
           "ours (power)": lambda s: hessian_top(model, seq, na, max_iter, tol, s, method="power")}
    names = list(fns)
    res = {"run": str(rd), "train_cpu_s": t_train, "method": meth, "tol": tol, "max_iter": max_iter,
           "batch_size": B, "seeds": seeds, "steps": {}}
    print(f"\n## Hessian: ours vs PyHessian 0.1 ({spec.name}, {rd}); batch {B}, tol {tol}, max_iter {max_iter}; "
          f"{len(seeds)} start vectors (torch seeds {seeds[0]}..{seeds[-1]}), the same for every method")
    for step in steps:
        load_weights(rd / "checkpoints" / f"step_{step:06d}.safetensors", model)
        ref = hessian_top(model, seq, na, 1000, 1e-8, 0, method="lanczos")
        runs = {n: [] for n in names}
        for i, s in enumerate(seeds):                                    # rotate the order: no method always first
            for n in names[i % 3:] + names[:i % 3]:
                r, t, _ = cpu_time(fns[n], s)
                runs[n].append((t, r["iterations"], r["value"]))
        row = {"reference": ref["value"], "reference_iterations": ref["iterations"]}
        for n in names:
            t, it, v = (np.array(x, dtype=float) for x in zip(*runs[n]))
            row[n] = {"cpu_s": t.tolist(), "cpu_s_total": float(t.sum()), "products": it.astype(int).tolist(),
                      "values": v.tolist(), "max_rel_error": float(np.max(np.abs(v - ref["value"])) /
                                                                   abs(ref["value"]))}
        ours, ph = row[names[0]], row[names[1]]
        row["time_ratio_ours_pyhessian"] = ours["cpu_s_total"] / ph["cpu_s_total"]
        res["steps"][str(step)] = row
        print(f"  step {step}: top eigenvalue {ref['value']:.6g} (Lanczos, tol 1e-8, {ref['iterations']} products)")
        for n in names:
            x = row[n]
            print(f"    {n:<16} {x['cpu_s_total']:6.2f} CPU-s ({x['cpu_s_total'] / len(seeds):.3f} per start)  "
                  f"products {np.mean(x['products']):5.1f} [{min(x['products'])}..{max(x['products'])}]  "
                  f"eigenvalue {np.mean(x['values']):.6g} [{min(x['values']):.6g}..{max(x['values']):.6g}]  "
                  f"largest rel. error {x['max_rel_error']:.1e}")
        print(f"    time ratio ours/PyHessian {row['time_ratio_ours_pyhessian']:.2f}")
    out["hessian_vs_pyhessian"] = res


def _mean_se(x):
    import numpy as np
    x = np.asarray(x, dtype=float)
    return float(x.mean()), (float(x.std(ddof=1) / math.sqrt(len(x))) if len(x) > 1 else float("nan"))


def _llc_check(out, args, size, model, pools, na, m, tmp):
    """LLC: ours vs devinterp (or the plain reference) on the same checkpoint, pool and settings.

    (1) independent repeats: each side with its own streams; chains share their minibatch
    order (in both), so the spread over chains misses the data-order variance: compare means
    over --llc-seeds repeats (each: new order and noise). (2) paired: ours with devinterp's
    streams (rng="devinterp") at the same init_seed: per-chain differences.
    """
    import numpy as np

    from geoanatomy.measures.llc import llc_at_checkpoint
    L = dict(m["llc"])
    kw = dict(eps=L["eps"], gamma=L["gamma"], n_beta=L["n_beta"], chains=args.llc_chains, draws=args.llc_draws,
              batch_size=L["batch_size"])
    pool = pools["llc"]
    # devinterp seeds chain c of init_seed s with torch.manual_seed(s + c): consecutive init_seeds
    # share noise streams. Disjoint: repeat s uses init_seeds 100 + s*chains .. 100 + s*chains + chains - 1.
    dvi_seed = ((lambda s: 100 + s * args.llc_chains) if args.llc_dvi_seeding == "disjoint" else (lambda s: s))
    try:
        from importlib.metadata import version

        import devinterp  # noqa: F401
        have_dvi = True
        ref_name = f"devinterp {version('devinterp')} llc()"
        ref_fn = lambda s: devinterp_llc(model, pool, na, seed=dvi_seed(s), tmp=tmp / f"s{s}", **kw)
    except ImportError:
        have_dvi = False
        ref_name = "plain-loop reference (devinterp not installed)"
        ref_fn = lambda s: (reference_llc(model, pool, na, seed=1000 + s, **kw), None)
    ours_s, ref_s, t_m, t_t, their_init, paired = [], [], 0.0, 0.0, None, []
    for s in range(args.llc_seeds):
        mine, dt, _ = cpu_time(llc_at_checkpoint, model, pool, na, burnin=0, seed=s, **kw)
        (theirs, their_init), dt2, _ = cpu_time(ref_fn, s)
        ours_s.append(float(np.mean(mine["per_chain"])))
        ref_s.append(float(np.mean(theirs)))
        t_m, t_t = t_m + dt, t_t + dt2
        if have_dvi:                                                     # same streams as that devinterp run
            twin = llc_at_checkpoint(model, pool, na, burnin=0, seed=dvi_seed(s), rng="devinterp", **kw)
            paired.append(float(np.max(np.abs(np.array(twin["per_chain"]) - np.array(theirs)))))
    a, b = np.array(ours_s), np.array(ref_s)
    k = len(a)
    (ma, sa), (mb, sb) = _mean_se(a), _mean_se(b)
    se = math.sqrt(sa ** 2 + sb ** 2)
    out["llc_vs_reference"] = {"reference": ref_name, "ours": ma, "ours_se": sa, "ours_per_seed": a.tolist(),
                               "reference_value": mb, "reference_se": sb, "reference_per_seed": b.tolist(),
                               "difference": ma - mb, "difference_se": se,
                               "difference_in_se": (ma - mb) / se if se > 0 else None,
                               "devinterp_init_seeds": [dvi_seed(s) for s in range(k)] if have_dvi else None,
                               "devinterp_seeding": args.llc_dvi_seeding if have_dvi else None,
                               "paired_max_abs_per_chain_diff": max(paired) if paired else None,
                               "time_ratio": t_m / t_t, "ours_cpu_s": t_m, "reference_cpu_s": t_t,
                               "init_loss": [mine["init_loss"], their_init],
                               "settings": {**kw, "burnin": 0, "seeds": k, "n_data": int(pool.shape[0])}}
    lv = out["llc_vs_reference"]
    print(f"\n## LLC ({size}): ours vs {ref_name}; eps {kw['eps']}, gamma {kw['gamma']}, n_beta {kw['n_beta']}, "
          f"{kw['chains']} chains x {kw['draws']} draws, batch {kw['batch_size']}, pool {pool.shape[0]}, "
          f"{k} {'independent ' if not have_dvi or args.llc_dvi_seeding == 'disjoint' else ''}repeats each")
    print(f"  ours {ma:.4f} +- {sa:.4f} (mean +- s.e. over repeats; seed means {np.round(a, 3).tolist()}), "
          f"{t_m:.2f} CPU-s")
    extra = (f"; init_seeds {lv['devinterp_init_seeds']} ({args.llc_dvi_seeding})" if have_dvi else "")
    print(f"  ref  {mb:.4f} +- {sb:.4f} (seed means {np.round(b, 3).tolist()}{extra}), {t_t:.2f} CPU-s")
    print(f"  difference {ma - mb:+.4f} +- {se:.4f} = {lv['difference_in_se']:+.2f} standard errors; "
          f"time ratio ours/reference {lv['time_ratio']:.2f}; init loss ours {mine['init_loss']:.7g} "
          f"ref {their_init if their_init is None else f'{their_init:.7g}'}")
    if paired:
        print(f"  paired (ours with rng='devinterp': devinterp's noise and minibatch streams, same init_seeds): "
              f"largest per-chain |ours - devinterp| {max(paired):.2e}")


def _llc_settings_check(out, args, nano):
    """config.yaml's LLC vs cheaper burnin+draws settings, paired by prefix (module doc)."""
    import numpy as np
    import torch

    from geoanatomy.checkpoints import load_weights
    from geoanatomy.measures.llc import llc_at_checkpoint
    from geoanatomy.stages.common import build
    from geoanatomy.stages.measures import train_sample
    spec, cfg, rd, _ = nano
    L = cfg["measures"]["llc"]
    default = (int(L["burnin"]), int(L["draws"]))
    settings = {f"{b}+{d}": (b, d) for b, d in
                [default] + [tuple(int(x) for x in t.split("+")) for t in args.llc_settings.split(",") if t]}
    longest = max(b + d for b, d in settings.values())
    steps = _at_steps(args, rd)
    model, data = build(spec, "cpu")
    na = data.spec.n_answer
    pool = torch.as_tensor(train_sample(data, int(L["n_data"]), "llc"))
    kw = dict(eps=L["eps"], gamma=L["gamma"], n_beta=L["n_beta"], chains=int(L["chains"]),
              batch_size=int(L["batch_size"]),
              disagree_threshold=float(L["disagree_threshold"]))
    seeds = [1000 + s for s in range(args.llc_settings_seeds)]
    res = {"run": str(rd), "default": f"{default[0]}+{default[1]}", "chains": kw["chains"], "seeds": seeds, "steps": {}}
    print(f"\n## LLC settings ({spec.name}): {kw['chains']} chains x (burnin + draws), default "
          f"{default[0]}+{default[1]}, "
          f"vs {list(settings)[1:]}; {len(seeds)} seeds; paired (a shorter chain is the longer one's prefix)")
    for step in steps:
        load_weights(rd / "checkpoints" / f"step_{step:06d}.safetensors", model)
        runs = [llc_at_checkpoint(model, pool, na, burnin=0, draws=longest, seed=s, **kw) for s in seeds]
        trace = np.stack([r["loss_trace"] for r in runs])                # (seeds, chains, longest)
        init, nb = runs[0]["init_loss"], runs[0]["n_beta"]
        row, base = {}, None
        print(f"  step {step} (loss at the checkpoint {init:.4g}):")
        for name, (b, d) in settings.items():
            per_chain = nb * (trace[:, :, b:b + d].mean(2) - init)     # (seeds, chains)
            est, spread = per_chain.mean(1), per_chain.std(1)            # spread: population s.d. over chains
            flagged = (est < 0) | ((spread > kw["disagree_threshold"] * np.abs(est)) if kw["chains"] >= 2 else False)
            base = (est, spread) if base is None else base
            diff = est - base[0]
            x = {"sgld_steps": kw["chains"] * (b + d), "mean": float(est.mean()), "seed_sd": float(est.std(ddof=1)),
                 "chain_sd": float(spread.mean()), "diff": float(diff.mean()),
                 "diff_se": float(diff.std(ddof=1) / math.sqrt(len(diff))),
                 "diff_in_default_chain_sd": float(diff.mean() / base[1].mean()), "flagged": float(np.mean(flagged))}
            row[name] = x
            print(f"    {name:<6} {x['sgld_steps']:3d} SGLD steps  llc {x['mean']:.4f} (seed s.d. {x['seed_sd']:.4f}, "
                  f"chain s.d. {x['chain_sd']:.4f})  vs default {x['diff']:+.4f} +- {x['diff_se']:.4f} "
                  f"= {x['diff_in_default_chain_sd']:+.2f} default chain s.d.  flagged {x['flagged']:.2f}")
        res["steps"][str(step)] = row
    out["llc_settings"] = res


if __name__ == "__main__":
    main()
