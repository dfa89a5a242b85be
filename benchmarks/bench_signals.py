"""The precursor benchmark's cheap signals: their cost as a fraction of a run's training time, in
one run. The budget (issue: "combined cost at most 10% of the run's training time at nano").

    OMP_NUM_THREADS=1 python benchmarks/bench_signals.py                 # nano, mod L3
    OMP_NUM_THREADS=1 python benchmarks/bench_signals.py --size micro --task copy --steps 300

One process: ``--steps`` of the trainer's update (``stages.train``: a batch of 64 task sequences,
forward, answer cross-entropy, backward, clipping, AdamW at the defaults), and at every
checkpoint of the default schedule that falls in those steps the metrics stage's per-checkpoint
work (``stages.metrics.measure_checkpoint`` on the 200-example evaluation set and the training
sample) twice: with the signals (ILDR, per-head effective ranks, stable ranks, update-Gram gap,
loss covariance; the ``SignalWindow`` fed every checkpoint) and without (the stage as it was:
behaviour and RankMe only). Signal cost = the difference. Fraction = signal CPU seconds over the
whole default schedule (76 checkpoints, extrapolated from the mean per checkpoint) / training
CPU seconds over the whole budget (1,500 steps, extrapolated from the mean per step). CPU
seconds of this process (``time.process_time``); a shared machine's other jobs do not count.
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", default="nano")
    ap.add_argument("--task", default="mod")
    ap.add_argument("--level", default="L3")
    ap.add_argument("--steps", type=int, default=300, help="training steps timed (default 300)")
    ap.add_argument("--checkpoints", type=int, default=20, help="checkpoints measured (default 20)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", default=None, help="write the figures to this file too")
    a = ap.parse_args(argv)

    import torch

    from geoanatomy.defaults import DEFAULTS
    from geoanatomy.model import GPT, ModelConfig, answer_loss
    from geoanatomy.schedule import checkpoint_steps, lr_at
    from geoanatomy.stages import metrics
    from geoanatomy.stages.train import make_optimizer
    from geoanatomy.tasks import TaskData, make_task

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    tr = dict(DEFAULTS["train"])
    budget = 1500
    data = TaskData(make_task(a.task, a.level), 0)
    model = GPT(ModelConfig.from_size(a.size))
    opt = make_optimizer(model, tr)
    na = data.spec.n_answer
    n_eval = int(DEFAULTS["eval"]["n_samples"])
    seq = torch.as_tensor(data.eval_set(n_eval))
    train_seq = torch.as_tensor(data.training_sample(n_eval, "metrics"))
    batches = [torch.as_tensor(data.train_batch(s, tr["batch_size"])) for s in range(a.steps)]
    n_ck = len(checkpoint_steps(budget, **tr["checkpoints"]))
    every = max(1, a.steps // a.checkpoints)
    window = metrics.SignalWindow()
    t_train = t_with = t_without = 0.0
    n_meas = 0
    for s in range(a.steps):
        c = time.process_time()
        for g in opt.param_groups:
            g["lr"] = lr_at(s, tr["lr"], tr["warmup"], budget, tr["min_lr_frac"])
        model.train()
        loss = answer_loss(model, batches[s], na)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), tr["grad_clip"])
        opt.step()
        t_train += time.process_time() - c
        if s % every == 0:
            model.eval()
            c = time.process_time()
            metrics.measure_checkpoint(model, seq, na, 1e-7, train_seq, window, s)
            t_with += time.process_time() - c
            c = time.process_time()
            rows, hidden, _ = metrics.behaviour_rows(model, seq, na, "heldout")
            metrics.geometry_rows(hidden, model.layer_names(), seq.shape[1] - 1 - na, 1e-7)
            metrics.behaviour_rows(model, train_seq, na, "train")
            t_without += time.process_time() - c
            n_meas += 1
    per_step = t_train / a.steps
    sig_per_ck = max(t_with - t_without, 0.0) / n_meas
    out = {"size": a.size, "task": f"{a.task} {a.level}", "machine": platform.processor() or platform.machine(),
           "threads": a.threads, "train_cpu_s_per_step": per_step, "metrics_cpu_s_per_checkpoint": t_without / n_meas,
           "signals_cpu_s_per_checkpoint": sig_per_ck, "checkpoints_measured": n_meas,
           "train_cpu_s_per_run": per_step * budget, "signals_cpu_s_per_run": sig_per_ck * n_ck,
           "signals_over_train": sig_per_ck * n_ck / (per_step * budget), "budget": 0.10}
    print(f"{a.size} {a.task} {a.level}: training {per_step * 1e3:.1f} ms/step x {budget} = "
          f"{per_step * budget:.1f} CPU-s; signals {sig_per_ck * 1e3:.1f} ms/checkpoint x {n_ck} = "
          f"{sig_per_ck * n_ck:.2f} CPU-s (metrics without them {t_without / n_meas * 1e3:.1f} ms/checkpoint); "
          f"signals / training = {out['signals_over_train']:.3f} (budget 0.10)")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
