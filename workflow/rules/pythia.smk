# Pythia validation branch (geoanatomy.pythia; docs/pythia.md):
#   pythia_extract  one job per model: every selected revision -> load, sha256 fingerprint,
#                   score the benchmarks -> results/pythia_<name>/{metrics.csv, duplicates.json,
#                   extract.json} (partial/ keeps finished revisions, so a rerun resumes)
#   pythia_events   one job per model: precursor.json + trajectory.png per benchmark
#   pythia_scale    cross-size Spearman (exact permutation p) -> results/summary/pythia_scale.json
# Targets exist only when pythia.enabled is true (PYTHIA_TARGETS is empty otherwise).
# No resources here: mem_mb / runtime / gpu for pythia_extract belong in the SLURM profile's
# set-resources (a rule asking for a GPU is rejected on clusters without one).
# No torch import here (parse time).
import json as _json
import shlex as _shlex

from geoanatomy.pythia import settings as _pyset

PYTHIA_MODELS = [m["name"] for m in _pyset.enabled_models(CFG)]
PYTHIA_BENCHMARKS = list(CFG["pythia"]["benchmarks"])
PYTHIA_TARGETS = (
    expand(f"{RESULTS}/pythia_{{pmodel}}/{{bench}}/precursor.json", pmodel=PYTHIA_MODELS, bench=PYTHIA_BENCHMARKS)
    + expand(f"{RESULTS}/pythia_{{pmodel}}/{{bench}}/trajectory.png", pmodel=PYTHIA_MODELS, bench=PYTHIA_BENCHMARKS)
    + [f"{RESULTS}/summary/pythia_scale.json"]
) if PYTHIA_MODELS else []


def pythia_param(kind, name=None):
    """Resolved settings of one Pythia job as a shell-quoted JSON param (a change reruns it)."""
    spec = {"extract": _pyset.extract_spec, "events": _pyset.events_spec}[kind](CFG, name) \
        if kind != "scale" else _pyset.scale_spec(CFG)
    return _shlex.quote(_json.dumps(spec, sort_keys=True))


wildcard_constraints:
    pmodel=r"[a-z0-9][a-z0-9.-]*",


rule pythia_extract:
    output:
        metrics=f"{RESULTS}/pythia_{{pmodel}}/metrics.csv",
        duplicates=f"{RESULTS}/pythia_{{pmodel}}/duplicates.json",
        extract=f"{RESULTS}/pythia_{{pmodel}}/extract.json",
    params:
        spec=lambda w: pythia_param("extract", w.pmodel),
    threads: CFG["pythia"]["threads"]
    log:
        f"{RESULTS}/pythia_{{pmodel}}/logs/extract.log",
    benchmark:
        f"{RESULTS}/pythia_{{pmodel}}/benchmarks/extract.tsv"
    conda:
        "../../environment.yml"
    shell:
        THREAD_ENV + " geoanatomy pythia extract --spec {params.spec} --threads {threads} > {log} 2>&1"


rule pythia_events:
    input:
        metrics=f"{RESULTS}/pythia_{{pmodel}}/metrics.csv",
        duplicates=f"{RESULTS}/pythia_{{pmodel}}/duplicates.json",
        extract=f"{RESULTS}/pythia_{{pmodel}}/extract.json",
    output:
        precursor=expand(f"{RESULTS}/pythia_{{{{pmodel}}}}/{{bench}}/precursor.json", bench=PYTHIA_BENCHMARKS),
        figure=expand(f"{RESULTS}/pythia_{{{{pmodel}}}}/{{bench}}/trajectory.png", bench=PYTHIA_BENCHMARKS),
    params:
        spec=lambda w: pythia_param("events", w.pmodel),
    threads: 1
    log:
        f"{RESULTS}/pythia_{{pmodel}}/logs/events.log",
    benchmark:
        f"{RESULTS}/pythia_{{pmodel}}/benchmarks/events.tsv"
    conda:
        "../../environment.yml"
    shell:
        THREAD_ENV + " geoanatomy pythia events --spec {params.spec} --threads {threads} > {log} 2>&1"


rule pythia_scale:
    input:
        expand(f"{RESULTS}/pythia_{{pmodel}}/{{bench}}/precursor.json", pmodel=PYTHIA_MODELS, bench=PYTHIA_BENCHMARKS),
        expand(f"{RESULTS}/pythia_{{pmodel}}/extract.json", pmodel=PYTHIA_MODELS),
    output:
        f"{RESULTS}/summary/pythia_scale.json",
    params:
        spec=lambda w: pythia_param("scale"),
    threads: 1
    log:
        f"{RESULTS}/summary/logs/pythia_scale.log",
    benchmark:
        f"{RESULTS}/summary/benchmarks/pythia_scale.tsv"
    conda:
        "../../environment.yml"
    shell:
        THREAD_ENV + " geoanatomy pythia scale --spec {params.spec} --threads {threads} > {log} 2>&1"
