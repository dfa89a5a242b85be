# Stage 2b: the expensive measures (gradient effective ranks, top Hessian eigenvalue, LLC)
# on a checkpoint subset: every k-th checkpoint plus the checkpoints at the events found in
# the cheap metrics.csv (acquisition, RankMe floor/recovery) -> measures.csv (same columns).
rule measures:
    input:
        train=train_json,  # the run's, or a mixture unit's mixture's (common.smk)
        metrics=f"{RESULTS}/{{run}}/metrics.csv",
    output:
        f"{RESULTS}/{{run}}/measures.csv",
    log:
        f"{RESULTS}/{{run}}/logs/measures.log",
    benchmark:
        f"{RESULTS}/{{run}}/benchmarks/measures.tsv"
    conda:
        CONDA_ENV
    threads: CFG["threads"]["measures"]
    resources:
        runtime=cluster_resource("measures", "runtime"),
        mem_mb=cluster_resource("measures", "mem_mb"),
    params:
        # event settings pick checkpoints only when measures.events is non-empty
        spec=lambda w: spec_param("measures", w.run),
    shell:
        stage_shell("measures")
