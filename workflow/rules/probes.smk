# Stage 2c (after metric extraction): logistic-regression probes on frozen hidden states,
# every layer at every checkpoint (behaviour's own), predicting the answer token -> probes.csv.
rule probes:
    input:
        train=train_json,  # the run's, or a mixture unit's mixture's (common.smk)
        metrics=f"{RESULTS}/{{run}}/metrics.csv",
    output:
        f"{RESULTS}/{{run}}/probes.csv",
    log:
        f"{RESULTS}/{{run}}/logs/probes.log",
    benchmark:
        f"{RESULTS}/{{run}}/benchmarks/probes.tsv"
    conda:
        CONDA_ENV
    threads: CFG["threads"]["probes"]
    resources:
        runtime=cluster_resource("probes", "runtime"),
        mem_mb=cluster_resource("probes", "mem_mb"),
    params:
        spec=lambda w: spec_param("probes", w.run),
    shell:
        stage_shell("probes")
