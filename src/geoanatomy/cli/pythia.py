"""``geoanatomy pythia ...``: the commands the Pythia rules call (usable on their own).

    geoanatomy pythia revisions                          # the 154 published revisions
    geoanatomy pythia extract --config C --model 160m    # or --spec JSON (what the rule passes)
    geoanatomy pythia events  --config C --model 160m
    geoanatomy pythia scale   --config C
"""
from __future__ import annotations

from .args import ArgumentParser, device_arg, plain, positive_int  # noqa: F401

import argparse
import json
import sys
from pathlib import Path


def _spec(args, kind: str) -> dict:
    if args.spec:
        return json.loads(args.spec)
    if not args.config:
        sys.exit("give --spec JSON, or --config FILE (and --model NAME)")
    from ..config import load_config
    from ..config import pythia as settings
    cfg = load_config(args.config)
    if kind == "scale":
        return settings.scale_spec(cfg)
    if not args.model:
        sys.exit("give --model NAME (one of the configured pythia models)")
    return settings.extract_spec(cfg, args.model) if kind == "extract" else settings.events_spec(cfg, args.model)


def main(argv=None) -> int:
    ap = ArgumentParser(prog="geoanatomy pythia", description=plain(__doc__),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("revisions", help="print the 154 published Pythia revisions")
    for name in ("extract", "events", "scale"):
        p = sub.add_parser(name)
        p.add_argument("--config")
        p.add_argument("--model", help="model name, e.g. 160m (run pythia_160m)")
        p.add_argument("--spec")
        p.add_argument("--threads", type=positive_int, default=1, help="CPU threads (default 1)")
        if name == "extract":
            p.add_argument("--device", type=device_arg, default=None,
                           help="auto | cpu | cuda[:N] (default: pythia.device)")
    args = ap.parse_args(argv)

    if args.cmd == "revisions":
        from ..config.pythia_revisions import published_revisions
        print("\n".join(published_revisions()))
        return 0
    from ..errors import ConfigError
    from ..pythia.fingerprint import Step0IsTrained
    try:
        from ..runtime import limit_threads
        spec = _spec(args, args.cmd)
        limit_threads(args.threads)
        if args.cmd == "extract":
            from ..pythia.extract import extract_model
            if args.device:
                spec["device"] = args.device
            extract_model(spec, Path(spec["results_dir"]) / spec["run"])
        elif args.cmd == "events":
            from ..pythia.events import run_events
            run_events(Path(spec["results_dir"]) / spec["run"], spec["benchmarks"], spec["events"])
        else:
            from ..files import atomic_write_json
            from ..pythia.scale import build_from_results
            out = Path(spec["results_dir"]) / "summary" / "pythia_scale.json"
            summary = build_from_results(spec["results_dir"], spec["names"], spec["benchmarks"])
            atomic_write_json(out, summary)
            for p in summary["smallest_vs_largest"]:
                print(f"[pythia scale] {p['a']} vs {p['b']} {p['quantity']}: rho {p['rho']}, p {p['p_value']} "
                      f"(n={p['n']}, {p['method']})")
            print(f"[pythia scale] wrote {out}")
    except ConfigError as e:
        print(f"geoanatomy pythia: {e}", file=sys.stderr)
        return 2
    except Step0IsTrained as e:                # step0 holds trained weights: nothing is measured
        print(f"geoanatomy pythia: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
