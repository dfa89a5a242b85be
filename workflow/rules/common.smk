# Helpers shared by the rule files (no torch imports: parse time stays fast).
import shlex

from geoanatomy.cli import spec_json
from geoanatomy.sizes import SIZES

# Thread-limiting environment for every job: torch and the BLAS pools under
# numpy/scipy/sklearn get exactly the rule's thread count (pitfalls.md).
THREAD_ENV = ("OMP_NUM_THREADS={threads} MKL_NUM_THREADS={threads} "
              "OPENBLAS_NUM_THREADS={threads} NUMEXPR_NUM_THREADS={threads}")


def spec_param(run, with_events=False):
    """Resolved per-run settings as a shell-quoted JSON string (a Snakemake param:
    changing any of them reruns exactly the jobs that depend on them)."""
    return shlex.quote(spec_json(CFG, run, with_events=with_events))


def run_size(run):
    return run.rsplit("_", 1)[1]
