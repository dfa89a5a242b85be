"""geoanatomy: watch transformers learn (geometry of representations before behaviour).

Library layout: tasks (data), model (GPT), train (dense checkpoints), measures
(RankMe, ...), extract (per-checkpoint table), events (acquisition, collapse,
precursor), plots, cli (what the Snakemake rules call).
"""
__version__ = "0.1.0"
