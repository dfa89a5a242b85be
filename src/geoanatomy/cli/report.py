"""``geoanatomy report``: the docs' generated tables from finished results (geoanatomy.report).

    geoanatomy report findings SUMMARY [--by-claim [--write PAGE]]   study findings from verdict.csv
    geoanatomy report grid [RESULTS]                                 per-run tables (docs/validation.md)
    geoanatomy report compare A/verdict.csv B/verdict.csv            two verdicts word by word
    geoanatomy report confirm EXPLORATORY_DATA CONFIRMATION_DATA     each row's word on fresh seeds
    geoanatomy report cost CONFIG                                    cost table (docs/slurm.md)
    geoanatomy report snapshot RESULTS DEST [--summary S] [--command TEXT]   a grid's data for the docs
    geoanatomy report pages PAGE DATA [--check]                      a page's generated blocks from DATA
    geoanatomy report known GRID... --out DIR                        published claims on known transitions
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
    cf = sub.add_parser("confirm", help="each verdict row's word on fresh seeds beside its exploratory word")
    cf.add_argument("explo", help="the exploratory grid's snapshot folder (geoanatomy report snapshot)")
    cf.add_argument("confirm", help="the confirmation grid's snapshot folder")
    k = sub.add_parser("cost", help="the cost table of a config")
    k.add_argument("config")
    sn = sub.add_parser("snapshot", help="copy a grid's precursor.json, train.json and summary tables to DEST")
    sn.add_argument("results")
    sn.add_argument("dest")
    sn.add_argument("--summary", default=None, help="the summary folder (default RESULTS/summary)")
    sn.add_argument("--command", default="", help="the command that produced the grid (recorded)")
    pg = sub.add_parser("pages", help="write a docs page's generated blocks from a snapshot folder")
    pg.add_argument("page")
    pg.add_argument("data")
    pg.add_argument("--check", action="store_true", help="compare only; exit 1 when a block differs")
    kn = sub.add_parser("known", help="published precursor claims on the known-transition grids (tables, figure)")
    kn.add_argument("grids", nargs="+", help="grid results folders or their snapshots (results/known_grok ...)")
    kn.add_argument("--out", required=True, help="folder for known_claims.csv, known_runs.csv, the figure")
    args = ap.parse_args(argv)
    from ..manifest import ManifestError
    try:
        return _run(ap, args)
    except (OSError, ValueError, KeyError, ManifestError) as e:
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
    elif args.what == "known":
        from ..report.known import known_report
        print(known_report(args.grids, args.out))
    elif args.what == "grid":
        from ..report.grid import grid_tables
        print(grid_tables(args.results))
    elif args.what == "compare":
        from ..report.compare import compare_verdicts
        print(compare_verdicts(args.a, args.b))
    elif args.what == "confirm":
        from ..report.confirm import confirmation_table
        print(confirmation_table(args.explo, args.confirm))
    elif args.what == "snapshot":
        from ..report.data import snapshot
        prov = snapshot(args.results, args.dest, args.summary, args.command)
        print(f"{args.dest}: {prov['runs']} runs, {prov['files']} files, {prov['bytes'] / 1e6:.2f} MB")
    elif args.what == "pages":
        from ..report.data import write_pages
        changed = write_pages(args.page, args.data, args.check)
        verb = "differs" if args.check else "rewritten"
        print(f"{args.page}: " + (f"{len(changed)} block(s) {verb}" if changed else "up to date"))
        return 1 if (changed and args.check) else 0
    else:
        from ..config import load_config
        from ..report.cost import cost_table_markdown
        print(cost_table_markdown(load_config(args.config)))
    return 0
