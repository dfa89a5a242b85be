"""tools/device_check.py runs in the test suite on the CPU (so it cannot rot before a GPU
is lent): training twice with one seed, measuring the same weights on the device and the CPU,
the record and the printed table."""
import json
import subprocess
import sys

import pytest

from conftest import REPO


@pytest.mark.slow
def test_device_check_runs_on_the_cpu_and_says_no_gpu_was_found(tmp_path):
    out = tmp_path / "device_check.json"
    p = subprocess.run([sys.executable, str(REPO / "tools" / "device_check.py"), "--quick", "--device", "cpu",
                        "--out", str(out), "--pack", "--pack-sizes", "nano", "--pack-k", "2",
                        "--pack-steps", "20"], capture_output=True, text=True, timeout=600, cwd=tmp_path,
                       env={"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
    assert p.returncode == 0, p.stdout + p.stderr
    rec = json.loads(out.read_text())
    assert rec["gpu_found"] is False and "no GPU found" in p.stdout and rec["pass"] is True
    (s,) = rec["sizes"]
    assert s["size"] == "nano" and s["rerun_identical"] is True           # one machine, one seed: identical
    measures = {c["measure"] for c in s["comparisons"]}
    assert {"accuracy", "loss", "rankme", "mean_share", "grad_erank", "hessian_top", "llc",
            "probe_accuracy"} <= measures
    assert all(c["max_error"] == 0.0 and c["pass"] for c in s["comparisons"])   # CPU against CPU: exact
    assert s["steps_per_s"] > 0 and s["cost_model_steps_per_s"] > 0
    for c in s["comparisons"]:                                              # the printed table has every row
        assert c["measure"] in p.stdout
    alone, pack = rec["pack"]                                               # the pack timing: one run alone, K = 2
    assert (alone["trainer"], alone["k"], pack["trainer"], pack["k"]) == ("single", 1, "packed", 2)
    assert pack["runs_per_hour"] > 0 and pack["gain_over_alone"] > 0 and "K=2" in p.stdout
