"""Summary speed: seconds per run of the cross-run summary at 10, 50 and 150 runs, this code
against a baseline commit, in one run on one machine.

The population is synthetic but built from a real record: one run is trained and measured
by the pipeline's own stages (40 steps, every measure and the probes; or ``--template`` a
precursor.json of your own), and its precursor.json is cloned into N runs over the default
grid's cells (8 tasks x 3 levels x 2 sizes, then further seeds), each clone with its run
name, task, level, size and seed set and every event step scaled by a seeded random factor
(behaviour by f ~ exp(N(0, 0.5)); each measure by f x exp(N(0, 0.3))), resealed as the
events stage seals it. The summary is every part that reads only precursor files (tables,
scale, prediction, power, verdict, claims, html; not the figures, which read the per-run
tables), each as ``geoanatomy summarize PART`` in a fresh process, one thread.

The baseline (``--baseline``, default 356e7fa: the code before the summary's speed work) is
checked out with ``git worktree`` into a temporary folder and run the same way with its own
``src`` first on ``PYTHONPATH``. Both read the same files; the ratio is baseline / this code.

    python benchmarks/bench_summary.py                    # 10, 50, 150 runs; ratio to 356e7fa
    python benchmarks/bench_summary.py --sizes 150 --baseline none
"""
from __future__ import annotations

import argparse
import copy
import itertools
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
PARTS = ["tables", "scale", "prediction", "power", "verdict", "claims", "html"]
TASKS = ["copy", "rev", "sort", "add", "mod", "mul", "par", "cmp"]
LEVELS = ["L1", "L2", "L3"]
SIZES = ["nano", "micro"]


def build_template(work: Path) -> dict:
    """precursor.json of a tiny run made by the pipeline's stages (every measure, probes)."""
    from geoanatomy.config import resolve, run_spec
    from geoanatomy.stages.events import run as events_run
    from geoanatomy.stages.measures import run as measures_run
    from geoanatomy.stages.metrics import run as metrics_run
    from geoanatomy.stages.probes import run as probes_run
    from geoanatomy.stages.train import run as train_run
    cfg = resolve({"grid": [{"tasks": ["add"], "levels": ["L1"], "sizes": ["nano"]}], "results_dir": str(work),
                   "train": {"steps": 40, "warmup": 5, "checkpoints": {"n_log": 5, "log_end": 0.2, "n_uniform": 4}},
                   "eval": {"n_samples": 32},
                   "measures": {"n_points": 4, "grad_rank": {"n_samples": 6}, "hessian": {"batch_size": 6, "max_iter":
                                                                                          8},
                                "llc": {"chains": 2, "draws": 3, "burnin": 1, "batch_size": 4, "n_data": 16}},
                   "probes": {"n_samples": 40, "positions": "all"}})
    spec = run_spec(cfg, "add_L1_nano")
    d = work / spec.name
    quiet = lambda *a, **k: None  # noqa: E731
    train_run(spec, d, device="cpu", log=quiet)
    metrics_run(spec, d, device="cpu", log=quiet)
    measures_run(spec, d, cfg["measures"], device="cpu", log=quiet)
    probes_run(spec, d, cfg["probes"], device="cpu", log=quiet)
    events_run(spec, d, cfg["events"], log=quiet)
    return json.loads((d / "precursor.json").read_text())


SETTINGS = {"events_settings", "train_settings", "eval", "machine", "level_params", "baselines",
            "difficulty_source", "mixture", "floor_window"}     # settings: the same in every clone


def _scale(obj, f: float, steps: int):
    """Every integer field named *_step scaled by f and clipped to [0, steps]; gaps scaled."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if isinstance(v, int) and not isinstance(v, bool) and k.endswith("_step"):
                out[k] = int(min(steps, max(0, round(v * f))))
            elif isinstance(v, int) and not isinstance(v, bool) and k in ("gap_steps", "lead_steps"):
                out[k] = int(round(v * f))
            else:
                out[k] = _scale(v, f, steps)
        return out
    if isinstance(obj, list):
        return [_scale(x, f, steps) for x in obj]
    return obj


def clone(template: dict, f: float, rng, steps: int) -> dict:
    """The template with behaviour steps scaled by f and each measure's by f x exp(N(0, 0.3))."""
    d = {}
    for k, v in template.items():
        if k in SETTINGS:
            d[k] = copy.deepcopy(v)
        elif k == "measures":
            d[k] = {m: _scale(e, f * float(np.exp(rng.normal(0, 0.3))), steps) for m, e in v.items()}
        else:
            d[k] = _scale(v, f, steps)
    return d


