"""``geoanatomy summarize PART`` (delegated from geoanatomy.cli; no torch import).

    geoanatomy summarize tables     --precursors results/*/precursor.json --out results/summary
    geoanatomy summarize scale      --precursors ... [--pythia results/summary/pythia_scale.json] --out ...
    geoanatomy summarize prediction --precursors ... --out ...
    geoanatomy summarize benchmark  --precursors ... --curves results/*/signal_curves.csv --out ...
    geoanatomy summarize verdict    --precursors ... [--curves ...] --out ...  (reads the parts above)
    geoanatomy summarize protocols  --precursors ... --out ...     (single-task vs mixture units; needs mixture units)
    geoanatomy summarize figures    --precursors ... --metrics results/*/metrics.csv
                                    [--scale-json results/summary/scale_invariance.json] --out ...
    geoanatomy summarize html       --out results/summary
    geoanatomy summarize all        --results results          (every part, files found by glob)

The parts and the files each writes: geoanatomy.analysis.parts.

``--settings JSON`` overrides the ``summary:`` config block (the rules pass the
resolved block, so a settings change reruns the summary jobs).
"""
from __future__ import annotations

from .args import ArgumentParser, plain, positive_int  # noqa: F401

import argparse
import json
import os
import sys
from pathlib import Path

from ..analysis.parts import BY_NAME as _PARTS_BY_NAME
from ..analysis.parts import PARTS as _PARTS

PARTS = [p.name for p in _PARTS] + ["all"]


def make_settings(user: dict | None = None) -> dict:
    """The ``summary:`` settings (``analysis.settings.summary_settings``)."""
    from ..analysis.settings import summary_settings
    return summary_settings(user)


def main(argv=None) -> int:
    ap = ArgumentParser(prog="geoanatomy summarize", description=plain(__doc__),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("part", choices=PARTS)
    ap.add_argument("--precursors", nargs="*", default=None, help="per-run precursor.json files")
    ap.add_argument("--metrics", nargs="*", default=None, help="per-run metrics.csv files (figures)")
    ap.add_argument("--curves", nargs="*", default=None,
                    help="per-run signal_curves.csv files (precursor benchmark, verdict's robust column)")
    ap.add_argument("--results", default=None, help="instead of file lists: glob RESULTS/*/precursor.json etc.")
    ap.add_argument("--pythia", default=None, help="pythia_scale.json of the Pythia branch (optional)")
    ap.add_argument("--scale-json", default=None, help="scale_invariance.json for the rho-matrix figure")
    ap.add_argument("--out", default=None, help="output folder (default RESULTS/summary)")
    ap.add_argument("--settings", default=None, help="JSON object: the summary: config block")
    ap.add_argument("--threads", type=positive_int, default=1, help="CPU threads (default 1)")
    ap.add_argument("--seed-half", choices=("A", "B"), default=None,
                    help="only the runs of one seed half (within a cell, seeds ascending: even positions A, "
                         "odd B; the split of verdict.csv's stability check); give --out as well")
    args = ap.parse_args(argv)

    for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
        os.environ[v] = str(max(1, args.threads))
    from ..analysis.load import SummaryInputError
    from ..analysis.summarize import run

    try:
        st = make_settings(json.loads(args.settings) if args.settings else None)
    except (ValueError, json.JSONDecodeError) as e:
        print(f"geoanatomy summarize: --settings: {e}", file=sys.stderr)
        return 2
    pre, met, cur = args.precursors, args.metrics, args.curves
    if args.results:
        root = Path(args.results)
        # single-task runs results/RUN/, mixture units results/MIXTURE/COMBINATION/
        pre = pre if pre is not None else sorted(str(p) for p in [*root.glob("*/precursor.json"),
                                                                   *root.glob("mix*/*/precursor.json")])
        met = met if met is not None else sorted(str(p) for p in root.glob("*/metrics.csv"))
        cur = cur if cur is not None else sorted(str(p) for p in root.glob("*/signal_curves.csv"))
        args.out = args.out or str(root / "summary")
        if args.pythia is None and (root / "summary" / "pythia_scale.json").exists():
            args.pythia = str(root / "summary" / "pythia_scale.json")
    if not args.out:
        print("geoanatomy summarize: give --out DIR (or --results DIR)", file=sys.stderr)
        return 2
    needs_runs = args.part == "all" or _PARTS_BY_NAME[args.part].reads_runs
    if needs_runs and not pre:
        print("geoanatomy summarize: no precursor.json files (give --precursors or --results)", file=sys.stderr)
        return 2
    if args.seed_half:
        if args.results and not any(a == "--out" or a.startswith("--out=") for a in (argv or sys.argv[1:])):
            print("geoanatomy summarize: --seed-half: give --out DIR (a folder of its own, not RESULTS/summary)",
                  file=sys.stderr)
            return 2
        from ..analysis.load import load_precursors
        from ..analysis.verdict import seed_half
        try:
            kept = {str(Path(p["_path"]).parent) for p in seed_half(load_precursors(pre), args.seed_half)}
        except SummaryInputError as e:
            print(f"geoanatomy summarize: {e}", file=sys.stderr)
            return 2
        pre = [p for p in pre if str(Path(p).parent) in kept]
        met = [m for m in (met or []) if str(Path(m).parent) in kept]
        cur = [c for c in (cur or []) if str(Path(c).parent) in kept]
        print(f"geoanatomy summarize: seed half {args.seed_half}: {len(pre)} runs", file=sys.stderr)
    out = Path(args.out)
    try:
        parts = PARTS[:-1] if args.part == "all" else [args.part]
        for part in parts:
            scale_json = args.scale_json or (str(out / "scale_invariance.json") if args.part == "all" else None)
            run(part, pre, out, st, metrics=met or [], pythia=args.pythia, scale_json=scale_json, curves=cur or [],
                threads=args.threads)
    except (SummaryInputError, ValueError, OSError) as e:
        print(f"geoanatomy summarize: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
