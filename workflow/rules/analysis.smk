# Cross-run analysis -> results/summary/ (geoanatomy.analysis; docs/analysis.md).
#   summary_tables      precursor.json of every run -> precursor_rates, transitions, collapse_floors, floor_spread,
#                       top_down, emergence, probes (.csv) + floor_summary / top_down_summary (.json)
#   summary_scale       precursor.json (+ Pythia's pythia_scale.json) -> scale_invariance.json
#   summary_prediction  precursor.json -> prediction.json
#   summary_figures     precursor.json + metrics.csv + scale_invariance.json -> figures/
#   summary_html        the tables and JSON files -> tables.html (one page, for the report)
# Each aggregate depends only on per-run files: adding a size or a task reruns only the new
# runs' jobs and these cheap aggregates. No torch import here (parse time).
import json as _sjson
import shlex as _sshlex
from pathlib import Path

from geoanatomy.analysis.load import level_order as _level_order

SUMMARY = f"{RESULTS}/summary"
SUMMARY_PRE = expand(f"{RESULTS}/{{run}}/precursor.json", run=RUNS)
SUMMARY_METRICS = expand(f"{RESULTS}/{{run}}/metrics.csv", run=RUNS)
SUMMARY_LEVELS = _level_order(r.split("_")[1] for r in RUNS)
SUMMARY_SETTINGS = _sshlex.quote(_sjson.dumps(CFG["summary"], sort_keys=True))
# Pythia's cross-size table joins scale_invariance.json when the Pythia branch is enabled
# (workflow/rules/pythia.smk makes it) or the file is already there.
SUMMARY_PYTHIA = ([f"{SUMMARY}/pythia_scale.json"]
                  if globals().get("PYTHIA_TARGETS") or Path(f"{SUMMARY}/pythia_scale.json").exists() else [])
SUMMARY_TABLES = ["precursor_rates.csv", "transitions.csv", "collapse_floors.csv", "floor_spread.csv", "top_down.csv",
                  "emergence.csv", "probes.csv"]
SUMMARY_FIGURES = ([f"figures/trajectories_{lv}.png" for lv in SUMMARY_LEVELS]
                   + [f"figures/rankme_heatmap_{lv}.png" for lv in SUMMARY_LEVELS]
                   + ["figures/floors_by_task.png", "figures/lead_lag.png", "figures/probes.png",
                      "figures/rho_matrix.png"])
SUMMARY_TARGETS = ([f"{SUMMARY}/{f}" for f in SUMMARY_TABLES + SUMMARY_FIGURES]
                   + [f"{SUMMARY}/{f}" for f in ("floor_summary.json", "top_down_summary.json",
                                                  "scale_invariance.json", "prediction.json", "tables.html")])


# An output under results/summary/ flagged for `snakemake --report`, with its caption file.
_rep = lambda name, caption, category, **labels: report(  # noqa: E731
    f"{SUMMARY}/{name}", caption=f"../report/{caption}.rst", category=category, labels=labels or None)
_SUMMARIZE = f"{THREAD_ENV} geoanatomy summarize"
_dirname = lambda path, up=1: str(Path(path).parents[up - 1])  # noqa: E731


rule summary_tables:
    input:
        pre=SUMMARY_PRE,
    output:
        rates=_rep("precursor_rates.csv", "precursor_rates", "2 Tables", table="precursor rates"),
        transitions=_rep("transitions.csv", "transitions", "2 Tables", table="transitions (per run)"),
        floors=_rep("collapse_floors.csv", "collapse_floors", "2 Tables", table="collapse floors (per run)"),
        spread=_rep("floor_spread.csv", "floor_spread", "2 Tables", table="floor spread (per task)"),
        top_down=_rep("top_down.csv", "top_down", "2 Tables", table="top-down layer order"),
        emergence=_rep("emergence.csv", "emergence", "2 Tables", table="log-prob emergence"),
        probes=_rep("probes.csv", "probes_table", "2 Tables", table="probe acquisition"),
        floor_summary=f"{SUMMARY}/floor_summary.json",
        top_down_summary=f"{SUMMARY}/top_down_summary.json",
    params:
        settings=SUMMARY_SETTINGS,
        out=lambda w, output: _dirname(output.rates),
    threads: 1
    resources:
        mem_mb=1024, runtime=15,  # SLURM; the aggregates are light (docs/validation.md: measured runtime)
    log:
        f"{SUMMARY}/logs/tables.log",
    benchmark:
        f"{SUMMARY}/benchmarks/tables.tsv"
    conda:
        "../../environment.yml"
    shell:
        f"{_SUMMARIZE} tables --precursors {{input.pre}} --out {{params.out}}"
        " --settings {params.settings} --threads {threads} > {log} 2>&1"