def population(template: dict, n: int, out: Path, seed: int = 0) -> list[str]:
    """n sealed precursor.json files cloned from ``template`` (module doc)."""
    from geoanatomy.precursor.seal import write_sealed
    rng = np.random.default_rng(seed)
    cells = list(itertools.product(TASKS, LEVELS, SIZES))
    steps = int(template["steps"])
    paths = []
    for i in range(n):
        task, level, size = cells[i % len(cells)]
        s = i // len(cells)
        d = clone(template, float(np.exp(rng.normal(0, 0.5))), rng, steps)
        d.pop("content_sha256", None)
        name = f"{task}_{level}_{size}" + (f"_s{s}" if s else "")
        d.update(run=name, task=task, level=level, size=size, seed=s)
        acq = d.get("acquisition_step")
        if d.get("acquired") and acq is not None:
            d["difficulty"] = "easy" if acq <= 0.1 * steps else "hard"
        p = out / name / "precursor.json"
        p.parent.mkdir(parents=True, exist_ok=True)
        write_sealed(p, d)
        paths.append(str(p))
    return paths


def time_summary(src: Path, paths: list[str], out: Path, parts=PARTS) -> dict:
    """Wall seconds of each part, run as `python -m geoanatomy.cli summarize PART` with
    ``src`` first on PYTHONPATH, one thread."""
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "OPENBLAS_NUM_THREADS": "1"}
    times = {}
    for part in parts:
        args = [sys.executable, "-m", "geoanatomy.cli", "summarize", part, "--out", str(out)]
        if part != "html":
            args += ["--precursors", *paths]
        t0 = time.perf_counter()
        p = subprocess.run(args, env=env, capture_output=True, text=True)
        times[part] = time.perf_counter() - t0
        if p.returncode != 0:
            raise SystemExit(f"summarize {part} failed with {src}:\n{p.stderr[-2000:]}")
    return times


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 50, 150], help="runs in each population")
    ap.add_argument("--baseline", default="356e7fa", help="git commit to compare with ('none': this code only)")
    ap.add_argument("--template", default=None, help="a precursor.json to clone (default: build a tiny run)")
    ap.add_argument("--parts", nargs="+", default=PARTS, choices=PARTS,
                    help="summary parts to time (power is a fixed cost per summary: its simulated populations "
                         "do not grow with the runs; see summary.power_populations)")
    ap.add_argument("--json", default=None, help="write the figures to this JSON file too")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(REPO / "src"))
    tmp = Path(tempfile.mkdtemp(prefix="bench_summary_"))
    base_src = None
    try:
        template = json.loads(Path(a.template).read_text()) if a.template else build_template(tmp / "template")
        if a.baseline != "none":
            wt = tmp / "baseline"
            subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(wt), a.baseline],
                           check=True, capture_output=True)
            base_src = wt / "src"
        rows = []
        for n in a.sizes:
            paths = population(template, n, tmp / f"pop{n}")
            new = time_summary(REPO / "src", paths, tmp / f"new{n}", a.parts)
            old = time_summary(base_src, paths, tmp / f"old{n}", a.parts) if base_src else None
            rows.append({"runs": n, "new_s": sum(new.values()), "new_by_part": new,
                         "old_s": sum(old.values()) if old else None, "old_by_part": old})
        print(f"summary parts {', '.join(a.parts)}, one thread, {platform.processor() or platform.machine()}, "
              f"template {'given' if a.template else 'a 40-step add L1 nano run'}; baseline {a.baseline}")
        print(f"{'runs':>5} {'this code s/run':>16} {'baseline s/run':>15} {'ratio':>6}   slowest part (this code)")
        for r in rows:
            per_new = r["new_s"] / r["runs"]
            per_old = r["old_s"] / r["runs"] if r["old_s"] else float("nan")
            slow = max(r["new_by_part"], key=r["new_by_part"].get)
            print(f"{r['runs']:>5} {per_new:>16.3f} {per_old:>15.3f} {per_old / per_new:>6.2f}   "
                  f"{slow} {r['new_by_part'][slow]:.1f} s")
        if a.json:
            Path(a.json).write_text(json.dumps(rows, indent=1))
        return 0
    finally:
        if base_src is not None:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(base_src.parent)],
                           capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
