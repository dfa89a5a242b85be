"""How long Snakemake takes to plan a grid: `snakemake -n` on the paper grid (144 runs) beside
the default grid, in one run of this script.

    python benchmarks/bench_dry_run.py [--repeats 2]

Prints, per grid, the wall seconds of `snakemake -n --cores 1 --configfile GRID` (the fastest
of --repeats), its job count, seconds per job, and the ratio paper / default. The paper grid's
plan should stay under 30 s on a 2-core machine (a SLURM login node is no faster): it is read
before any job is submitted. Under `--profile slurm` the plan is the same DAG.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GRIDS = {"default": REPO / "config.yaml", "paper": REPO / "config" / "paper.yaml"}


def plan(configfile: Path) -> tuple[float, int]:
    """(wall seconds, total jobs) of one dry run."""
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--configfile", str(configfile)],
                       cwd=REPO, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if p.returncode:
        raise SystemExit(f"dry run of {configfile} failed:\n{p.stderr[-2000:]}")
    m = re.search(r"^total\s+(\d+)$", p.stdout + p.stderr, flags=re.M)
    return dt, int(m.group(1)) if m else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=2)
    a = ap.parse_args()
    res = {}
    for name, cf in GRIDS.items():
        runs = [plan(cf) for _ in range(max(1, a.repeats))]
        res[name] = (min(r[0] for r in runs), runs[0][1])
        dt, n = res[name]
        print(f"{name:8s} {cf.relative_to(REPO)}: {dt:.2f} s to plan {n} jobs ({1000 * dt / max(n, 1):.1f} ms/job)")
    print(f"paper / default: {res['paper'][0] / res['default'][0]:.2f} x the time for"
          f" {res['paper'][1] / max(res['default'][1], 1):.2f} x the jobs")


if __name__ == "__main__":
    main()
