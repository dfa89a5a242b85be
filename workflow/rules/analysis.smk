# Cross-run analysis -> results/summary/ (geoanatomy.analysis; docs/analysis.md).
#   summary_tables      precursor.json of every run -> precursor_rates, transitions, collapse_floors, floor_spread,
#                       top_down, emergence, probes (.csv) + floor_summary / top_down_summary (.json)
#   summary_scale       precursor.json (+ Pythia's pythia_scale.json) -> scale_invariance.json
#   summary_prediction  precursor.json -> prediction.json
#   summary_verdict     precursor.json + the JSON files above -> verdict.csv (one row per claim)
#   summary_figures     precursor.json + metrics.csv + scale_invariance.json -> figures/
#   summary_protocols   precursor.json of runs and mixture units -> protocols.csv, protocol_rates.csv
#                       (only when the grid has protocol: mixture blocks; docs/mixture.md)
#   summary_html        the tables and JSON files -> tables.html (one page, for the report)
# Mixture units (RESULTS/MIXTURE/COMBINATION/precursor.json) are inputs of every summary rule but
# only summary_verdict (its protocol = mixture rows) and summary_protocols use them.
# Each aggregate depends only on per-run files: adding a size or a task reruns only the new
# runs' jobs and these cheap aggregates. No torch import here (parse time).
# (json, shlex and Path come from common.smk)
from geoanatomy.analysis.load import level_order as _level_order

SUMMARY = f"{RESULTS}/summary"
SUMMARY_PRE = expand(f"{RESULTS}/{{run}}/precursor.json", run=UNITS)
SUMMARY_METRICS = expand(f"{RESULTS}/{{run}}/metrics.csv", run=RUNS)
SUMMARY_LEVELS = _level_order(r.split("_")[1] for r in RUNS)
SUMMARY_SETTINGS = shlex.quote(json.dumps(CFG["summary"], sort_keys=True))
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
SUMMARY_TABLES = [
    "verdict.csv",
    "precursor_rates.csv",
    "paired_leads.csv",
    "controls.csv",
    "transitions.csv",
    "collapse_floors.csv",
    "floor_spread.csv",
    "top_down.csv",
    "emergence.csv",
    "probes.csv",
]
SUMMARY_PROTOCOLS = ["protocols.csv", "protocol_rates.csv"] if MIXTURES else []
SUMMARY_FIGURES = (
    [f"figures/trajectories_{lv}.png" for lv in SUMMARY_LEVELS]
    + [f"figures/rankme_heatmap_{lv}.png" for lv in SUMMARY_LEVELS]
    + [
        "figures/floors_by_task.png",
        "figures/lead_lag.png",
        "figures/probes.png",
        "figures/rho_matrix.png",
    ]
)
SUMMARY_TARGETS = [
    f"{SUMMARY}/{f}" for f in SUMMARY_TABLES + SUMMARY_PROTOCOLS + SUMMARY_FIGURES
] + [
    f"{SUMMARY}/{f}"
    for f in (
        "floor_summary.json",
        "top_down_summary.json",
        "scale_invariance.json",
        "prediction.json",
        "tables.html",
    )
]


_SUMMARIZE = f"{THREAD_ENV} geoanatomy summarize"
# summary_file(SUMMARY, name, caption, category, **labels) and parent_dir are in common.smk.


