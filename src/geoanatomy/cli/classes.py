"""``geoanatomy classes``: the difficulty class file from calibration runs (``geoanatomy.classes``).

    geoanatomy classes build --config config/calibration.yaml --out config/classes.csv
    geoanatomy classes check --config config.yaml

``build`` reads the precursor.json of every run of the calibration config (trained and
scored by the workflow: ``snakemake --configfile config/calibration.yaml ...``), applies the
class rule and writes the class file; it prints the file's sha256 for the analysed config's
``events.classes_sha256``. ``check`` validates an analysed config's class file: its hash,
its rows, and that every analysed run has a class and a seed disjoint from the calibration.
"""
from __future__ import annotations

from .args import ArgumentParser, plain, positive_int  # noqa: F401

import argparse
import json
import sys
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    ap = ArgumentParser(prog="geoanatomy classes", description=plain(__doc__),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    b = sub.add_parser("build", help="write the class file from a calibration config's finished runs")
    b.add_argument("--config", required=True, help="the calibration config (e.g. config/calibration.yaml)")
    b.add_argument("--out", required=True, help="class file to write (e.g. config/classes.csv)")
    c = sub.add_parser("check", help="check an analysed config's class file (hash, rows, disjoint seeds)")
    c.add_argument("--config", required=True, help="the analysed config (e.g. config.yaml)")
    return ap


def build(config: str, out: str) -> int:
    from ..classes import build_rows, file_sha256, render
    from ..config import load_config, run_names
    from ..files import atomic_write_text
    cfg = load_config(config)
    root = Path(cfg["results_dir"])
    pres, missing = [], []
    for name in run_names(cfg):
        p = root / name / "precursor.json"
        if not p.is_file():
            missing.append(str(p))
            continue
        pres.append(json.loads(p.read_text()))
    if missing:
        print(f"geoanatomy classes build: {len(missing)} calibration runs are not finished, e.g. {missing[0]}; "
              f"run snakemake --configfile {config} first", file=sys.stderr)
        return 2
    rows = build_rows(pres, int(cfg["events"]["easy_max_step"]))
    atomic_write_text(out, render(rows))
    n_easy = sum(r["class"] == "easy" for r in rows)
    print(f"{out}: {len(rows)} cells ({n_easy} easy, {len(rows) - n_easy} hard) from {len(pres)} calibration runs")
    print(f"sha256 {file_sha256(out)}")
    return 0


def check(config: str) -> int:
    from ..config import load_config
    cfg = load_config(config)      # loading checks the class file (hash, rows, disjoint seeds)
    e = cfg["events"]
    if not e.get("classes_file"):
        print(f"{config}: no class file (events.classes_file): classes follow the post-hoc rule "
              f"acquisition step <= events.easy_max_step")
        return 0
    print(f"{config}: class file {e['classes_file']} sha256 {e['classes_sha256']} matches; "
          f"every analysed run has a class and a seed disjoint from the calibration")
    return 0


def main(argv=None) -> int:
    from ..errors import ConfigError
    args = _parser().parse_args(argv)
    try:
        return build(args.config, args.out) if args.cmd == "build" else check(args.config)
    except ConfigError as e:
        print(f"geoanatomy classes: {e}", file=sys.stderr)
        return 2