rule summary_scale:
    input:
        pre=SUMMARY_PRE,
        pythia=SUMMARY_PYTHIA,
    output:
        _rep("scale_invariance.json", "scale_invariance", "3 Statistics", result="scale invariance"),
    params:
        settings=SUMMARY_SETTINGS,
        out=lambda w, output: _dirname(output[0]),
        pythia=lambda w, input: f"--pythia {input.pythia[0]}" if input.pythia else "",
    threads: 1
    resources:
        mem_mb=1024, runtime=15,  # SLURM; the aggregates are light (docs/validation.md: measured runtime)
    log:
        f"{SUMMARY}/logs/scale.log",
    benchmark:
        f"{SUMMARY}/benchmarks/scale.tsv"
    conda:
        "../../environment.yml"
    shell:
        f"{_SUMMARIZE} scale --precursors {{input.pre}} {{params.pythia}} --out {{params.out}}"
        " --settings {params.settings} --threads {threads} > {log} 2>&1"


rule summary_prediction:
    input:
        pre=SUMMARY_PRE,
    output:
        _rep("prediction.json", "prediction", "3 Statistics", result="prediction limits"),
    params:
        settings=SUMMARY_SETTINGS,
        out=lambda w, output: _dirname(output[0]),
    threads: 1
    resources:
        mem_mb=1024, runtime=15,  # SLURM; the aggregates are light (docs/validation.md: measured runtime)
    log:
        f"{SUMMARY}/logs/prediction.log",
    benchmark:
        f"{SUMMARY}/benchmarks/prediction.tsv"
    conda:
        "../../environment.yml"
    shell:
        f"{_SUMMARIZE} prediction --precursors {{input.pre}} --out {{params.out}}"
        " --settings {params.settings} --threads {threads} > {log} 2>&1"


rule summary_figures:
    input:
        pre=SUMMARY_PRE,
        metrics=SUMMARY_METRICS,
        scale=f"{SUMMARY}/scale_invariance.json",
    output:
        trajectories=[_rep(f"figures/trajectories_{lv}.png", "trajectories", "1 Figures", figure=f"trajectories {lv}")
                      for lv in SUMMARY_LEVELS],
        heatmaps=[_rep(f"figures/rankme_heatmap_{lv}.png", "rankme_heatmap", "1 Figures", figure=f"RankMe heatmap {lv}")
                  for lv in SUMMARY_LEVELS],
        floors=_rep("figures/floors_by_task.png", "floors_by_task", "1 Figures", figure="floors by task"),
        lead_lag=_rep("figures/lead_lag.png", "lead_lag", "1 Figures", figure="lead/lag"),
        probes=_rep("figures/probes.png", "probes", "1 Figures", figure="probes vs behaviour"),
        rho=_rep("figures/rho_matrix.png", "rho_matrix", "1 Figures", figure="rho matrix"),
    params:
        settings=SUMMARY_SETTINGS,
        out=lambda w, output: _dirname(output.floors, 2),
    threads: 1
    resources:
        mem_mb=2048, runtime=30,  # SLURM; the aggregates are light (docs/validation.md: measured runtime)
    log:
        f"{SUMMARY}/logs/figures.log",
    benchmark:
        f"{SUMMARY}/benchmarks/figures.tsv"
    conda:
        "../../environment.yml"
    shell:
        f"{_SUMMARIZE} figures --precursors {{input.pre}} --metrics {{input.metrics}}"
        " --scale-json {input.scale} --out {params.out} --settings {params.settings} --threads {threads} > {log} 2>&1"


rule summary_html:
    input:
        [f"{SUMMARY}/{f}" for f in SUMMARY_TABLES]
        + [f"{SUMMARY}/{f}" for f in ("floor_summary.json", "top_down_summary.json", "scale_invariance.json",
                                      "prediction.json")],
    output:
        _rep("tables.html", "tables_html", "2 Tables", table="all tables on one page"),
    params:
        out=lambda w, output: _dirname(output[0]),
    threads: 1
    resources:
        mem_mb=1024, runtime=15,  # SLURM; the aggregates are light (docs/validation.md: measured runtime)
    log:
        f"{SUMMARY}/logs/html.log",
    benchmark:
        f"{SUMMARY}/benchmarks/html.tsv"
    conda:
        "../../environment.yml"
    shell:
        f"{_SUMMARIZE} html --out {{params.out}} --threads {{threads}} > {{log}} 2>&1"
