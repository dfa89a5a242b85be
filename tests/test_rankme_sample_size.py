"""geoanatomy.stages.sample_size (tools/rankme_sample_size.py) on the session's tiny trained run: its N = eval.n_samples
curve is the metrics stage's, an N above the held-out pool is cut to the pool."""
import numpy as np
import pytest



def _bench():
    from geoanatomy.stages import sample_size
    return sample_size


@pytest.mark.slow
def test_curves_match_metrics_and_cut_to_the_pool(trained_run):
    from geoanatomy.defaults import DEFAULTS
    cfg, spec, run_dir = trained_run
    bench = _bench()
    n_eval = int(cfg["eval"]["n_samples"])
    pool = int(cfg["data"]["n_heldout"])
    c = bench.run_curves(spec, run_dir, [n_eval, 3 * n_eval, 2 * pool])
    assert c["pool"] == pool and c["n_used"] == [n_eval, 3 * n_eval, pool]
    assert all(1 <= k <= n for k, n in zip(c["distinct_inputs"], c["n_used"]))
    for variant in ("uncentred", "centred"):
        for n in c["n_used"]:
            v = np.asarray(c["values"][variant][n])
            assert len(v) == len(c["steps"]) and np.all((v >= 1 - 1e-6) & (v <= min(n, c["width"]) + 1e-6))
    check = bench.metrics_check(run_dir, c, n_eval, DEFAULTS["events"])
    assert check["max_abs_diff"] < 1e-3 and check["events_agree"]
    assert bench.metrics_check(run_dir, c, n_eval + 1, DEFAULTS["events"]) is None
