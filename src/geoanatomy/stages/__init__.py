"""One module per Snakemake rule, each with one ``run(...)`` entry point:

==========  ===================================================================
stage       writes (in ``results/{run}/``)
==========  ===================================================================
train       ``checkpoints/`` (dense, resumable) and ``train.json``
metrics     ``metrics.csv``: behaviour and RankMe per layer at every checkpoint
measures    ``measures.csv``: gradient ranks, Hessian top eigenvalue, LLC on a subset
probes      ``probes.csv``: linear probes per layer
events      ``precursor.json`` and ``trajectory.png``
==========  ===================================================================

``geoanatomy.cli`` maps the rule names to these modules; ``common`` holds what the
checkpoint-reading stages share.
"""
