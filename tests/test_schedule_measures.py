"""The expensive measures' schedule is fixed by the checkpoint schedule alone."""
import numpy as np
import pytest

from geoanatomy.schedule import checkpoint_steps, measure_steps


def test_measure_steps_spread_over_the_run_and_dense_early():
    ck = checkpoint_steps(1500, 30, 0.1, 50)
    m = measure_steps(ck, 24)
    assert len(m) == 24 and m[0] == 0 and m[-1] == 1500 and set(m) <= set(ck)
    assert sum(s <= 150 for s in m) >= 8      # the log-dense early part keeps its density
    gaps = np.diff([ck.index(s) for s in m])
    assert gaps.max() - gaps.min() <= 1       # even in checkpoint index


def test_measure_steps_do_not_depend_on_what_a_run_learns():
    # the function sees only the schedule: two runs of one size and budget get the same steps
    ck = checkpoint_steps(1500, 30, 0.1, 50)
    assert measure_steps(list(ck), 24) == measure_steps(list(reversed(ck)), 24)
    assert measure_steps(ck[:10], 24) == ck[:10]
    with pytest.raises(ValueError, match="n_points"):
        measure_steps(ck, 1)
