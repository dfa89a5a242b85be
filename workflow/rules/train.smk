# Stage 1: train one run with dense checkpoints (results/{run}/checkpoints/).
# The checkpoints folder is deliberately not a declared output: Snakemake would delete
# it before a rerun, and the trainer resumes from it after an interruption.
rule train:
    input:
        disk_window,  # with max_unpruned_runs: an earlier run's pruned.json (common.smk)
    output:
        f"{RESULTS}/{{run}}/train.json",
    log:
        f"{RESULTS}/{{run}}/logs/train.log",
    benchmark:
        f"{RESULTS}/{{run}}/benchmarks/train.tsv"
    conda:
        CONDA_ENV
    threads: CFG["threads"]["train"]
    resources:
        runtime=cluster_resource("train", "runtime"),
        mem_mb=cluster_resource("train", "mem_mb"),
        disk_mb=cluster_resource("train", "disk_mb"),
    params:
        spec=lambda w: spec_param("train", w.run),
    shell:
        stage_shell("train")
