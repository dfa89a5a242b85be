"""The summary's serial tail: the power simulation (``geoanatomy summarize power``) with one
worker process against two (or ``--workers``), on the default grid's committed snapshot
(docs/validation/data: 22 runs in 15 acquired cells) at the default grid's summary settings
(200 populations per scenario, every design of ``power_multiples``), in one run on one machine.

    python benchmarks/bench_power_threads.py                        # 1 vs 2 workers (~12 min on 2 cores)
    python benchmarks/bench_power_threads.py --populations 40       # a quicker look (~2.5 min)

Each population is seeded on its own (``power.population_rng``), so the two tables must be
equal: the benchmark checks it and fails if they differ. Prints the wall seconds of each,
their ratio (the speed-up of the summary's longest job, which runs after every other job has
finished, so its wall time is the default grid's summary tail) and the machine.
"""
from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "docs" / "validation" / "data"


def run(workers: int, populations: int | None, out: Path) -> float:
    """`geoanatomy summarize power` in a fresh process (as the rule runs it); wall seconds."""
    cmd = [sys.executable, "-m", "geoanatomy.cli", "summarize", "power", "--results", str(DATA), "--out", str(out),
           "--threads", str(workers)]
    if populations:
        cmd += ["--settings", f'{{"power_populations": {populations}}}']
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--populations", type=int, default=None, help="default: the grid's summary setting (200)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        one, many = Path(d, "one"), Path(d, "many")
        t1 = run(1, a.populations, one)
        tn = run(a.workers, a.populations, many)
        same = (one / "verdict_power.csv").read_bytes() == (many / "verdict_power.csv").read_bytes()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs;"
          f" python {platform.python_version()}")
    print(f"power simulation, {a.populations or 'default'} populations per scenario, default grid snapshot:")
    print(f"  1 worker : {t1:7.1f} s")
    print(f"  {a.workers} workers: {tn:7.1f} s")
    print(f"  ratio    : {t1 / tn:.2f}x  (tables identical: {same})")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
