# Pythia validation branch (geoanatomy.pythia; docs/pythia.md):
#   pythia_extract  one job per model: every selected revision -> load, sha256 fingerprint,
#                   score the benchmarks -> results/pythia_<name>/{metrics.csv, duplicates.json,
#                   extract.json} (partial/ keeps finished revisions, so a rerun resumes)
#   pythia_events   one job per model: precursor.json + trajectory.png per benchmark
#   pythia_scale    cross-size Spearman (exact permutation p) -> results/summary/pythia_scale.json
# Targets exist only when pythia.enabled is true (PYTHIA_TARGETS is empty otherwise).
# No resources here: mem_mb / runtime / gpu for pythia_extract belong in the SLURM profile's
# set-resources (a rule asking for a GPU is rejected on clusters without one).
# No torch import here (parse time); pythia_param and pythia_shell are in common.smk.
PYTHIA_MODELS = [m["name"] for m in pythia_settings.enabled_models(CFG)]
PYTHIA_BENCHMARKS = list(CFG["pythia"]["benchmarks"])
PYTHIA_TARGETS = (
    (
        expand(
            f"{RESULTS}/pythia_{{pmodel}}/{{bench}}/precursor.json",
            pmodel=PYTHIA_MODELS,
            bench=PYTHIA_BENCHMARKS,
        )
        + expand(
            f"{RESULTS}/pythia_{{pmodel}}/{{bench}}/trajectory.png",
            pmodel=PYTHIA_MODELS,
            bench=PYTHIA_BENCHMARKS,
        )
        + [f"{RESULTS}/summary/pythia_scale.json"]
    )
    if PYTHIA_MODELS
    else []
)


wildcard_constraints:
    pmodel=r"[a-z0-9][a-z0-9.-]*",


rule pythia_extract:
    output:
        metrics=f"{RESULTS}/pythia_{{pmodel}}/metrics.csv",
        duplicates=f"{RESULTS}/pythia_{{pmodel}}/duplicates.json",
        extract=f"{RESULTS}/pythia_{{pmodel}}/extract.json",
    log:
        f"{RESULTS}/pythia_{{pmodel}}/logs/extract.log",
    benchmark:
        f"{RESULTS}/pythia_{{pmodel}}/benchmarks/extract.tsv"
    conda:
        CONDA_ENV
    threads: CFG["pythia"]["threads"]
    params:
        spec=lambda w: pythia_param("extract", w.pmodel),
    shell:
        pythia_shell("extract")


rule pythia_events:
    input:
        metrics=f"{RESULTS}/pythia_{{pmodel}}/metrics.csv",
        duplicates=f"{RESULTS}/pythia_{{pmodel}}/duplicates.json",
        extract=f"{RESULTS}/pythia_{{pmodel}}/extract.json",
    output:
        precursor=expand(
            f"{RESULTS}/pythia_{{{{pmodel}}}}/{{bench}}/precursor.json",
            bench=PYTHIA_BENCHMARKS,
        ),
        figure=expand(
            f"{RESULTS}/pythia_{{{{pmodel}}}}/{{bench}}/trajectory.png",
            bench=PYTHIA_BENCHMARKS,
        ),
    log:
        f"{RESULTS}/pythia_{{pmodel}}/logs/events.log",
    benchmark:
        f"{RESULTS}/pythia_{{pmodel}}/benchmarks/events.tsv"
    conda:
        CONDA_ENV
    threads: 1
    params:
        spec=lambda w: pythia_param("events", w.pmodel),
    shell:
        pythia_shell("events")


rule pythia_scale:
    input:
        expand(
            f"{RESULTS}/pythia_{{pmodel}}/{{bench}}/precursor.json",
            pmodel=PYTHIA_MODELS,
            bench=PYTHIA_BENCHMARKS,
        ),
        expand(f"{RESULTS}/pythia_{{pmodel}}/extract.json", pmodel=PYTHIA_MODELS),
    output:
        f"{RESULTS}/summary/pythia_scale.json",
    log:
        f"{RESULTS}/summary/logs/pythia_scale.log",
    benchmark:
        f"{RESULTS}/summary/benchmarks/pythia_scale.tsv"
    conda:
        CONDA_ENV
    threads: 1
    params:
        spec=lambda w: pythia_param("scale"),
    shell:
        pythia_shell("scale")
