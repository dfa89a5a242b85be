"""Command-line interface: what the Snakemake rules call (usable on its own too). The top
of the library: nothing imports it. ``pythia`` and ``summarize`` are its sub-commands for
the Pythia branch and the cross-run summary.

    geoanatomy validate --config config.yaml
    geoanatomy runs     --config config.yaml
    geoanatomy STAGE    --config config.yaml --run mod_L3_nano [--threads 1] [--device auto]
    geoanatomy STAGE    --spec JOB_JSON                     (what a rule passes)
    geoanatomy clean-run results/mod_L3_nano [--checkpoints]
    geoanatomy summarize tables|scale|prediction|figures|html|all ...   (results/summary/)
    geoanatomy pythia extract|events|scale|revisions ...                 (Pythia branch)
    geoanatomy scan SOURCE... --probe FILE|BENCHMARK [--out OUT]       (HF checkpoint folders, hub revisions)
    geoanatomy report findings|grid|compare|cost ...                    (the docs' generated tables)
    geoanatomy --version

STAGE is a Snakemake rule name; ``STAGES`` lists them, each a module of ``geoanatomy.stages``
(its ``run(...)`` for the library, its ``run_job(job)`` for the rule). A rule passes
``--spec``, the stage's ``JobSpec`` as JSON (``config.job_spec``), so Snakemake reruns a job exactly when what
it reads changes. Heavy imports (torch) happen after the thread limits are set.
"""
from __future__ import annotations

import argparse
import itertools
import os
import shutil
import sys
from pathlib import Path

from .args import ArgumentParser, device_arg, plain, positive_int  # noqa: F401 (every command's parser)

# the Snakemake rules that run one stage's job (stages/<name>.py: run_job(job, threads))
STAGES = ("train", "metrics", "measures", "probes", "events", "prune")
# stages that read tables and files only, never a model: they start without importing torch
TABLE_STAGES = ("events", "prune")
RUN_FILES = ("metrics.csv", "example_losses.csv", "measures.csv", "llc_traces.csv", "probes.csv",
             "precursor.json",
             "signal_curves.csv", "signal_costs.json", "signal_timings_metrics.json", "signal_timings_measures.json",
             "trajectory.png", "train.json")


def _job(args):
    from ..config import job_spec, load_config
    from ..errors import ConfigError
    from ..spec import JobSpec
    if args.spec:
        job = JobSpec.from_json(args.spec)
        if job.stage != args.cmd:
            raise ConfigError(f"the --spec is for stage {job.stage!r}, not {args.cmd!r}; give this stage's spec")
    elif args.config and args.run:
        job = job_spec(load_config(args.config), args.run, args.cmd)
    else:
        missing = ("--run NAME" if args.config else "--config FILE" if args.run
                   else "--spec JSON, or --config FILE and --run NAME")
        raise ConfigError(f"give {missing} (geoanatomy runs --config FILE lists the runs)")
    if args.device:
        job = JobSpec(job.stage, job.run, job.results_dir, args.device, job.blocks)
    return job


def run_stage(job, threads: int = 1) -> dict:
    """Run one stage's job (thread limits first, then the stage module's run())."""
    from ..runtime import describe_device, limit_threads
    tables_only = job.stage in TABLE_STAGES
    limit_threads(threads, torch_too=not tables_only)
    if not tables_only:  # the job log states where it runs (CPU or which GPU)
        print(f"[{job.stage}] {job.run.name}: {describe_device(job.device)}", flush=True)
    return _stage_job(job.stage)(job, threads)


def _stage_job(stage: str):
    """The stage module's run_job(), imported only now (after the thread limits; the table
    stages never import torch)."""
    if stage == "train":
        from ..stages.train import run_job
    elif stage == "metrics":
        from ..stages.metrics import run_job
    elif stage == "measures":
        from ..stages.measures import run_job
    elif stage == "probes":
        from ..stages.probes import run_job
    elif stage == "events":
        from ..stages.events import run_job
    elif stage == "prune":
        from ..stages.prune import run_job
    else:
        raise ValueError(f"unknown stage {stage!r}; known: {', '.join(STAGES)}")
    return run_job


