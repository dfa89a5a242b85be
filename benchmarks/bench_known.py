"""The cost of one known-transition run against one run of the default grid, measured in one
process on one core: the trainer's own loop (``stages.train.run``, checkpoints included) for
a grokking run (config/known_grok.yaml: grok L3, batch 512, 2,000 steps), an induction run
(config/known_ind.yaml: ind L2, 1,500 steps) and the default grid's mod_L3_nano (1,500 steps).

    OMP_NUM_THREADS=1 python benchmarks/bench_known.py                 # whole runs (~6 min)
    OMP_NUM_THREADS=1 python benchmarks/bench_known.py --steps 200     # the first 200 steps of each

Prints CPU seconds (``time.process_time``) and wall seconds per run (or per ``--steps``),
the projected whole-run seconds, and each known run's cost as a ratio to the default run's,
measured in this one process, on the machine it names.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

RUNS = (("config/known_grok.yaml", "grok_L3_nano"), ("config/known_ind.yaml", "ind_L2_nano"),
        ("config.yaml", "mod_L3_nano"))


def time_run(config: str, name: str, steps: int | None) -> dict:
    """Train run ``name`` of ``config`` (its first ``steps`` steps, or all) into a scratch folder."""
    from geoanatomy.config import load_config, run_spec
    from geoanatomy.stages import train
    spec = run_spec(load_config(REPO / config, workdir=None, check_device=False), name)
    full = int(spec.train["steps"])
    if steps is not None and steps < full:
        spec = dataclasses.replace(spec, train={**spec.train, "steps": steps})
    with tempfile.TemporaryDirectory() as d:
        c0, w0 = time.process_time(), time.perf_counter()
        train.run(spec, Path(d) / name, device="cpu", log=lambda m: None)
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    n = int(spec.train["steps"])
    return {"config": config, "run": name, "steps_timed": n, "steps_of_run": full, "batch": spec.train["batch_size"],
            "cpu_s": round(cpu, 2), "wall_s": round(wall, 2), "run_cpu_s_projected": round(cpu * full / n, 1)}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=None, help="time the first STEPS steps of each run (default all)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    a = ap.parse_args(argv)
    import torch
    torch.set_num_threads(1)
    rows = [time_run(c, n, a.steps) for c, n in RUNS]
    ref = rows[-1]["run_cpu_s_projected"]
    out = {"machine": f"{platform.processor() or platform.machine()}, {platform.platform()}",
           "torch": torch.__version__, "threads": 1, "runs": rows,
           "ratio_to_default_run": {r["run"]: round(r["run_cpu_s_projected"] / ref, 2) for r in rows[:-1]}}
    for r in rows:
        print(f"{r['run']:>14s} ({r['config']}): {r['cpu_s']:.1f} CPU-s for {r['steps_timed']} steps at batch "
              f"{r['batch']}; whole run ({r['steps_of_run']} steps) {r['run_cpu_s_projected']:.0f} CPU-s on one core")
    for k, v in out["ratio_to_default_run"].items():
        print(f"{k}: {v:.2f} x the default grid's mod_L3_nano (same process, one core)")
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
