# geoanatomy: train -> metrics -> events (precursor.json + figure), one job per run and stage.
#
#   snakemake --cores 2                                   # default grid (config.yaml)
#   snakemake --cores 2 results/mod_L3_nano/precursor.json  # one run
#   snakemake -n --configfile config/paper.yaml           # the paper's 144-run grid
#
# The config is validated at parse time (workflow/schemas/config.schema.yaml plus the
# semantic checks in geoanatomy.config), so a typo fails before any job runs.
# No torch import here for cpu/auto configs: every cluster job re-parses this file.
import os
import sys
from pathlib import Path

# the library is importable even without an install
sys.path.insert(0, str(Path(workflow.basedir) / "src"))
from geoanatomy.config import ConfigError, check_devices, load_config  # noqa: E402
from geoanatomy.config.load import command_line_overrides  # noqa: E402
from geoanatomy.config import mixture_names, mixture_unit_names, run_names  # noqa: E402
from geoanatomy.sizes import SIZES  # noqa: E402
from geoanatomy.tasks import LEVELS, TASKS  # noqa: E402

# One loader for `geoanatomy validate` and this file (geoanatomy.config.load_config): each
# --configfile is re-read by it (Snakemake's own parse, the global `config`, is not used:
# it would accept repeated keys and NaN), in order, replacing config.yaml entirely; without
# --configfile it reads config.yaml; --config KEY=VALUE overrides apply on top either way.
# results_dir must lie in the working directory (--directory).
_default = [str(Path(workflow.basedir, "config.yaml"))]
_files = [str(f) for f in workflow.overwrite_configfiles] or _default
_overrides = command_line_overrides(workflow.config_settings.config)
# (one line: snakefmt 2.1 cannot parse a line that starts with `workdir=`, a directive name)
_cwd = os.getcwd()
try:
    CFG = load_config(_files, overrides=_overrides, workdir=_cwd, check_device=False)
except ConfigError as e:
    raise SystemExit(f"geoanatomy: invalid configuration: {e}")


# An explicit cuda[:N] device is checked when a local run starts, before any job (torch is
# imported only then): not at parse time, where a dry run or a cluster submission (whose
# login node may have no GPU) cannot yet be told from a local run, nor in cluster jobs
# (Snakemake runs them with --no-hooks). cpu and auto never import torch here.
onstart:
    if workflow.local_exec:
        from geoanatomy.cost import check_disk

        try:
            check_devices(CFG)
            _disk = check_disk(CFG)
        except ConfigError as e:
            raise SystemExit(f"geoanatomy: invalid configuration: {e}")
        if _disk:
            print(f"geoanatomy: {_disk}", file=sys.stderr)
        # a confirmation grid (summary.frozen_rules): the rules must be the frozen ones before
        # anything trains (the summary checks again before it reads a run)
        if CFG["summary"].get("frozen_rules"):
            from geoanatomy.analysis.freeze import check as check_frozen

            try:
                print(f"geoanatomy: {check_frozen(CFG)}", file=sys.stderr)
            except ValueError as e:
                raise SystemExit(f"geoanatomy: {e}")


RESULTS = CFG["results_dir"]

# `snakemake --report` bundles the summary's tables as they are on disk: each is checked
# against its manifest first, so a hand-edited verdict.csv is never embedded.
if any(a == "--report" or a.startswith("--report=") for a in sys.argv):
    from geoanatomy.manifest import folder_problems

    _bad = folder_problems(Path(RESULTS) / "summary")
    if _bad:
        raise SystemExit("geoanatomy: not making the report: " + " | ".join(_bad[:3]))
    from geoanatomy.report.landing import landing

    # the landing page (workflow/report/workflow.rst) shows the headline figure and the counts
    config["report_landing"] = landing(Path(RESULTS) / "summary")

RUNS = run_names(CFG)
# the multi-task protocol (protocol: mixture blocks): training runs NAME_SIZE[_sN], and one
# analysis unit NAME_SIZE[_sN]/TASK_LEVEL[_shuffled] per combination (docs/mixture.md)
MIXTURES = mixture_names(CFG)
MIXTURE_UNITS = mixture_unit_names(CFG)
UNITS = RUNS + MIXTURE_UNITS


wildcard_constraints:
    # task_level_size, then _shuffled for the shuffled-label control and _sN for seeds other than 0
    # or a mixture's training run mix..._size[_sN], or one of its units mix..._size[_sN]/task_level[_shuffled]
    run=f"({'|'.join(TASKS)})_({'|'.join(LEVELS)})_({'|'.join(SIZES)})(_shuffled)?(_s[1-9][0-9]*)?"
    f"|mix[a-z0-9]*_({'|'.join(SIZES)})(_s[1-9][0-9]*)?(/({'|'.join(TASKS)})_({'|'.join(LEVELS)})(_shuffled)?)?",


include: "workflow/rules/common.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/metrics.smk"
include: "workflow/rules/measures.smk"
include: "workflow/rules/probes.smk"
include: "workflow/rules/events.smk"
include: "workflow/rules/prune.smk"
include: "workflow/rules/pythia.smk"
include: "workflow/rules/analysis.smk"


report: "workflow/report/workflow.rst"


rule all:
    input:
        expand(f"{RESULTS}/{{run}}/precursor.json", run=RUNS),
        expand(f"{RESULTS}/{{run}}/trajectory.png", run=RUNS),
        PRUNE_TARGETS,  # empty unless keep_checkpoints: final (workflow/rules/prune.smk)
        PYTHIA_TARGETS,  # empty unless pythia.enabled (workflow/rules/pythia.smk)
        SUMMARY_TARGETS,  # results/summary/ tables, statistics, figures (workflow/rules/analysis.smk)
        # the mixtures' units (empty without protocol: mixture blocks; docs/mixture.md)
        expand(f"{RESULTS}/{{run}}/precursor.json", run=MIXTURE_UNITS),
        expand(f"{RESULTS}/{{run}}/trajectory.png", run=MIXTURE_UNITS),