rule summary_tables:
    input:
        pre=SUMMARY_PRE,
    output:
        rates=summary_file(
            SUMMARY,
            "precursor_rates.csv",
            "precursor_rates",
            "2 Tables",
            table="precursor rates",
        ),
        transitions=summary_file(
            SUMMARY,
            "transitions.csv",
            "transitions",
            "2 Tables",
            table="transitions (per run)",
        ),
        floors=summary_file(
            SUMMARY,
            "collapse_floors.csv",
            "collapse_floors",
            "2 Tables",
            table="collapse floors (per run)",
        ),
        spread=summary_file(
            SUMMARY,
            "floor_spread.csv",
            "floor_spread",
            "2 Tables",
            table="floor spread (per task)",
        ),
        top_down=summary_file(
            SUMMARY,
            "top_down.csv",
            "top_down",
            "2 Tables",
            table="top-down layer order",
        ),
        emergence=summary_file(
            SUMMARY,
            "emergence.csv",
            "emergence",
            "2 Tables",
            table="log-prob emergence",
        ),
        probes=summary_file(
            SUMMARY,
            "probes.csv",
            "probes_table",
            "2 Tables",
            table="probe acquisition",
        ),
        paired=summary_file(
            SUMMARY,
            "paired_leads.csv",
            "paired_leads",
            "2 Tables",
            table="paired leads over the loss-plateau exit",
        ),
        controls=summary_file(
            SUMMARY,
            "controls.csv",
            "controls",
            "2 Tables",
            table="shuffled-label controls",
        ),
        floor_summary=f"{SUMMARY}/floor_summary.json",
        top_down_summary=f"{SUMMARY}/top_down_summary.json",
    log:
        f"{SUMMARY}/logs/tables.log",
    benchmark:
        f"{SUMMARY}/benchmarks/tables.tsv"
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=1024,
        runtime=15,  # SLURM; the aggregates are light (docs/validation.md: measured runtime)
    params:
        settings=SUMMARY_SETTINGS,
        version=ANALYSIS_VERSION,
        out=lambda w, output: parent_dir(output.rates),
    shell:
        f"{_SUMMARIZE} tables --precursors {{input.pre:q}} --out {{params.out:q}}"
        " --settings {params.settings} --threads {threads} > {log:q} 2>&1"


rule summary_scale:
    input:
        pre=SUMMARY_PRE,
        pythia=SUMMARY_PYTHIA,
    output:
        summary_file(
            SUMMARY,
            "scale_invariance.json",
            "scale_invariance",
            "3 Statistics",
            result="scale invariance",
        ),
    log:
        f"{SUMMARY}/logs/scale.log",
    benchmark:
        f"{SUMMARY}/benchmarks/scale.tsv"
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=1024,
        runtime=15,  # SLURM; the aggregates are light (docs/validation.md: measured runtime)
    params:
        settings=SUMMARY_SETTINGS,
        version=ANALYSIS_VERSION,
        out=lambda w, output: parent_dir(output[0]),
        pythia=lambda w, input: ["--pythia", input.pythia[0]] if input.pythia else [],
    shell:
        f"{_SUMMARIZE} scale --precursors {{input.pre:q}} {{params.pythia:q}} --out {{params.out:q}}"
        " --settings {params.settings} --threads {threads} > {log:q} 2>&1"


rule summary_prediction:
    input:
        pre=SUMMARY_PRE,
    output:
        summary_file(
            SUMMARY,
            "prediction.json",
            "prediction",
            "3 Statistics",
            result="prediction limits",
        ),
    log:
        f"{SUMMARY}/logs/prediction.log",
    benchmark:
        f"{SUMMARY}/benchmarks/prediction.tsv"
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=1024,
        runtime=15,  # SLURM; the aggregates are light (docs/validation.md: measured runtime)
    params:
        settings=SUMMARY_SETTINGS,
        version=ANALYSIS_VERSION,
        out=lambda w, output: parent_dir(output[0]),
    shell:
        f"{_SUMMARIZE} prediction --precursors {{input.pre:q}} --out {{params.out:q}}"
        " --settings {params.settings} --threads {threads} > {log:q} 2>&1"


rule summary_verdict:
    input:
        pre=SUMMARY_PRE,
        json=[
            f"{SUMMARY}/{f}"
            for f in (
                "floor_summary.json",
                "top_down_summary.json",
                "scale_invariance.json",
                "prediction.json",
            )
        ],
    output:
        summary_file(
            SUMMARY,
            "verdict.csv",
            "verdict",
            "0 Verdict",
            table="verdict per claim",
        ),
    log:
        f"{SUMMARY}/logs/verdict.log",
    benchmark:
        f"{SUMMARY}/benchmarks/verdict.tsv"
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=1024,
        runtime=15,  # SLURM; the aggregates are light (docs/validation.md: measured runtime)
    params:
        settings=SUMMARY_SETTINGS,
        version=ANALYSIS_VERSION,
        out=lambda w, output: parent_dir(output[0]),
    shell:
        f"{_SUMMARIZE} verdict --precursors {{input.pre:q}} --out {{params.out:q}}"
        " --settings {params.settings} --threads {threads} > {log:q} 2>&1"


