"""The GPU path checked in one command, before the paper grid goes to a cluster.

    python tools/device_check.py                  # CUDA when torch sees a GPU, else the CPU
    python tools/device_check.py --steps 300 --sizes nano small --out device_check.json
    python tools/device_check.py --quick          # 30 steps at nano (what the test suite runs)

For each size (default nano and small, copy L1, ``--steps`` optimizer steps, 9 checkpoints):

1. **Training on the device, twice with the same seed.** The two runs' metrics tables are
   compared value by value: identical, or the largest difference (with
   ``torch.use_deterministic_algorithms`` as the config leaves it: off). Steps per second are
   timed and set beside the cost model's assumption (``throughput.step_seconds``; for a GPU,
   the assumed A100-class rate with its launch floor per step).
2. **Measurement on the device against the CPU, on the same weights.** The device-trained
   checkpoints are measured by the metrics, measures (gradient ranks, Hessian, LLC) and probes
   stages on the device and again on the CPU, so only the measurement's arithmetic differs.
   Tolerances, each with its reason:

   accuracy         |diff| <= 1/n: one held-out sequence may flip where two logits are
                    within float32 rounding of each other
   loss, RankMe     relative 1e-4: float32 forward passes (cuBLAS and MKL order sums
   (both), share    differently: ~1e-6 relative per matmul, a few layers deep), float64
                    SVD of the same matrix after
   gradient ranks   relative 1e-3: per-sample gradients in float32, eigenvalues of a Gram
                    matrix whose small eigenvalues carry the rounding
   Hessian top      relative 1e-2: power iteration to its tolerance, from the same start
   LLC              relative 0.25 or 3 standard errors of the chain mean: SGLD noise comes
                    from the device's random stream (CUDA and CPU generators differ), so the
                    LLC agrees in distribution, not in digits
   probes           |diff| <= 0.05 accuracy: logistic regression on features that differ
                    in the last bits, on a few dozen test sequences

3. **Packs** (``--pack``, on by default on a GPU): K runs of one size trained in one process
   (``stages.train_pack``: vmap over the runs' stacked parameters) for K = 1, 8, 32, 128 at
   nano, micro and small (``--pack-sizes``, ``--pack-k``), beside one run trained alone: steps
   per second and runs per device-hour at the grid's 1,500 steps, and the gain over runs
   trained one at a time. A K that does not fit the device's memory is recorded as such.
4. **The record**: device name, memory, driver, CUDA and cuDNN versions, torch build, TF32
   flags, each comparison with its tolerance and pass/fail, timings; one JSON (``--out``)
   and a printed table. Without a GPU the same code runs on the CPU (the comparison is then
   CPU against CPU and must be exact) and says that no GPU was found. Exit status 1 when a
   comparison fails.
"""
from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

TOL = {  # measure: (kind, tolerance); kinds: abs_n (1/n), rel, abs
    "accuracy": ("abs_n", 1.0), "accuracy_norm": ("abs_n", 1.0), "loss": ("rel", 1e-4), "rankme": ("rel", 1e-4),
    "mean_share": ("rel", 1e-4), "grad_erank": ("rel", 1e-3), "grad_cov_erank": ("rel", 1e-3),
    "hessian_top": ("rel", 1e-2), "llc": ("llc", 0.25), "probe_accuracy": ("abs", 0.05),
    "probe_accuracy_norm": ("abs", 0.1), "probe_chance": ("abs", 1e-9),
}


