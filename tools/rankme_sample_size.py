"""RankMe sample-size (N) sensitivity: floor value and floor step at N = eval.n_samples vs larger N.

    python tools/rankme_sample_size.py --results /path/to/results \
        [--runs mod_L3_nano,mod_L3_micro,...] [--n-list 200,512,768,1024] [--out rankme_n.json]

The metrics stage computes RankMe on the first ``eval.n_samples`` (200) rows of the held-out
pool at every width. With N < d the singular values number at most N, so RankMe is capped
at N; this script measures what a larger N changes. For each trained run (read only: its
checkpoints and train.json under ``--results``), at every checkpoint, it takes the hidden
states at layer ln_final, position "first" (the position that predicts the first answer
token, as ``stages.metrics`` does), for the first N rows of the held-out pool for each N of
``--n-list``, and computes RankMe (uncentred and centred, eps = eval.rankme_eps). Then the
project's default detector (``events.curve_entry(..., "down", DEFAULTS["events"])``) gives
the floor, floor step and collapse step of each curve.

An N larger than the held-out pool (data.n_heldout, 1024 by default) is cut to the pool
size (said in the table). ``distinct inputs``: how many different inputs the N rows hold;
the pool is drawn with replacement, so a small input space (par_L3: 2^7 inputs, a quarter
held out) repeats inputs, and the rank of the matrix is at most the number of distinct
inputs, whatever N.

One forward pass per checkpoint, on the largest N, cut after the "first" position (the
model is causal, so later tokens do not change it); each N is a prefix of it. As a check,
the N = eval.n_samples curve is compared with the run's metrics.csv when that file is
there: the largest difference (float32 rounding of another batch shape) and whether the
events agree. One thread, CPU.
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

RUNS = "mod_L3_nano,mod_L3_micro,copy_L3_micro,copy_L3_nano,par_L3_nano,cmp_L3_nano"
from geoanatomy.stages.sample_size import LAYER, POSITION, VARIANTS, metrics_check, run_curves  # noqa: E402,F401


def fmt(v, nd=1) -> str:
    return "-" if v is None else (f"{v:.{nd}f}" if isinstance(v, float) else str(v))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", default="results", help="folder holding the trained runs (read only)")
    ap.add_argument("--runs", default=RUNS, help="comma-separated run names (default: %(default)s)")
    ap.add_argument("--n-list", default="200,512,768,1024", help="comma-separated sample sizes N")
    ap.add_argument("--config", default=str(REPO / "config.yaml"), help="config the runs were trained with")
    ap.add_argument("--out", default=None, help="write every curve and event to this JSON file")
    args = ap.parse_args(argv)

    import torch
    torch.set_num_threads(1)
    from geoanatomy.config import load_config, run_spec
    from geoanatomy.defaults import DEFAULTS
    from geoanatomy.detectors import curve_entry

    cfg = load_config(args.config, workdir=None, check_device=False)
    cfg_events = DEFAULTS["events"]
    n_list = sorted({int(n) for n in args.n_list.split(",")})
    n_eval = int(cfg["eval"]["n_samples"])
    t_all = time.perf_counter()
    out = {"command": " ".join(["python", "tools/rankme_sample_size.py", *(argv or sys.argv[1:])]),
           "layer": LAYER, "position": POSITION, "events": cfg_events, "n_eval": n_eval, "runs": {},
           "machine": {"platform": platform.platform(), "processor": platform.processor(), "threads": 1,
                       "torch": torch.__version__}}
    header = ("| run | width | variant | N | N / width | distinct inputs | RankMe at step 0 | floor | "
              "floor step | collapse step | floor / floor(N=%d) |" % n_eval)
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    notes = []
    for name in [r.strip() for r in args.runs.split(",") if r.strip()]:
        t0 = time.perf_counter()
        spec = run_spec(cfg, name)
        run_dir = Path(args.results) / name
        c = run_curves(spec, run_dir, n_list)
        check = metrics_check(run_dir, c, n_eval, cfg_events)
        rec = {**c, "seconds": time.perf_counter() - t0, "check_vs_metrics_csv": check, "events": {}}
        cut = [f"{r}->{u}" for r, u in zip(c["n_requested"], c["n_used"]) if r != u]
        if cut:
            notes.append(f"{name}: N cut to the held-out pool ({c['pool']} rows): {', '.join(cut)}")
        notes.append(f"{name}: {len(c['steps'])} checkpoints, {rec['seconds']:.1f} s; N={n_eval} vs metrics.csv: "
                     + ("no metrics.csv" if check is None else
                        f"RankMe max |diff| {check['max_abs_diff']:.1e}, events "
                        + ("agree" if check["events_agree"] else "DIFFER")))
        for variant, _ in VARIANTS:
            rec["events"][variant] = {}
            base = None
            for n, k in zip(c["n_used"], c["distinct_inputs"]):
                if n in rec["events"][variant]:
                    continue                                                    # two requests cut to one N
                vals = c["values"][variant][n]
                e = curve_entry(c["steps"], vals, "down", cfg_events)
                rec["events"][variant][n] = e
                if n == n_eval:
                    base = e["floor"]
                ratio = e["floor"] / base if base and e["floor"] is not None else None
                lines.append(f"| {name} | {c['width']} | {variant} | {n} | {n / c['width']:.2f} | {k} | "
                             f"{fmt(vals[0], 2)} | {fmt(e['floor'], 3)} | {fmt(e['floor_step'])} | "
                             f"{fmt(e['collapse_step'])} | {fmt(ratio, 2)} |")
        out["runs"][name] = rec
    out["wall_seconds"] = time.perf_counter() - t_all
    print("\n".join(lines))
    print()
    print("\n".join(notes))
    print(f"wall time {out['wall_seconds']:.1f} s (1 thread)")
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
