# Helpers shared by the rule files (no torch imports: parse time stays fast).
import functools
import shlex

from geoanatomy.config import job_spec
from geoanatomy.cost import job_resources

# Thread-limiting environment for every job: torch and the BLAS pools under
# numpy/scipy/sklearn get exactly the rule's thread count (two jobs that each use
# both cores of a 2-core machine ran 2-10x slower than two one-thread jobs).
THREAD_ENV = (
    "OMP_NUM_THREADS={threads} MKL_NUM_THREADS={threads} "
    "OPENBLAS_NUM_THREADS={threads} NUMEXPR_NUM_THREADS={threads}"
)


@functools.lru_cache(maxsize=None)
def spec_param(stage, run):
    """The stage's job spec for a run as a shell-quoted JSON string (a Snakemake param:
    changing anything the stage reads reruns exactly the jobs that read it)."""
    return shlex.quote(job_spec(CFG, run, stage).to_json())


def stage_shell(stage):
    """A stage rule's shell line: the library's CLI with the job spec and thread limits."""
    return THREAD_ENV + f" geoanatomy {stage} --spec {{params.spec}} --threads {{threads}} > {{log:q}} 2>&1"


@functools.lru_cache(maxsize=None)
def _resources(stage, run, attempt):
    return job_resources(CFG, stage, run, attempt)


def cluster_resource(stage, key):
    """Rule resource (runtime minutes, mem_mb, disk_mb) scaled by model size, steps and
    checkpoints (geoanatomy.cost; grows with the retry attempt). Used by SLURM, ignored
    by local runs. GPUs are requested only in the SLURM profile (slurm/config.yaml)."""
    return lambda wildcards, attempt: _resources(stage, wildcards.run, attempt)[key]
