# Stage 3: event detection (acquisition, collapse, floor, recovery, precursor, difficulty)
# -> precursor.json, and the run's trajectory figure.
rule events:
    input:
        train=train_json,  # the run's, or a mixture unit's mixture's (common.smk)
        metrics=f"{RESULTS}/{{run}}/metrics.csv",
        measures=f"{RESULTS}/{{run}}/measures.csv",  # expensive measures (measures.smk)
        probes=f"{RESULTS}/{{run}}/probes.csv",  # linear probes (probes.smk)
    output:
        precursor=f"{RESULTS}/{{run}}/precursor.json",
        figure=report(
            f"{RESULTS}/{{run}}/trajectory.png",
            caption="../report/run_trajectory.rst",
            category="4 Runs",
            labels={"run": "{run}"},
        ),
        curves=f"{RESULTS}/{{run}}/signal_curves.csv",  # the precursor benchmark's curves
        costs=f"{RESULTS}/{{run}}/signal_costs.json",  # and their CPU seconds
    log:
        f"{RESULTS}/{{run}}/logs/events.log",
    benchmark:
        f"{RESULTS}/{{run}}/benchmarks/events.tsv"
    conda:
        CONDA_ENV
    threads: CFG["threads"]["events"]
    resources:
        runtime=cluster_resource("events", "runtime"),
        mem_mb=cluster_resource("events", "mem_mb"),
    params:
        spec=lambda w: spec_param("events", w.run),
    shell:
        stage_shell("events")