def device_info(device: str) -> dict:
    import torch
    info = {"device": device, "torch": torch.__version__, "cuda_build": torch.version.cuda,
            "python": platform.python_version(), "cpu": platform.processor() or platform.machine()}
    if device.startswith("cuda"):
        p = torch.cuda.get_device_properties(0)
        info.update(gpu=p.name, gpu_memory_gib=round(p.total_memory / 2**30, 1),
                    capability=f"{p.major}.{p.minor}", cudnn=torch.backends.cudnn.version(),
                    tf32_matmul=torch.backends.cuda.matmul.allow_tf32, tf32_cudnn=torch.backends.cudnn.allow_tf32)
        try:
            info["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                            capture_output=True, text=True, timeout=20).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            info["driver"] = None
    return info


def config(size: str, steps: int, results: Path) -> dict:
    from geoanatomy.config import resolve
    return resolve({
        "grid": [{"tasks": ["copy"], "levels": ["L1"], "sizes": [size]}], "results_dir": str(results),
        "train": {"steps": steps, "warmup": max(2, steps // 20),
                  "checkpoints": {"n_log": 4, "log_end": 0.2, "n_uniform": 5}},
        "eval": {"n_samples": 64},
        "measures": {"n_points": 3, "grad_rank": {"n_samples": 8}, "hessian": {"batch_size": 16, "max_iter": 20},
                     "llc": {"chains": 2, "draws": 20, "burnin": 5, "batch_size": 16, "n_data": 64}},
        "probes": {"n_samples": 96}})


def measure_all(spec, cfg, d: Path, device: str, quiet) -> None:
    from geoanatomy.stages.measures import run as measures_run
    from geoanatomy.stages.metrics import run as metrics_run
    from geoanatomy.stages.probes import run as probes_run
    metrics_run(spec, d, device=device, log=quiet)
    measures_run(spec, d, cfg["measures"], device=device, log=quiet)
    probes_run(spec, d, cfg["probes"], device=device, log=quiet)


def _key_cols():
    return ["step", "measure", "layer", "position", "variant"]


def compare(a_dir: Path, b_dir: Path, n_eval: int) -> list[dict]:
    """Per measure: the largest difference between two run folders' tables, its tolerance, pass."""
    import numpy as np
    import pandas as pd

    from geoanatomy.table import read_table
    out = []
    for name in ("metrics", "measures", "probes"):
        a, b = read_table(a_dir / f"{name}.csv"), read_table(b_dir / f"{name}.csv")
        m = a.merge(b, on=_key_cols(), suffixes=("_a", "_b"))
        for measure, g in m.groupby("measure", sort=False):
            if measure not in TOL:
                continue
            kind, tol = TOL[measure]
            x, y = g["value_a"].to_numpy(float), g["value_b"].to_numpy(float)
            ok_nan = np.isnan(x) == np.isnan(y)
            x, y = np.where(np.isnan(x), 0, x), np.where(np.isnan(y), 0, y)
            diff = np.abs(x - y)
            if kind == "rel":
                err = diff / np.maximum(np.abs(x), 1e-12)
                ok = err <= tol
            elif kind == "abs_n":
                err, tol = diff, tol / n_eval
                ok = err <= tol + 1e-12
            elif kind == "llc":
                se = g["settings_a"].map(lambda s: json.loads(s).get("llc_std", json.loads(s).get("std", 0.0)))
                se = pd.to_numeric(se, errors="coerce").fillna(0.0).to_numpy(float)
                err = diff / np.maximum(np.abs(x), 1e-12)
                ok = (err <= tol) | (diff <= 3 * se)
            else:
                err = diff
                ok = err <= tol
            out.append({"table": name, "measure": measure, "rows": int(len(g)), "max_error": float(err.max()),
                        "error_kind": {"rel": "relative", "abs_n": "absolute", "llc": "relative",
                                       "abs": "absolute"}[kind],
                        "tolerance": float(tol), "pass": bool(ok.all() and ok_nan.all())})
    return out


def check_size(size: str, steps: int, device: str, work: Path, quiet) -> dict:
    from geoanatomy.config import run_spec
    from geoanatomy.stages.train import run as train_run
    from geoanatomy.table import read_table
    from geoanatomy.cost import run_shape, step_seconds
    cfg = config(size, steps, work)
    spec = run_spec(cfg, f"copy_L1_{size}")
    runs = {}
    for tag in ("a", "b"):                                  # the same seed twice on the device
        d = work / tag / spec.name
        t0 = time.perf_counter()
        train_run(spec, d, device=device, log=quiet)
        runs[tag] = {"dir": d, "train_s": time.perf_counter() - t0}
        from geoanatomy.stages.metrics import run as metrics_run
        metrics_run(spec, d, device=device, log=quiet)
    ta, tb = read_table(runs["a"]["dir"] / "metrics.csv"), read_table(runs["b"]["dir"] / "metrics.csv")
    m = ta.merge(tb, on=_key_cols(), suffixes=("_a", "_b"))
    rerun_diff = float((m["value_a"] - m["value_b"]).abs().max())
    det_diff = None
    if rerun_diff != 0.0 and device.startswith("cuda"):     # again with deterministic algorithms on
        import os

        import torch
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)
        try:
            from geoanatomy.stages.metrics import run as metrics_run
            for tag in ("c", "d"):
                train_run(spec, work / tag / spec.name, device=device, log=quiet)
                metrics_run(spec, work / tag / spec.name, device=device, log=quiet)
            tc, td = (read_table(work / t / spec.name / "metrics.csv") for t in ("c", "d"))
            md = tc.merge(td, on=_key_cols(), suffixes=("_a", "_b"))
            det_diff = float((md["value_a"] - md["value_b"]).abs().max())
        finally:
            torch.use_deterministic_algorithms(False)
    # the device-trained weights measured on the device and on the CPU
    ref = work / "cpu" / spec.name
    shutil.copytree(runs["a"]["dir"], ref)
    t0 = time.perf_counter()
    measure_all(spec, cfg, runs["a"]["dir"], device, quiet)
    dev_measure_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    measure_all(spec, cfg, ref, "cpu", quiet)
    cpu_measure_s = time.perf_counter() - t0
    comps = compare(runs["a"]["dir"], ref, int(cfg["eval"]["n_samples"]))
    if not device.startswith("cuda"):          # CPU against CPU: the same arithmetic, so exact
        for c in comps:
            c.update(tolerance=0.0, error_kind="exact (CPU against CPU)", **{"pass": c["max_error"] == 0.0})
    acc = ta[(ta.measure == "accuracy") & (ta.position == "answer")].sort_values("step")
    per_step = min(r["train_s"] for r in runs.values()) / steps
    kind = "gpu" if device.startswith("cuda") else "cpu"
    shape = run_shape(cfg, spec.name)
    model = step_seconds(size, shape["batch"], shape["positions"], kind)
    return {"size": size, "steps": steps, "train_s": [round(r["train_s"], 2) for r in runs.values()],
            "steps_per_s": round(1 / per_step, 1), "cost_model_steps_per_s": round(1 / model, 1),
            "measured_over_model": round(model / per_step, 2),
            "rerun_identical": rerun_diff == 0.0, "rerun_max_abs_diff": rerun_diff,
            "rerun_max_abs_diff_deterministic": det_diff,
            "final_accuracy": float(acc["value"].iloc[-1]) if len(acc) else None,
            "measure_s": {"device": round(dev_measure_s, 2), "cpu": round(cpu_measure_s, 2)},
            "comparisons": comps, "pass": all(c["pass"] for c in comps)}


def pack_throughput(size: str, ks, steps: int, device: str, work: Path, quiet) -> list[dict]:
    """Runs per device-hour of packs of K runs of ``size`` (copy L1, seeds 0..K-1, ``steps``
    steps), and of one run trained alone, at the grid's 1,500 steps per run."""
    import dataclasses

    import torch

    from geoanatomy.config import run_spec
    from geoanatomy.stages import train, train_pack
    full = 1500
    spec = run_spec(config(size, steps, work), f"copy_L1_{size}")
    t0 = time.perf_counter()
    train.run(spec, work / "alone" / spec.name, device=device, log=quiet)
    alone = (time.perf_counter() - t0) / steps
    rows = [{"size": size, "k": 1, "trainer": "single", "steps": steps, "seconds_per_step": round(alone, 5),
             "runs_per_hour": round(3600 / (alone * full), 1)}]
    for k in ks:
        specs = [dataclasses.replace(spec, seed=i) for i in range(k)]
        dirs = [work / f"pack{k}" / f"{spec.name}_s{i}" for i in range(k)]
        try:
            t0 = time.perf_counter()
            train_pack.run(specs, dirs, device=device, log=quiet)
            per = (time.perf_counter() - t0) / steps
            rows.append({"size": size, "k": k, "trainer": "packed", "steps": steps,
                         "seconds_per_step": round(per, 5), "runs_per_hour": round(3600 * k / (per * full), 1),
                         "gain_over_alone": round(alone * k / per, 2)})
        except torch.OutOfMemoryError as e:
            rows.append({"size": size, "k": k, "trainer": "packed", "steps": steps, "out_of_memory": str(e)[:200]})
        finally:
            shutil.rmtree(work / f"pack{k}", ignore_errors=True)
            if device.startswith("cuda"):
                torch.cuda.empty_cache()
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="auto", help="auto (CUDA when available), cuda, cuda:N or cpu")
    ap.add_argument("--steps", type=int, default=300, help="optimizer steps per training run")
    ap.add_argument("--sizes", nargs="+", default=["nano", "small"], help="model sizes")
    ap.add_argument("--quick", action="store_true", help="30 steps at nano only (the test suite's run)")
    ap.add_argument("--out", default="device_check.json", help="the JSON record")
    ap.add_argument("--pack", action=argparse.BooleanOptionalAction, default=None,
                    help="time packed training (default: on a GPU only)")
    ap.add_argument("--pack-sizes", nargs="+", default=["nano", "micro", "small"])
    ap.add_argument("--pack-k", nargs="+", type=int, default=[1, 8, 32, 128])
    ap.add_argument("--pack-steps", type=int, default=100, help="steps per pack timing")
    a = ap.parse_args(argv)
    import torch

    from geoanatomy.runtime import pick_device
    if a.quick:
        a.steps, a.sizes = 30, ["nano"]
    device = pick_device(a.device)
    gpu = device.startswith("cuda")
    torch.set_num_threads(1 if not gpu else torch.get_num_threads())
    quiet = lambda *x, **k: None  # noqa: E731
    work = Path(tempfile.mkdtemp(prefix="device_check_"))
    t_all = time.perf_counter()
    try:
        rec = {"info": device_info(device), "gpu_found": gpu,
               "note": None if gpu else "no GPU found: the check ran on the CPU (device and reference are the same "
                                        "kind, so every comparison must be exact)",
               "sizes": [check_size(s, a.steps, device, work / s, quiet) for s in a.sizes]}
        if a.pack if a.pack is not None else gpu:
            rec["pack"] = [r for s in a.pack_sizes
                           for r in pack_throughput(s, a.pack_k, a.pack_steps, device, work / f"pack_{s}", quiet)]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rec["wall_s"] = round(time.perf_counter() - t_all, 1)
    rec["pass"] = all(s["pass"] for s in rec["sizes"])
    Path(a.out).write_text(json.dumps(rec, indent=1))
    i = rec["info"]
    print(f"device check on {device} ({i.get('gpu', i['cpu'])}; torch {i['torch']}, CUDA {i['cuda_build']}, "
          f"driver {i.get('driver')}): {'PASS' if rec['pass'] else 'FAIL'} in {rec['wall_s']} s")
    if not gpu:
        print(rec["note"])
    for s in rec["sizes"]:
        print(f"\n{s['size']}: {s['steps']} steps, {s['steps_per_s']} steps/s (cost model "
              f"{s['cost_model_steps_per_s']}, "
              f"measured/model {s['measured_over_model']}); same seed twice: "
              f"{'identical' if s['rerun_identical'] else 'max |diff| %.3g' % s['rerun_max_abs_diff']}; "
              f"measuring {s['measure_s']['device']} s on the device, {s['measure_s']['cpu']} s on the CPU")
        print(f"  {'table':<9} {'measure':<20} {'rows':>5} {'max error':>10} {'tolerance':>10}  result")
        for c in s["comparisons"]:
            print(f"  {c['table']:<9} {c['measure']:<20} {c['rows']:>5} {c['max_error']:>10.2e} "
                  f"{c['tolerance']:>10.2e}  {'pass' if c['pass'] else 'FAIL'} ({c['error_kind']})")
    if rec.get("pack"):
        print(f"\npacked training ({a.pack_steps} steps timed; runs per device-hour at 1,500 steps per run):")
        for r in rec["pack"]:
            print(f"  {r['size']:<6} K={r['k']:<4} {r['trainer']:<7} " + (
                "out of memory" if "out_of_memory" in r else
                f"{r['seconds_per_step'] * 1e3:8.2f} ms/step  {r['runs_per_hour']:9.1f} runs/h"
                + (f"  x{r['gain_over_alone']} over alone" if "gain_over_alone" in r else "")))
    print(f"\nwrote {a.out}")
    return 0 if rec["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