# sub-commands with their own parser (geoanatomy.cli.<name>.main), dispatched before ours
DELEGATED = {
    "summarize": "cross-run summary tables, statistics and figures (results/summary/)",
    "pythia": "Pythia validation branch: extract, events, scale, revisions",
    "scan": "geometric events of HF checkpoints: folders (stepN/, checkpoint-N/) and hub revisions (repo@rev)",
    "export": "a run's checkpoints as Hugging Face GPT-2 folders (checkpoint-N/)",
    "report": "the docs' generated tables: study findings, per-run tables, verdict comparison, cost table",
    "classes": "difficulty class file from calibration runs: build, check",
    "llc-calibrate": "the LLC's sweep over step size and n_beta at one checkpoint, with its loss traces",
}


USAGE = """Watch transformers learn: train on algorithmic tasks, measure representation geometry at
every checkpoint, and test whether geometry changes before behaviour. Snakemake runs the whole
grid (snakemake --cores 2); these commands run one piece.

examples:
  geoanatomy validate --config config.yaml          check a config before a long run
  geoanatomy runs --config config.yaml              list the runs of its grid
  geoanatomy train --config config.yaml --run mod_L3_nano
  geoanatomy train --config config.yaml --run mod_L3_nano --run par_L3_nano   two runs in one process
  geoanatomy metrics --config config.yaml --run mod_L3_nano
  geoanatomy clean-run results/mod_L3_nano          recompute one run's tables
  geoanatomy summarize all --results results        the cross-run summary (results/summary/)
  geoanatomy scan out/checkpoints --probe probe.txt the events of any Hugging Face checkpoints
  geoanatomy export results/mod_L3_nano             a run as Hugging Face GPT-2 folders
  geoanatomy llc-calibrate results/mod_L3_nano      the LLC's step-size x n_beta sweep at one checkpoint

Errors are one line naming the argument, file or value (exit 2); GEOANATOMY_TRACEBACK=1 shows
the traceback. Documentation: docs/ in the repository (docs/running.md first)."""

STAGE_HELP = {
    "train": "train one run: checkpoints/ and train.json (resumes from its newest checkpoint)",
    "metrics": "one run's accuracy, loss and RankMe at every checkpoint: metrics.csv",
    "measures": "one run's gradient ranks, Hessian and LLC at fixed checkpoints: measures.csv",
    "probes": "one run's linear probes per layer at every checkpoint: probes.csv",
    "events": "one run's events (acquisition, collapse, floor, precursor): precursor.json",
    "prune": "remove a finished run's analysis checkpoints (keep_checkpoints: final)",
}


