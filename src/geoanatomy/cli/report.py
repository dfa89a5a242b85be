"""``geoanatomy report``: the docs' generated tables from finished results (geoanatomy.report).

    geoanatomy report findings SUMMARY [--by-claim [--write PAGE]]   study findings from verdict.csv
    geoanatomy report grid [RESULTS]                                 per-run tables (docs/validation.md)
    geoanatomy report compare A/verdict.csv B/verdict.csv            two verdicts word by word
    geoanatomy report cost CONFIG                                    cost table (docs/slurm.md)
"""
from __future__ import annotations

import argparse
import sys

from .args import ArgumentParser, plain


def main(argv=None) -> int:
    ap = ArgumentParser(prog="geoanatomy report", description=plain(__doc__),
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    f = sub.add_parser("findings", help="the study's findings from SUMMARY/verdict.csv")
    f.add_argument("summary", help="a summary folder (results/study/summary)")
    f.add_argument("--by-claim", action="store_true", help="claim by claim (docs/study.md's block)")
    f.add_argument("--write", metavar="PAGE", default=None, help="with --by-claim: replace PAGE's generated block")
    g = sub.add_parser("grid", help="per-run events and expensive-measure tables of RESULTS/*/precursor.json")
    g.add_argument("results", nargs="?", default="results")
    c = sub.add_parser("compare", help="two verdict.csv files word by word")
    c.add_argument("a")
    c.add_argument("b")
    k = sub.add_parser("cost", help="the cost table of a config")
    k.add_argument("config")
    args = ap.parse_args(argv)
    try:
        return _run(ap, args)
    except (OSError, ValueError, KeyError) as e:
        print(f"geoanatomy report {args.what}: {e}", file=sys.stderr)
        return 2


def _run(ap, args) -> int:
    if args.what == "findings":
        from ..report.findings import by_claim, findings, write_block
        if args.write and not args.by_claim:
            ap.error("--write needs --by-claim")
        text = by_claim(args.summary) if args.by_claim else findings(args.summary)
        if args.write:
            print(f"{args.write}: {'rewritten' if write_block(args.write, text) else 'up to date'}")
        else:
            print(text)
    elif args.what == "grid":
        from ..report.grid import grid_tables
        print(grid_tables(args.results))
    elif args.what == "compare":
        from ..report.compare import compare_verdicts
        print(compare_verdicts(args.a, args.b))
    else:
        from ..config import load_config
        from ..report.cost import cost_table_markdown
        print(cost_table_markdown(load_config(args.config)))
    return 0
