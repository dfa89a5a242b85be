# Cross-run analysis -> results/summary/ (geoanatomy.analysis; docs/analysis.md).
# One rule summary_<part> per part of the registry geoanatomy.analysis.parts (what each reads,
# the files it writes, their report captions): tables, scale, prediction, verdict (one row
# per claim), protocols (targets only when the grid has protocol: mixture blocks;
# docs/mixture.md), figures, html (tables.html, one page for the report).
# Mixture units (RESULTS/MIXTURE/COMBINATION/precursor.json) are inputs of every summary rule but
# only summary_verdict (its protocol = mixture rows) and summary_protocols use them.
# Each aggregate depends only on per-run files: adding a size or a task reruns only the new
# runs' jobs and these cheap aggregates. No torch import here (parse time).
# (json and Path come from common.smk)
from geoanatomy.analysis.load import level_order as _level_order
from geoanatomy.analysis.parts import PARTS as _PARTS
from geoanatomy.analysis.parts import MIXTURE_FILES as _PART_MIXTURE_FILES
from geoanatomy.analysis.parts import targets as _summary_targets

SUMMARY = f"{RESULTS}/summary"
SUMMARY_LEVELS = _level_order(r.split("_")[1] for r in RUNS)
SUMMARY_SETTINGS = json.dumps(CFG["summary"], sort_keys=True)
# The analysis code's version is a param of every summary rule: editing the analysis code
# reruns the summaries (edits under src/ alone never trigger a rerun).
ANALYSIS_VERSION = source_version(
    "analysis", "cli/summarize.py", "table.py", "files.py"
)
# Pythia's cross-size table joins scale_invariance.json when the Pythia branch is enabled
# (workflow/rules/pythia.smk makes it) or the file is already there.
SUMMARY_PYTHIA = (
    [f"{SUMMARY}/pythia_scale.json"]
    if globals().get("PYTHIA_TARGETS") or Path(f"{SUMMARY}/pythia_scale.json").exists()
    else []
)
# protocols.csv, protocol_rates.csv: targets and html inputs only with mixture blocks
_MIXTURE_FILES = set() if MIXTURES else _PART_MIXTURE_FILES
SUMMARY_TARGETS = [
    f"{SUMMARY}/{f}" for f in _summary_targets(SUMMARY_LEVELS, mixtures=bool(MIXTURES))
]


_SUMMARIZE = f"{THREAD_ENV} geoanatomy summarize"
_PER_RUN = {"unit": UNITS, "run": RUNS}
# summary_file(SUMMARY, name, caption, category, **labels) and parent_dir are in common.smk.


def _summary_inputs(part):
    """A part's named inputs: a per-run file of every unit (runs and mixture units) or of
    every training run, or files under results/summary/ (the optional one only when it
    will be there: SUMMARY_PYTHIA; mixture-only files only in a grid with mixtures)."""
    files = {}
    for i in part.inputs:
        if i.where in _PER_RUN:
            files[i.key] = [
                f"{RESULTS}/{run}/{f}" for f in i.files for run in _PER_RUN[i.where]
            ]
        elif i.optional:
            files[i.key] = [f for f in SUMMARY_PYTHIA if Path(f).name in i.files]
        else:
            files[i.key] = [
                f"{SUMMARY}/{f}" for f in i.files if f not in _MIXTURE_FILES
            ]
    return files


def _summary_outputs(part):
    """A part's outputs, each flagged for the report with its caption (summary_file)."""
    return [
        (
            summary_file(SUMMARY, path, o.caption, o.category, **labels)
            if o.caption
            else f"{SUMMARY}/{path}"
        )
        for o in part.outputs
        for path, labels in o.expand(SUMMARY_LEVELS)
    ]


def _summary_args(part):
    """params.args: the part's `geoanatomy summarize` arguments (its name; each input that
    has a flag, an optional one only when listed; --out; the resolved summary: block, so a
    settings change reruns the part). A function of this part, not of the loop below: the
    shell command is formatted when a job runs, after the loop has moved on."""
    depth = len(Path(part.outputs[0].path).parts)

    def args(wildcards, input, output):
        a = [part.name]
        for i in part.inputs:
            files = list(getattr(input, i.key))
            if i.flag and (files or not i.optional):
                a += [i.flag, *files]
        a += ["--out", parent_dir(output[0], depth)]
        return a + (["--settings", SUMMARY_SETTINGS] if part.settings else [])

    return args


for _part in _PARTS:

    rule:
        name:
            f"summary_{_part.name}"
        input:
            **_summary_inputs(_part),
        output:
            _summary_outputs(_part),
        log:
            f"{SUMMARY}/logs/{_part.name}.log",
        benchmark:
            f"{SUMMARY}/benchmarks/{_part.name}.tsv"
        conda:
            CONDA_ENV
        threads: _part.threads
        resources:
            mem_mb=_part.mem_mb,
            runtime=_part.runtime,  # SLURM (docs/validation.md: measured runtime)
        params:
            version=ANALYSIS_VERSION,
            args=_summary_args(_part),
        shell:
            f"{_SUMMARIZE} {{params.args:q}} --threads {{threads}} > {{log:q}} 2>&1"