def _parser() -> argparse.ArgumentParser:
    from ..version import __version__
    ap = ArgumentParser(prog="geoanatomy", description=USAGE,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--version", action="version", version=f"geoanatomy {__version__}")
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    for name, what in (("validate", "check a config file (schema and semantic checks) before any work"),
                       ("runs", "print the run names of a config's grid, one per line")):
        p = sub.add_parser(name, help=what, description=what)
        p.add_argument("--config", required=True, help="a config file (YAML or JSON), e.g. config.yaml")
    for name in STAGES:
        what = STAGE_HELP.get(name, f"run the {name} stage of one run")
        p = sub.add_parser(name, help=what, description=what + ". Give --config and --run, or --spec.",
                           epilog=f"example: geoanatomy {name} --config config.yaml --run mod_L3_nano")
        p.add_argument("--config", help="the config file whose grid holds the run")
        many = {"action": "append"} if name == "train" else {}
        p.add_argument("--run", **many, help="the run's name, e.g. mod_L3_nano (geoanatomy runs --config ... lists "
                       "them)" + ("; give it more than once to train runs of one size together (a pack)"
                                  if many else ""))
        p.add_argument("--spec", **many, help="the job as JSON, instead of --config and --run (what a Snakemake "
                       "rule passes)" + ("; more than one: a pack" if many else ""))
        p.add_argument("--threads", type=positive_int, default=1, help="CPU threads for this job (default 1)")
        if name == "train":
            p.add_argument("--record", default=None, help="with several runs: write the pack's record here (JSON: "
                           "its runs and each one's train.json sha256; the workflow's train_pack output)")
        p.add_argument("--device", type=device_arg, default=None,
                       help="auto | cpu | cuda[:N] (default: the config's device)")
    p = sub.add_parser("clean-run", help="delete a run's derived files so snakemake recomputes it",
                       description="delete a run's tables, precursor.json, figure and train.json (not its "
                                   "checkpoints: training resumes) so the next snakemake recomputes that run",
                       epilog="example: geoanatomy clean-run results/mod_L3_nano")
    p.add_argument("run_dir", help="a run folder, results/TASK_LEVEL_SIZE")
    p.add_argument("--checkpoints", action="store_true", help="also delete checkpoints (retrain from scratch)")
    p = sub.add_parser("freeze", help="write the frozen-rules file of a config (before a confirmation grid)",
                       description="write the sha256 of every rule that decides a verdict word (claims, the "
                                   "verdict's rule, the precursor benchmark, the summary and events settings) with "
                                   "the date and commit; a config whose summary.frozen_rules names the file is "
                                   "summarised only with those rules (geoanatomy.analysis.freeze)",
                       epilog="example: geoanatomy freeze --config config/study.yaml --out config/study_frozen.json")
    p.add_argument("--config", required=True, help="the config whose settings are frozen")
    p.add_argument("--out", required=True, help="the file to write (JSON)")
    p.add_argument("--check", action="store_true", help="compare instead of writing: exit 1 and list what differs")
    p.add_argument("--code-only", metavar="REASON", help="re-fingerprint --out after a code change that decides no "
                   "word differently: keeps the freeze's date and commit, records the change and REASON; written only "
                   "once every --snapshot, summarised again under the new fingerprints, keeps every word, n and "
                   "p-value (refused when a setting differs or a number moves)")
    p.add_argument("--snapshot", action="append", default=None, metavar="DATA",
                   help="with --code-only: a committed snapshot folder to recheck (repeatable; default: every "
                        "docs/**/summary/floor_summary.json's folder under the current directory)")
    p.add_argument("--replace", action="store_true", help="freeze anew onto an existing --out (the old freeze is kept "
                   "in its previous_freezes)")
    for name, what in DELEGATED.items():  # listed here; parsed by their own modules
        sub.add_parser(name, help=f"{what} (geoanatomy {name} --help)", add_help=False)
    return ap


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["pythia"]:
        from .pythia import main as pythia_main
        return pythia_main(argv[1:])
    if argv[:1] == ["summarize"]:
        from .summarize import main as summarize_main
        return summarize_main(argv[1:])
    if argv[:1] == ["scan"]:
        from .scan import main as scan_main
        return scan_main(argv[1:])
    if argv[:1] == ["report"]:
        from .report import main as report_main
        return report_main(argv[1:])
    if argv[:1] == ["export"]:
        from .export import main as export_main
        return export_main(argv[1:])
    if argv[:1] == ["llc-calibrate"]:
        from .llc import main as llc_main
        return llc_main(argv[1:])
    if argv[:1] == ["classes"]:
        from .classes import main as classes_main
        return classes_main(argv[1:])
    args = _parser().parse_args(argv)

    try:
        return _dispatch(args)
    except USER_ERRORS as e:
        return user_error(f"geoanatomy {args.cmd}", e)


def _user_errors() -> tuple:
    """The errors a command turns into one line and exit 2: bad input (config, --spec, a file a
    stage reads), a failed write (the file named). Anything else is a bug: a traceback."""
    from ..classes import ClassFileError
    from ..errors import CheckpointError, ConfigError
    from ..table import TableError
    return (ConfigError, CheckpointError, TableError, ClassFileError, ValueError, OSError, KeyError)


def user_error(prefix: str, e: BaseException) -> int:
    """Print ``prefix: message`` (one line) and return 2; GEOANATOMY_TRACEBACK=1 re-raises."""
    if os.environ.get("GEOANATOMY_TRACEBACK"):
        raise e
    msg = " ".join(str(e).split()) or type(e).__name__
    if isinstance(e, KeyError):
        msg = f"missing field {msg}"
    print(f"{prefix}: {msg}", file=sys.stderr)
    return 2


USER_ERRORS = _user_errors()


def _dispatch(args) -> int:
    if args.cmd in ("validate", "runs"):
        from ..config import load_config, mixture_names, mixture_unit_names, run_names
        cfg = load_config(args.config)
        names, mixes, units = run_names(cfg), mixture_names(cfg), mixture_unit_names(cfg)
        mix = (f"; {len(mixes)} mixture models (protocol: mixture) with {len(units)} combinations"
               if mixes else "")
        # runs: the single-task runs, then each mixture's training run and its units (NAME/COMBINATION)
        print(f"{args.config}: valid; {len(names)} runs{mix}" if args.cmd == "validate"
              else "\n".join(names + mixes + units))
        return 0
    if args.cmd == "clean-run":
        return clean_run(Path(args.run_dir), args.checkpoints)
    if args.cmd == "freeze":
        import json as _json

        from ..analysis.freeze import differences, fingerprints, freeze
        from ..config import load_config
        cfg = load_config(args.config)
        if args.check:
            diff = differences(_json.loads(Path(args.out).read_text()), fingerprints(cfg))
            print("\n".join(diff) if diff else f"{args.out}: the rules are the frozen ones")
            return 1 if diff else 0
        if args.code_only is not None:
            from ..report.recheck import refreeze_shown
            snaps = args.snapshot or sorted(str(f.parent.parent)
                                            for f in Path("docs").glob("**/summary/floor_summary.json"))
            try:
                rec = refreeze_shown(cfg, args.out, args.code_only, snaps)
            except ValueError as e:
                print(f"geoanatomy freeze: {e}", file=sys.stderr)
                return 2
            print(f"{args.out}: re-fingerprinted ({'; '.join(rec['code_changes'][-1]['changed'])}); every word, n and "
                  f"p-value of {', '.join(snaps)} the same; still frozen on {rec['date']} (commit "
                  f"{str(rec['commit'])[:10]})")
            return 0
        try:
            rec = freeze(cfg, args.out, args.config, replace=args.replace)
        except ValueError as e:
            print(f"geoanatomy freeze: {e}", file=sys.stderr)
            return 2
        print(f"{args.out}: {len(rec['claims'])} claims, verdict rule, benchmark, summary and events settings "
              f"frozen on {rec['date']} (commit {str(rec['commit'])[:10]})")
        return 0
    if args.cmd == "train" and (len(args.spec or args.run or ()) > 1 or args.record):
        return _train_pack(args)
    if args.cmd == "train":
        args.spec, args.run = (args.spec or [None])[0], (args.run or [None])[0]
    job = _job(args)
    out = run_stage(job, args.threads)
    if job.stage == "train":
        print(f"[train] {job.run.name}: done on {out['device']} ({out['threads']} threads), "
              f"{out['wall_seconds_this_job']} s this job, diverged={out['diverged']}")
    return 0


def _train_pack(args) -> int:
    """``geoanatomy train`` with several runs: one process trains them together
    (``stages.train_pack``), each into its own folder; every job spec is checked first."""
    from ..runtime import describe_device, limit_threads
    one = argparse.Namespace(**vars(args))
    jobs = []
    for spec, run in itertools.zip_longest(args.spec or [], args.run or []):
        one.spec, one.run = spec, run
        jobs.append(_job(one))
    from ..spec import check_pack
    check_pack([j.run for j in jobs])                    # before any model is built: an error naming the runs
    limit_threads(args.threads)
    print(f"[train] pack of {len(jobs)} runs: {describe_device(jobs[0].device)}", flush=True)
    from ..stages.train_pack import run_jobs
    outs = run_jobs(jobs)
    for out in outs:
        print(f"[train] {out['run']}: done on {out['device']} ({out['threads']} threads) in a pack of "
              f"{len(jobs)}, {out['wall_seconds_this_job']} s this job, diverged={out['diverged']}")
    if args.record:
        import hashlib
        import json as _json

        from ..files import atomic_write_text
        rec = {"runs": [j.run.name for j in jobs],
               "train_json_sha256": {j.run.name: hashlib.sha256((j.run_dir / "train.json").read_bytes()).hexdigest()
                                     for j in jobs},
               "diverged": [o["run"] for o in outs if o["diverged"]],
               "float_path": sorted({p for o in outs for p in o.get("float_path", [])})}
        atomic_write_text(Path(args.record), _json.dumps(rec, indent=1) + "\n")
    return 0


def _run_folder_problem(d: Path) -> str | None:
    """Why ``d`` is not a run folder (None when it is one): a folder named
    TASK_LEVEL_SIZE holding train.json or checkpoints/step_*.safetensors; or a mixture's
    training run MIX..._SIZE (the same) or one of its units MIX..._SIZE/TASK_LEVEL holding a
    run file."""
    from ..sizes import SIZES
    from ..spec import parse_mixture_name, parse_run_name
    from ..tasks import LEVELS, TASKS
    path = Path(os.path.abspath(d))
    name = path.name
    r = parse_run_name(name) or {}
    if not d.is_dir():
        return "no such folder" if not d.exists() else "not a folder"
    unit = parse_mixture_name(f"{path.parent.name}/{name}")
    if unit is not None and unit["size"] in SIZES and unit["task"] in TASKS and unit["level"] in LEVELS:
        return None if any((d / f).exists() for f in RUN_FILES) else f"it holds none of {list(RUN_FILES)}"
    mix = parse_mixture_name(name)
    if mix is not None and mix["size"] in SIZES:
        r = {"task": TASKS[0], "level": LEVELS[0], "size": mix["size"]}      # a training run: checked below
    if r.get("task") not in TASKS or r.get("level") not in LEVELS or r.get("size") not in SIZES:
        return (f"its name {name!r} is not TASK_LEVEL_SIZE[_shuffled][_sSEED] (tasks {', '.join(TASKS)}; "
                f"levels {', '.join(LEVELS)}; sizes {', '.join(SIZES)})")
    ckpt = d / "checkpoints"
    if not (d / "train.json").is_file() and not (ckpt.is_dir() and any(ckpt.glob("step_*.safetensors"))):
        return "it holds neither train.json nor checkpoints/step_*.safetensors"
    return None


def clean_run(d: Path, checkpoints: bool = False) -> int:
    """Delete a run's derived files (RUN_FILES; with ``checkpoints`` its checkpoints too)
    so Snakemake recomputes it. Refuses, deleting nothing, a folder that is not a run folder."""
    why = _run_folder_problem(d)
    if why:
        print(f"geoanatomy clean-run: refusing {str(d)!r}: {why}. Expected a run folder "
              f"results/TASK_LEVEL_SIZE (e.g. results/mod_L3_nano) holding train.json or "
              f"checkpoints/step_*.safetensors; nothing deleted.", file=sys.stderr)
        return 2
    from ..manifest import manifest_path
    for f in RUN_FILES:
        (d / f).unlink(missing_ok=True)
        if f.endswith(".csv"):
            manifest_path(d / f).unlink(missing_ok=True)
    ckpt = d / "checkpoints"
    if checkpoints and ckpt.is_symlink():
        ckpt.unlink()  # the link only, never the folder it points to
    elif checkpoints and ckpt.exists():
        shutil.rmtree(ckpt)
    if checkpoints:  # kept otherwise: it tells the trainer the remaining checkpoints are not all
        from ..checkpoints import pruned_record
        pruned_record(d).unlink(missing_ok=True)
    print(f"cleaned {d} (checkpoints {'deleted' if checkpoints else 'kept: training resumes'})")
    return 0
