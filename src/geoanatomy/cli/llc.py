"""``geoanatomy llc-calibrate RUN_DIR``: the LLC estimator's sweep over step size and n_beta at
one checkpoint (``geoanatomy.stages.llc_calibration``; docs/measures.md, "Calibrating the LLC").

    geoanatomy llc-calibrate results/mod_L3_nano                       # last checkpoint, default grid
    geoanatomy llc-calibrate results/mod_L3_nano --step 600 --eps 1e-5 3e-5 1e-4 --n-beta 10 30

Writes OUT (default RUN_DIR/llc_calibration): llc_calibration.csv (one row per setting),
llc_calibration_traces.csv (every chain's loss at every SGLD step) and llc_calibration.png
(one panel of loss traces per setting). The chains are the measures stage's: its pool, seed
and minibatch order, the run's llc settings otherwise (--chains, --draws, --burnin override).
"""
from __future__ import annotations

import argparse
import sys

from .args import ArgumentParser, device_arg, plain, positive_int


def _positive(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        x = float("nan")
    if not x > 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number > 0")
    return x


def _parser() -> argparse.ArgumentParser:
    from ..stages.llc_calibration import EPS_GRID, NBETA_GRID
    ap = ArgumentParser(prog="geoanatomy llc-calibrate", description=plain(__doc__),
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir", metavar="RUN_DIR", help="a trained run folder, results/<run> (holding checkpoints/)")
    ap.add_argument("--step", type=int, default=None, help="the checkpoint (default: the last)")
    ap.add_argument("--eps", type=_positive, nargs="+", default=list(EPS_GRID), help="SGLD step sizes")
    ap.add_argument("--n-beta", type=_positive, nargs="+", default=list(NBETA_GRID), help="inverse temperatures")
    ap.add_argument("--chains", type=positive_int, default=None)
    ap.add_argument("--draws", type=positive_int, default=None)
    ap.add_argument("--burnin", type=int, default=None)
    ap.add_argument("--out", default=None, help="output folder (default: RUN_DIR/llc_calibration)")
    ap.add_argument("--device", type=device_arg, default="cpu", help="cpu (default), cuda, cuda:N or auto")
    return ap


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    from pathlib import Path

    from ..errors import CheckpointError
    from ..stages.llc_calibration import calibrate, write
    from ..table import TableError
    over = {k: v for k, v in (("chains", args.chains), ("draws", args.draws), ("burnin", args.burnin))
            if v is not None}
    try:
        res = calibrate(args.run_dir, args.step, args.eps, args.n_beta, over, args.device)
        files = write(res, args.out or Path(args.run_dir) / "llc_calibration")
    except (ValueError, OSError, KeyError, CheckpointError, TableError) as e:
        print(f"geoanatomy llc-calibrate: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    print("\n".join(files), file=sys.stdout)
    return 0
