# Stage 2: one forward pass per checkpoint over the fixed held-out evaluation set ->
# the run's long-format table (accuracy, log-probabilities, RankMe per layer/position).
rule metrics:
    input:
        train_json,  # the run's, or a mixture unit's mixture's (common.smk)
    output:
        f"{RESULTS}/{{run}}/metrics.csv",
        f"{RESULTS}/{{run}}/example_losses.csv",
    log:
        f"{RESULTS}/{{run}}/logs/metrics.log",
    benchmark:
        f"{RESULTS}/{{run}}/benchmarks/metrics.tsv"
    conda:
        CONDA_ENV
    threads: CFG["threads"]["metrics"]
    resources:
        runtime=cluster_resource("metrics", "runtime"),
        mem_mb=cluster_resource("metrics", "mem_mb"),
    params:
        spec=lambda w: spec_param("metrics", w.run),
    shell:
        stage_shell("metrics")
