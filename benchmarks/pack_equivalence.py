"""The packed trainer against the single-run trainer on the default grid's nano runs, full length.

Every nano run of config.yaml (19 runs, 1,500 steps) is trained twice on this machine: alone
(``stages.train.run``, one process) and in the default grid's packs (``config pack: {train: K}``,
``stages.train_pack.run``), the two arms side by side, one core each. Then the metrics and
events stages run on both (events from metrics.csv: the expensive measures and the probes are
not part of this comparison), and the script prints, per run: whether the checkpoint steps
agree, the final weights' largest relative difference (every tensor, attention's key bias left
out: its gradient is zero in exact arithmetic, so both trainers move it by rounding noise
scaled to the learning rate, changing no output), and every event step of precursor.json that
differs, in steps and in checkpoints of the run's schedule.

    OMP_NUM_THREADS=1 python benchmarks/pack_equivalence.py --out pack_eq           # ~25 min on 2 cores
    OMP_NUM_THREADS=1 python benchmarks/pack_equivalence.py --runs mod_L3_nano mod_L3_nano_s1 --steps 300

Writes OUT/comparison.json (the table) beside the two arms' run folders.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

# precursor.json's event steps compared (top level; the measures' entries are walked below)
TOP = ("acquisition_step", "first_token_acquisition_step", "logprob_emergence_step", "train_acquisition_step",
       "loss_plateau_exit_step")


def specs(names, steps, k):
    import yaml

    from geoanatomy.config import resolve, run_names, run_spec, train_packs
    user = yaml.safe_load((REPO / "config.yaml").read_text())
    cfg = resolve({**user, "pack": {"train": k}})
    names = names or [n for n in run_names(cfg) if n.split("_")[2] == "nano"]
    out = {n: run_spec(cfg, n) for n in names}
    if steps:
        out = {n: dataclasses.replace(s, train={**s.train, "steps": steps}) for n, s in out.items()}
    packs = [[r for r in rs if r in out] for rs in train_packs(cfg).values()]
    return cfg, out, [p for p in packs if p]


def arm(which: str, out: str, names, steps, k) -> float:
    """Train one arm (alone or packed), then metrics and events of every run; CPU seconds."""
    import torch
    torch.set_num_threads(1)
    from geoanatomy.spec import JobSpec
    from geoanatomy.stages import events, metrics, train, train_pack
    cfg, sp, packs = specs(names, steps, k)
    root = Path(out) / which
    quiet = lambda m: None  # noqa: E731
    t0 = time.process_time()
    if which == "single":
        for s in sp.values():
            train.run(s, root / s.name, device="cpu", log=quiet)
    else:
        for p in packs:
            train_pack.run([sp[r] for r in p], [root / r for r in p], device="cpu", log=quiet)
    t_train = time.process_time() - t0
    for s in sp.values():
        metrics.run(s, root / s.name, device="cpu", log=quiet)
        events.run_job(JobSpec("events", s, str(root), "cpu", {"events": cfg["events"]}))
    return t_train


def walk(rec: dict, prefix=""):
    """(key, step) of every *_step value in a precursor record's measures entries."""
    for k, v in rec.items():
        if isinstance(v, dict):
            yield from walk(v, f"{prefix}{k}.")
        elif k.endswith("_step") and (v is None or isinstance(v, (int, float))):
            yield f"{prefix}{k}", v


def compare(out: Path, names, steps, k) -> list[dict]:
    import torch
    from safetensors.torch import load_file
    _, sp, packs = specs(names, steps, k)
    rows = []
    for n in sp:
        a, b = out / "single" / n, out / "packed" / n
        ta, tb = (json.loads((d / "train.json").read_text()) for d in (a, b))
        last = ta["checkpoint_steps"][-1]
        wa = load_file(a / "checkpoints" / f"step_{last:06d}.safetensors")
        wb = load_file(b / "checkpoints" / f"step_{last:06d}.safetensors")
        rel = 0.0
        for key in wa:
            x, y = wa[key].flatten().double(), wb[key].flatten().double()
            if key.endswith("attn.c_attn.bias"):
                c = x.numel() // 3
                x, y = torch.cat([x[:c], x[2 * c:]]), torch.cat([y[:c], y[2 * c:]])
            if x.norm() > 0:
                rel = max(rel, float((x - y).norm() / x.norm()))
        pa, pb = (json.loads((d / "precursor.json").read_text()) for d in (a, b))
        ea = {**{t: pa.get(t) for t in TOP}, **dict(walk(pa.get("measures") or {}, "measures."))}
        eb = {**{t: pb.get(t) for t in TOP}, **dict(walk(pb.get("measures") or {}, "measures."))}
        grid = ta["checkpoint_steps"]

        def ck(s):
            return None if s is None else min(range(len(grid)), key=lambda i: abs(grid[i] - s))
        diffs = {key: [ea[key], eb.get(key), None if ea[key] is None or eb.get(key) is None
                       else ck(eb[key]) - ck(ea[key])] for key in ea if ea[key] != eb.get(key)}
        rows.append({"run": n, "pack": next(i for i, p in enumerate(packs) if n in p),
                     "same_checkpoint_steps": ta["checkpoint_steps"] == tb["checkpoint_steps"],
                     "final_weights_max_rel_diff": rel, "events_compared": len(ea), "events_differing": diffs,
                     "acquired_both": (pa.get("acquisition_step") is None) == (pb.get("acquisition_step") is None)})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--runs", nargs="*", default=None, help="default: every nano run of config.yaml")
    ap.add_argument("--steps", type=int, default=None, help="default: each run's own (1,500)")
    ap.add_argument("--k", type=int, default=8, help="runs per pack (default 8)")
    a = ap.parse_args()
    out = Path(a.out)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        res = {w: pool.apply_async(arm, (w, str(out), a.runs, a.steps, a.k)) for w in ("single", "packed")}
        cpu = {w: r.get() for w, r in res.items()}
    rows = compare(out, a.runs, a.steps, a.k)
    from geoanatomy.runtime import machine_fingerprint
    m = machine_fingerprint()
    (out / "comparison.json").write_text(json.dumps({"machine": m, "train_cpu_seconds": cpu, "k": a.k,
                                                     "runs": rows}, indent=1))
    print(f"machine: {m['cpu_model']} ({m['cpu_capability']}), torch {m['torch']}; packs of {a.k}")
    print(f"training CPU-s: alone {cpu['single']:.0f}, packed {cpu['packed']:.0f} "
          f"(ratio {cpu['single'] / cpu['packed']:.2f})")
    for r in rows:
        d = r["events_differing"]
        print(f"{r['run']:24s} pack {r['pack']} steps same {r['same_checkpoint_steps']!s:5s} "
              f"final weights rel {r['final_weights_max_rel_diff']:.1e}  events differing {len(d)}/"
              f"{r['events_compared']}" + ("" if not d else "  " + "; ".join(
                  f"{k}: {v[0]} vs {v[1]} ({v[2]:+d} ck)" if v[2] is not None else f"{k}: {v[0]} vs {v[1]}"
                  for k, v in d.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
