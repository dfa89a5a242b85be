"""Packed training on a CPU: runs per CPU-hour of a K-run pack against the same K runs trained
one after another, and the fixed cost of starting a stage's job, in one process on one machine.

    OMP_NUM_THREADS=1 python benchmarks/bench_pack.py                  # nano and micro, K 1 4 8 (~10 min)
    python benchmarks/bench_pack.py --sizes nano --k 8 --threads 1 2 --steps 100

Runs: the default grid's runs of the size (config.yaml; more seeds of them when K exceeds the
grid's), their first ``--steps`` steps with their own checkpoint schedule, trained alone
(``stages.train.run``) and as one pack (``stages.train_pack.run``), with ``--threads`` torch
threads. Prints CPU seconds (``time.process_time``) and wall seconds per arm, runs per
CPU-hour and per wall-hour projected to each run's full 1,500 steps, and the pack's ratio to
the runs alone. The fixed cost: the wall seconds of a fresh interpreter importing each stage's
module (``python -c "import geoanatomy.stages.X"``, the median of 3), what every job pays before
its first step.
"""
from __future__ import annotations

import argparse
import dataclasses
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

STAGES = ("train", "metrics", "measures", "probes", "events", "prune")


def grid_specs(size: str, k: int, steps: int):
    import yaml

    from geoanatomy.config import resolve, run_names, run_spec
    cfg = resolve(yaml.safe_load((REPO / "config.yaml").read_text()))
    base = [run_spec(cfg, n) for n in run_names(cfg) if n.split("_")[2] == size]
    out = []
    while len(out) < k:                                        # further seeds of the grid's runs
        extra = len(out) // len(base)
        out += [dataclasses.replace(s, seed=s.seed + 100 * extra) if extra else s for s in base]
    out = out[:k]
    full = int(out[0].train["steps"])
    return [dataclasses.replace(s, train={**s.train, "steps": steps}) for s in out], full


def time_arms(size: str, k: int, steps: int, threads: int) -> dict:
    import torch

    from geoanatomy.stages import train, train_pack
    torch.set_num_threads(threads)
    specs, full = grid_specs(size, k, steps)
    quiet = lambda m: None  # noqa: E731
    out = {}
    with tempfile.TemporaryDirectory() as d:
        c0, w0 = time.process_time(), time.perf_counter()
        for i, s in enumerate(specs):
            train.run(s, Path(d, "alone", f"{i}_{s.name}"), device="cpu", log=quiet)
        out["alone"] = (time.process_time() - c0, time.perf_counter() - w0)
        c0, w0 = time.process_time(), time.perf_counter()
        train_pack.run(specs, [Path(d, "pack", f"{i}_{s.name}") for i, s in enumerate(specs)], device="cpu",
                       log=quiet)
        out["pack"] = (time.process_time() - c0, time.perf_counter() - w0)
    scale = full / steps
    return {arm: {"cpu_s": c, "wall_s": w, "runs_per_cpu_hour": 3600 * k / (c * scale),
                  "runs_per_wall_hour": 3600 * k / (w * scale)} for arm, (c, w) in out.items()}


def import_seconds(stage: str) -> float:
    ts = []
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", f"import geoanatomy.stages.{stage}"], check=True,
                       env={"PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", default=["nano", "micro"])
    ap.add_argument("--k", nargs="+", type=int, default=[1, 4, 8])
    ap.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--steps", type=int, default=150, help="steps timed per run (default 150)")
    a = ap.parse_args()
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    import torch
    print(f"machine: {cpu}; torch {torch.__version__} ({torch.backends.cpu.get_cpu_capability()}); "
          f"{a.steps} steps timed per run, projected to 1,500")
    print(f"{'size':<6} {'K':>3} {'thr':>3}  {'alone CPU-s':>11} {'pack CPU-s':>10}  {'runs/CPU-h alone':>16} "
          f"{'pack':>6} {'ratio':>6}  {'runs/wall-h alone':>17} {'pack':>6} {'ratio':>6}")
    for size in a.sizes:
        for k in a.k:
            for th in a.threads:
                r = time_arms(size, k, a.steps, th)
                al, pk = r["alone"], r["pack"]
                print(f"{size:<6} {k:>3} {th:>3}  {al['cpu_s']:>11.1f} {pk['cpu_s']:>10.1f}  "
                      f"{al['runs_per_cpu_hour']:>16.1f} {pk['runs_per_cpu_hour']:>6.1f} "
                      f"{pk['runs_per_cpu_hour'] / al['runs_per_cpu_hour']:>5.2f}x  "
                      f"{al['runs_per_wall_hour']:>17.1f} {pk['runs_per_wall_hour']:>6.1f} "
                      f"{pk['runs_per_wall_hour'] / al['runs_per_wall_hour']:>5.2f}x", flush=True)
    base = statistics.median([_t(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True))
                              for _ in range(3)])
    print(f"\nfixed cost of a job (a fresh interpreter importing the stage; interpreter alone {base:.2f} s):")
    for st in STAGES:
        print(f"  {st:<9} {import_seconds(st):.2f} s")
    return 0


def _t(f) -> float:
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


if __name__ == "__main__":
    sys.exit(main())
