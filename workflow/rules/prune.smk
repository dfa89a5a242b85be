# Stage 4 (keep_checkpoints: final only): once metrics, measures and probes of a run have
# read its analysis checkpoints, remove them (the newest weights, the resume state and
# the training log stay) -> results/{run}/pruned.json. train.json stays, so Snakemake
# never retrains; a stage that needs the checkpoints again says how to rebuild them.
# A mixture's training run is pruned once every unit (combination) evaluated on its
# checkpoints has its metrics, measures and probes.


rule prune:
    input:
        train=f"{RESULTS}/{{run}}/train.json",
        metrics=prune_readers("metrics.csv"),
        measures=prune_readers("measures.csv"),
        probes=prune_readers("probes.csv"),
    output:
        f"{RESULTS}/{{run}}/pruned.json",
    log:
        f"{RESULTS}/{{run}}/logs/prune.log",
    conda:
        CONDA_ENV
    threads: 1
    params:
        spec=lambda w: spec_param("prune", w.run),
    shell:
        stage_shell("prune")


# the runs whose checkpoints are pruned (rule all asks for their pruned.json)
PRUNE_TARGETS = (
    expand(f"{RESULTS}/{{run}}/pruned.json", run=RUNS + MIXTURES)
    if CFG["keep_checkpoints"] == "final"
    else []
)
