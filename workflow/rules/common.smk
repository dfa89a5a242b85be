# Helpers shared by the rule files (no torch imports: parse time stays fast).
import functools
import shlex

from geoanatomy.cli import spec_json
from geoanatomy.sizes import SIZES

# Thread-limiting environment for every job: torch and the BLAS pools under
# numpy/scipy/sklearn get exactly the rule's thread count (pitfalls.md).
THREAD_ENV = ("OMP_NUM_THREADS={threads} MKL_NUM_THREADS={threads} "
              "OPENBLAS_NUM_THREADS={threads} NUMEXPR_NUM_THREADS={threads}")


@functools.lru_cache(maxsize=None)  # train and metrics ask for the same run's spec
def spec_param(run, with_events=False, blocks=(), for_train=False):
    """Resolved per-run settings as a shell-quoted JSON string (a Snakemake param:
    changing any of them reruns exactly the jobs that depend on them); ``blocks`` adds
    config blocks such as ("measures",) to the JSON."""
    return shlex.quote(spec_json(CFG, run, with_events=with_events, blocks=tuple(blocks), for_train=for_train))


def run_size(run):
    return run.rsplit("_", 1)[1]


def cluster_resource(stage, key):
    """Rule resource (runtime minutes, mem_mb, disk_mb) scaled by model size, steps and
    checkpoints (geoanatomy.cluster; grows with the retry attempt). Used by SLURM, ignored
    by local runs. GPUs are requested only in the SLURM profile (slurm/config.yaml)."""
    from geoanatomy.cluster import job_resources
    return lambda wildcards, attempt: job_resources(CFG, stage, wildcards.run, attempt)[key]
