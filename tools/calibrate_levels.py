"""Calibrate task levels: train the nano model on candidate levels and report when each is
acquired, with the same trainer, metrics and event definitions as the pipeline.

    python tools/calibrate_levels.py --steps 1500 --jobs 2 [--seeds 0 1 2] \
        --candidates "par:length=6,8,10,12" "add:digits=2,3,4,5" ... [--out benchmarks/out/calibration.json]

Each candidate is ``task:param=v1,v2,...[:fixed=v]`` (mul: ``mul:digits=2x1,2x2,3x2``; sparse
parity: ``par:length=8,12,16:support=3``); ``--set train.lr=3e-3`` overrides a setting. Every run trains
``--size`` (default nano) for ``--steps`` steps with the default grid's settings (the config's
train block, one budget), extracts metrics and detects events (stages train, metrics, events;
no expensive measures). Prints a markdown table (task, parameter, seed, acquisition step,
first-token acquisition, loss-plateau exit, class, final accuracy) and writes the JSON. The
level table in docs/tasks-and-models.md is this script's output for the chosen levels.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _parse(cands: list[str]) -> list[tuple[str, str, object, dict]]:
    out = []
    for c in cands:
        task, _, rest = c.partition(":")
        rest, *fixed = rest.split(":")
        param, _, vals = rest.partition("=")
        extra = {k: int(v) for k, v in (f.split("=") for f in fixed)}
        for v in vals.split(","):
            val = [int(x) for x in v.split("x")] if "x" in v else int(v)
            out.append((task, param, val, extra))
    return out


def _overrides(sets: list[str]) -> dict:
    """``["train.lr=3e-3", ...]`` -> nested override dict (values parsed as YAML scalars)."""
    import yaml
    out: dict = {}
    for s in sets:
        key, _, val = s.partition("=")
        d = out
        *path, last = key.split(".")
        for k in path:
            d = d.setdefault(k, {})
        d[last] = yaml.safe_load(val)
    return out


def one(args) -> dict:
    try:
        return _one(args)
    except Exception as e:  # noqa: BLE001 - a candidate the config rejects is reported, not fatal
        task, param, val, extra, seed, steps, size, _, _ = args
        return {"task": task, "param": param, "value": val, **extra, "seed": seed, "size": size,
                "steps": steps, "error": str(e)}


def _one(args) -> dict:
    task, param, val, extra, seed, steps, size, config, sets = args
    os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    from geoanatomy.config import load_config, run_spec
    from geoanatomy.runtime import limit_threads
    from geoanatomy.stages.events import run as events_run
    from geoanatomy.stages.metrics import run as metrics_run
    from geoanatomy.stages.train import run as train_run
    limit_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        over = _overrides(sets)
        cfg = load_config(config, overrides={
            **over,
            "grid": [{"tasks": [task], "levels": ["L1"], "sizes": [size], "seeds": [seed]}],
            "tasks": {task: {"L1": {param: val, **extra}, "L2": {**_higher(param, val, 1), **extra},
                             "L3": {**_higher(param, val, 2), **extra}}},
            "train": {**over.get("train", {}), "steps": steps}, "size_overrides": {}, "results_dir": tmp,
            "allow_results_outside_workdir": True})
        name = [n for n in __import__("geoanatomy.config", fromlist=["run_names"]).run_names(cfg)][0]
        spec = run_spec(cfg, name)
        rd = Path(tmp) / name
        t0 = time.time()
        quiet = lambda *a, **k: None  # noqa: E731
        train_run(spec, rd, device="cpu", log=quiet)
        metrics_run(spec, rd, device="cpu", log=quiet)
        pre = events_run(spec, rd, cfg["events"], log=quiet)
        return {"task": task, "param": param, "value": val, **extra, "seed": seed, "size": size,
                "steps": steps, "set": sets, "acquisition_step": pre["acquisition_step"],
                "first_token_acquisition_step": pre["first_token_acquisition_step"],
                "loss_plateau_exit_step": pre["loss_plateau_exit_step"],
                "logprob_emergence_step": pre["logprob_emergence_step"], "difficulty": pre["difficulty"],
                "final_accuracy": pre["final_accuracy"], "chance_accuracy": pre["chance_accuracy"],
                "seconds": round(time.time() - t0, 1)}


def _higher(param, val, k):
    """A larger level parameter for L2/L3 (the candidate runs as L1; only so the config's
    L1 < L2 < L3 check passes: those levels are not trained)."""
    if isinstance(val, list):
        return {param: [val[0], val[1] + k]}
    return {param: val + k * (4 if param == "modulus" else 1)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--candidates", nargs="+", required=True)
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--size", default="nano")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--config", default=str(REPO / "config.yaml"))
    ap.add_argument("--set", nargs="*", default=[], help="config overrides, e.g. train.lr=3e-3")
    ap.add_argument("--out", default=str(REPO / "tools" / "out" / "calibration.json"))
    args = ap.parse_args(argv)
    work = [(t, p, v, x, s, args.steps, args.size, args.config, args.set)
            for t, p, v, x in _parse(args.candidates) for s in args.seeds]
    t0 = time.time()
    with ProcessPoolExecutor(args.jobs) as ex:
        rows = list(ex.map(one, work))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    old = json.loads(Path(args.out).read_text()) if Path(args.out).exists() else []
    key = lambda r: json.dumps([r["task"], r["param"], r["value"], r.get("support"), r["seed"], r["size"],  # noqa: E731
                                r["steps"], r.get("set", [])])
    new = {key(r) for r in rows}
    keep = [r for r in old if key(r) not in new]
    Path(args.out).write_text(json.dumps(keep + rows, indent=1))
    print(f"| task | {args.size} level parameter | seed | acquisition | first token | plateau exit | class | "
          f"final acc | chance |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['task']} | {r['param']}={r['value']} | {r['seed']} | rejected: {r['error'][:120]} |")
            continue
        extra = "".join(f" {k}={r[k]}" for k in ("support",) if k in r)
        print(f"| {r['task']} | {r['param']}={r['value']}{extra} | {r['seed']} | {r['acquisition_step']} | "
              f"{r['first_token_acquisition_step']} | {r['loss_plateau_exit_step']} | {r['difficulty']} | "
              f"{r['final_accuracy']:.2f} | {r['chance_accuracy']:.3f} |")
    print(f"# {len(rows)} runs, {args.steps} steps each at {args.size}{' ' + ' '.join(args.set) if args.set else ''}, "
          f"{time.time() - t0:.0f} s wall with {args.jobs} processes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
