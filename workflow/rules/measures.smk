# Stage 2b: the expensive measures (gradient effective ranks, top Hessian eigenvalue, LLC)
# at measures.n_points checkpoints fixed before training (evenly spaced by checkpoint index,
# no checkpoint chosen by an event) -> measures.csv (same columns as metrics.csv).
rule measures:
    input:
        train=train_json,  # the run's, or a mixture unit's mixture's (common.smk)
    output:
        f"{RESULTS}/{{run}}/measures.csv",
        f"{RESULTS}/{{run}}/llc_traces.csv",  # the LLC's SGLD chains, step by step
    log:
        f"{RESULTS}/{{run}}/logs/measures.log",
    benchmark:
        f"{RESULTS}/{{run}}/benchmarks/measures.tsv"
    group:
        pack_group("measures")  # small sizes share a GPU on SLURM (slurm/config.yaml)
    conda:
        CONDA_ENV
    threads: CFG["threads"]["measures"]
    resources:
        runtime=cluster_resource("measures", "runtime"),
        mem_mb=cluster_resource("measures", "mem_mb"),
    params:
        spec=lambda w: spec_param("measures", w.run),
    shell:
        stage_shell("measures")