rule summary_protocols:
    input:
        pre=SUMMARY_PRE,
    output:
        protocols=summary_file(
            SUMMARY,
            "protocols.csv",
            "protocols",
            "2 Tables",
            table="single-task vs mixture protocol",
        ),
        rates=summary_file(
            SUMMARY,
            "protocol_rates.csv",
            "protocol_rates",
            "2 Tables",
            table="precursor rates per protocol",
        ),
    log:
        f"{SUMMARY}/logs/protocols.log",
    benchmark:
        f"{SUMMARY}/benchmarks/protocols.tsv"
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=1024,
        runtime=15,  # SLURM; the aggregates are light
    params:
        settings=SUMMARY_SETTINGS,
        version=ANALYSIS_VERSION,
        out=lambda w, output: parent_dir(output.protocols),
    shell:
        f"{_SUMMARIZE} protocols --precursors {{input.pre:q}} --out {{params.out:q}}"
        " --settings {params.settings} --threads {threads} > {log:q} 2>&1"


rule summary_figures:
    input:
        pre=SUMMARY_PRE,
        metrics=SUMMARY_METRICS,
        scale=f"{SUMMARY}/scale_invariance.json",
    output:
        trajectories=[
            summary_file(
                SUMMARY,
                f"figures/trajectories_{lv}.png",
                "trajectories",
                "1 Figures",
                figure=f"trajectories {lv}",
            )
            for lv in SUMMARY_LEVELS
        ],
        heatmaps=[
            summary_file(
                SUMMARY,
                f"figures/rankme_heatmap_{lv}.png",
                "rankme_heatmap",
                "1 Figures",
                figure=f"RankMe heatmap {lv}",
            )
            for lv in SUMMARY_LEVELS
        ],
        floors=summary_file(
            SUMMARY,
            "figures/floors_by_task.png",
            "floors_by_task",
            "1 Figures",
            figure="floors by task",
        ),
        lead_lag=summary_file(
            SUMMARY, "figures/lead_lag.png", "lead_lag", "1 Figures", figure="lead/lag"
        ),
        probes=summary_file(
            SUMMARY,
            "figures/probes.png",
            "probes",
            "1 Figures",
            figure="probes vs behaviour",
        ),
        rho=summary_file(
            SUMMARY,
            "figures/rho_matrix.png",
            "rho_matrix",
            "1 Figures",
            figure="rho matrix",
        ),
    log:
        f"{SUMMARY}/logs/figures.log",
    benchmark:
        f"{SUMMARY}/benchmarks/figures.tsv"
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=2048,
        runtime=30,  # SLURM; the aggregates are light (docs/validation.md: measured runtime)
    params:
        settings=SUMMARY_SETTINGS,
        version=ANALYSIS_VERSION,
        out=lambda w, output: parent_dir(output.floors, 2),
    shell:
        f"{_SUMMARIZE} figures --precursors {{input.pre:q}} --metrics {{input.metrics:q}}"
        " --scale-json {input.scale:q} --out {params.out:q} --settings {params.settings} --threads {threads} > {log:q} 2>&1"


rule summary_html:
    input:
        [f"{SUMMARY}/{f}" for f in SUMMARY_TABLES + SUMMARY_PROTOCOLS]
        + [
            f"{SUMMARY}/{f}"
            for f in (
                "floor_summary.json",
                "top_down_summary.json",
                "scale_invariance.json",
                "prediction.json",
            )
        ],
    output:
        summary_file(
            SUMMARY,
            "tables.html",
            "tables_html",
            "2 Tables",
            table="all tables on one page",
        ),
    log:
        f"{SUMMARY}/logs/html.log",
    benchmark:
        f"{SUMMARY}/benchmarks/html.tsv"
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=1024,
        runtime=15,  # SLURM; the aggregates are light (docs/validation.md: measured runtime)
    params:
        version=ANALYSIS_VERSION,
        out=lambda w, output: parent_dir(output[0]),
    shell:
        f"{_SUMMARIZE} html --out {{params.out:q}} --threads {{threads}} > {{log:q}} 2>&1"
