# geoanatomy: train -> metrics -> events (precursor.json + figure), one job per run and stage.
#
#   snakemake --cores 2                                   # default grid (config.yaml)
#   snakemake --cores 2 results/mod_L3_nano/precursor.json  # one run
#   snakemake -n --configfile config/paper.yaml           # the paper's 144-run grid
#
# The config is validated at parse time (workflow/schemas/config.schema.yaml plus the
# semantic checks in geoanatomy.config), so a typo fails before any job runs.
# No torch import here: every cluster job re-parses this file.
import sys
from pathlib import Path

sys.path.insert(0, str(Path(workflow.basedir) / "src"))  # library importable even without install
from geoanatomy.config import ConfigError, deep_merge, resolve, run_names  # noqa: E402
from geoanatomy.sizes import SIZES  # noqa: E402
from geoanatomy.tasks import LEVELS, TASKS  # noqa: E402
import yaml  # noqa: E402

# Without --configfile use config.yaml; --configfile replaces it entirely (Snakemake would
# otherwise deep-merge it into config.yaml and leak the default grid's keys); --config
# KEY=VALUE overrides apply on top either way.
if workflow.overwrite_configfiles:
    _user = dict(config)
else:
    _user = deep_merge(yaml.safe_load(Path(workflow.basedir, "config.yaml").read_text()) or {}, dict(config))
try:
    CFG = resolve(_user)
except ConfigError as e:
    raise SystemExit(f"geoanatomy: invalid configuration: {e}")

RESULTS = CFG["results_dir"]
RUNS = run_names(CFG)

wildcard_constraints:
    run=f"({'|'.join(TASKS)})_({'|'.join(LEVELS)})_({'|'.join(SIZES)})",


include: "workflow/rules/common.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/metrics.smk"
include: "workflow/rules/measures.smk"
include: "workflow/rules/probes.smk"
include: "workflow/rules/events.smk"
include: "workflow/rules/pythia.smk"
include: "workflow/rules/analysis.smk"

report: "workflow/report/workflow.rst"


rule all:
    input:
        expand(f"{RESULTS}/{{run}}/precursor.json", run=RUNS),
        expand(f"{RESULTS}/{{run}}/trajectory.png", run=RUNS),
        PYTHIA_TARGETS,  # empty unless pythia.enabled (workflow/rules/pythia.smk)
        SUMMARY_TARGETS,  # results/summary/ tables, statistics, figures (workflow/rules/analysis.smk)
