# Stage 1: train one run with dense checkpoints (results/{run}/checkpoints/).
# The checkpoints folder is deliberately not a declared output: Snakemake would delete
# it before a rerun, and the trainer resumes from it after an interruption.
rule train:
    input:
        disk_window,  # with max_unpruned_runs: an earlier run's pruned.json (common.smk)
        train_pack_record,  # with pack: {train: K}: the record of the pack that trained it
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


# With pack: {train: K} (K > 1), runs of one size train together, K per job, in one process
# (geoanatomy.stages.train_pack), each into its own results/{run}/checkpoints/ as if alone; the
# run's train job above then resumes at its last step and writes train.json. The record names
# the runs and each one's train.json hash.
rule train_pack:
    output:
        f"{RESULTS}/packs/{{pack}}.json",
    log:
        f"{RESULTS}/packs/logs/{{pack}}.log",
    benchmark:
        f"{RESULTS}/packs/benchmarks/{{pack}}.tsv"
    conda:
        CONDA_ENV
    threads: CFG["threads"]["train"]
    resources:
        runtime=pack_resource("runtime"),
        mem_mb=pack_resource("mem_mb"),
        disk_mb=pack_resource("disk_mb"),
    params:
        specs=pack_specs,
    shell:
        f"{THREAD_ENV} geoanatomy train {{params.specs:q}} --record {{output:q}}"
        " --threads {threads} > {log:q} 2>&1"
