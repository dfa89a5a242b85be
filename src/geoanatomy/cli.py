"""Command-line interface the Snakemake rules call (usable on its own too).

    geoanatomy validate --config config.yaml
    geoanatomy runs     --config config.yaml
    geoanatomy train    --config config.yaml --run mod_L3_nano [--threads 1] [--device auto]
    geoanatomy metrics  --config config.yaml --run mod_L3_nano
    geoanatomy events   --config config.yaml --run mod_L3_nano      (precursor.json + figure)
    geoanatomy measures --config config.yaml --run mod_L3_nano      (grad ranks, Hessian, LLC -> measures.csv)
    geoanatomy probes   --config config.yaml --run mod_L3_nano      (linear probes -> probes.csv)
    geoanatomy clean-run results/mod_L3_nano [--checkpoints]
    geoanatomy summarize tables|scale|prediction|figures|html|all ...   (results/summary/; see analysis/cli.py)

Instead of ``--config`` + ``--run`` a rule may pass ``--spec JSON`` (the resolved
per-run settings, so Snakemake reruns a job exactly when they change).
Heavy imports (torch) happen after the thread limits are set.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path


def _spec_and_cfg(args):
    from .config import DEFAULTS, RunSpec, load_config, run_spec
    if args.spec:
        d = json.loads(args.spec)
        cfg_events = d.pop("events", DEFAULTS["events"])
        results = d.pop("results_dir", "results")
        device = d.pop("device", "auto")
        blocks = {k: d.pop(k) for k in ("measures", "probes") if k in d}  # extra config blocks (spec_json)
        return RunSpec(**d), {"events": cfg_events, "results_dir": results, "device": device, **blocks}
    if not (args.config and args.run):
        sys.exit("give --spec JSON, or --config FILE and --run NAME")
    cfg = load_config(args.config)
    return run_spec(cfg, args.run), cfg


def spec_json(cfg: dict, name: str, with_events: bool = False, blocks: tuple = (), for_train: bool = False) -> str:
    """The JSON a rule passes with --spec (also its Snakemake params); ``blocks`` names extra
    config blocks to carry (e.g. ("measures",)), so changing them reruns exactly those jobs."""
    from dataclasses import asdict

    from .config import run_spec
    d = asdict(run_spec(cfg, name))
    d["results_dir"] = cfg["results_dir"]
    d["device"] = cfg["device"]
    if for_train:  # evaluation settings do not change the weights: keep them out of train's params
        d["eval"] = {}
    if with_events:
        d["events"] = cfg["events"]
    for b in blocks:
        d[b] = cfg[b]
    return json.dumps(d, sort_keys=True)


def _run_dir(cfg, spec) -> Path:
    return Path(cfg.get("results_dir", "results")) / spec.name


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["pythia"]:  # Pythia validation branch: geoanatomy pythia extract|events|scale|revisions
        from .pythia.cli import main as pythia_main
        return pythia_main(argv[1:])
    if argv[:1] == ["summarize"]:  # cross-run analysis: geoanatomy summarize tables|scale|prediction|figures|html|all
        from .analysis.cli import main as summarize_main
        return summarize_main(argv[1:])
    ap = argparse.ArgumentParser(prog="geoanatomy", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("validate", "runs"):
        p = sub.add_parser(name)
        p.add_argument("--config", required=True)
    for name in ("train", "metrics", "events", "measures", "probes"):
        p = sub.add_parser(name)
        p.add_argument("--config")
        p.add_argument("--run")
        p.add_argument("--spec")
        p.add_argument("--threads", type=int, default=1)
        p.add_argument("--device", default=None, help="auto | cpu | cuda[:N] (default: from config)")
    p = sub.add_parser("clean-run", help="delete a run's derived files so snakemake recomputes it")
    p.add_argument("run_dir")
    p.add_argument("--checkpoints", action="store_true", help="also delete checkpoints (retrain from scratch)")
    args = ap.parse_args(argv)

    from .config import ConfigError
    try:
        return _dispatch(args)
    except ConfigError as e:
        print(f"geoanatomy: {e}", file=sys.stderr)
        return 2


def _dispatch(args) -> int:
    if args.cmd == "validate":
        from .config import load_config, run_names
        cfg = load_config(args.config)
        print(f"{args.config}: valid; {len(run_names(cfg))} runs")
        return 0
    if args.cmd == "runs":
        from .config import load_config, run_names
        print("\n".join(run_names(load_config(args.config))))
        return 0
    if args.cmd == "clean-run":
        d = Path(args.run_dir)
        for f in ("metrics.csv", "measures.csv", "probes.csv", "precursor.json", "trajectory.png", "train.json"):
            (d / f).unlink(missing_ok=True)
        if args.checkpoints and (d / "checkpoints").exists():
            shutil.rmtree(d / "checkpoints")
        print(f"cleaned {d} (checkpoints {'deleted' if args.checkpoints else 'kept: training resumes'})")
        return 0

    from .runtime import limit_threads
    limit_threads(args.threads)
    spec, cfg = _spec_and_cfg(args)
    device = args.device or cfg.get("device", "auto")
    run_dir = _run_dir(cfg, spec)
    if args.cmd != "events":  # the job log states where it runs (CPU or which GPU)
        from .runtime import describe_device
        print(f"[{args.cmd}] {spec.name}: {describe_device(device)}", flush=True)
    if args.cmd == "train":
        from .train import train_run
        s = train_run(spec, run_dir, device=device)
        print(f"[train] {spec.name}: done on {s['device']} ({s['threads']} threads), "
              f"{s['wall_seconds_this_job']} s this job, diverged={s['diverged']}")
    elif args.cmd == "metrics":
        from .extract import extract_run
        extract_run(spec, run_dir, run_dir / "metrics.csv", device=device)
    elif args.cmd == "measures":
        from .config import DEFAULTS
        from .expensive import measures_run
        measures_run(spec, run_dir, run_dir / "measures.csv", cfg.get("measures", DEFAULTS["measures"]),
                     cfg.get("events", DEFAULTS["events"]), device=device)
    elif args.cmd == "probes":
        from .config import DEFAULTS
        from .probes import probes_run
        probes_run(spec, run_dir, run_dir / "probes.csv", cfg.get("probes", DEFAULTS["probes"]),
                   threads=args.threads, device=device)
    elif args.cmd == "events":
        from .plots import plot_run
        from .precursor import load_and_build
        from .runtime import atomic_write_json
        from .extract import read_table
        pre = load_and_build(spec, run_dir, run_dir / "metrics.csv", cfg["events"])
        atomic_write_json(run_dir / "precursor.json", pre)
        plot_run(read_table(run_dir / "metrics.csv"), pre, run_dir / "trajectory.png")
        rm = pre["measures"]["rankme"]
        print(f"[events] {spec.name}: {pre['difficulty']}, acquisition {pre['acquisition_step']}, "
              f"rankme floor {rm['floor']} @ {rm['floor_step']}, precursor {rm['precursor']}, gap {rm['gap_steps']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
