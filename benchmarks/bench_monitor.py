"""The precursor monitor's overhead: its time as a fraction of training time, in one run.

    OMP_NUM_THREADS=1 python benchmarks/bench_monitor.py                    # nano and small
    OMP_NUM_THREADS=1 python benchmarks/bench_monitor.py --sizes nano --steps 400 --json out.json

One run per size: the trainer's update (``stages.train``: a batch of ``--batch`` task
sequences, forward, answer-token cross-entropy, backward, grad-norm clip, AdamW with the
default settings) for ``--steps`` steps, with ``geoanatomy.monitor.Monitor`` attached at its
defaults (``every`` = ``DEFAULT_EVERY``, a probe of ``DEFAULT_PROBE_SIZE`` held-out rows from
``Probe.from_task``: positions ``first`` and ``answer_mean``, every layer, RankMe uncentred
and centred, mean share, loss, accuracy, online events, a table flush every 10 measurements).

Timed separately in the same loop: the training steps and the monitor's calls (all of them:
``monitor.step`` on every step, measuring when due). Overhead = monitor seconds / training
seconds, in CPU seconds of this process (``time.process_time``: on a shared machine wall time
also counts other jobs' turns; wall seconds are printed too). ``close()`` (precursor.json and
the PNG, once per run) is reported on its own line, not in the fraction, with its parts (the
report, precursor.json, the figure). The goal: <= 5%.
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def bench_size(size: str, steps: int, batch: int, task: str, level: str, every: int, probe_n: int,
               threads: int) -> dict:
    import torch

    from geoanatomy.defaults import DEFAULTS
    from geoanatomy.model import GPT, ModelConfig, answer_loss
    from geoanatomy.monitor import Monitor, Probe
    from geoanatomy.schedule import lr_at
    from geoanatomy.stages.train import make_optimizer
    from geoanatomy.tasks import TaskData, make_task

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    tr = dict(DEFAULTS["train"])
    data = TaskData(make_task(task, level), 0)
    model = GPT(ModelConfig.from_size(size))
    opt = make_optimizer(model, tr)
    na = data.spec.n_answer
    tmp = tempfile.TemporaryDirectory(prefix=f"bench_monitor_{size}_")
    mon = Monitor(Probe.from_task(data, probe_n), every=every, out_dir=tmp.name, run=f"bench_{size}", log=None)
    batches = [torch.as_tensor(data.train_batch(s, batch)) for s in range(steps)]   # data prep untimed
    train_cpu = train_wall = mon_cpu = mon_wall = 0.0

    def timed(fn):
        c, w = time.process_time(), time.perf_counter()
        fn()
        return time.process_time() - c, time.perf_counter() - w

    c, w = timed(lambda: mon.step(model, 0))
    mon_cpu, mon_wall = mon_cpu + c, mon_wall + w
    model.train()
    for step in range(steps):
        def update(step=step):
            for g in opt.param_groups:
                g["lr"] = lr_at(step, tr["lr"], tr["warmup"], steps, tr["min_lr_frac"])
            loss = answer_loss(model, batches[step], na)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), tr["grad_clip"])
            opt.step()
            update.loss = loss.item()
        c, w = timed(update)
        train_cpu, train_wall = train_cpu + c, train_wall + w
        c, w = timed(lambda step=step: mon.step(model, step + 1, loss=update.loss))
        mon_cpu, mon_wall = mon_cpu + c, mon_wall + w
    c_close, w_close = timed(lambda: mon.close())
    tmp.cleanup()
    n_meas = len(mon.measured)
    return {"size": size, "n_params": model.n_params(), "steps": steps, "batch": batch, "task": f"{task} {level}",
            "every": every, "probe_rows": probe_n, "measurements": n_meas,
            "train_cpu_s": round(train_cpu, 3), "monitor_cpu_s": round(mon_cpu, 3),
            "train_wall_s": round(train_wall, 3), "monitor_wall_s": round(mon_wall, 3),
            "fraction_cpu": round(mon_cpu / train_cpu, 4), "fraction_wall": round(mon_wall / train_wall, 4),
            "cpu_s_per_step": round(train_cpu / steps, 4), "cpu_s_per_measurement": round(mon_cpu / n_meas, 4),
            "close_cpu_s": round(c_close, 3), "close_wall_s": round(w_close, 3),
            "close_parts_cpu_s": {k: round(v, 3) for k, v in mon.close_parts.items()}}


def main(argv=None) -> int:
    from geoanatomy.monitor import DEFAULT_EVERY, DEFAULT_PROBE_SIZE
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", nargs="+", default=["nano", "small"])
    ap.add_argument("--steps", type=int, default=None, help="training steps per size (default: 8 x every)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--task", default="cmp")
    ap.add_argument("--level", default="L3")
    ap.add_argument("--every", type=int, default=DEFAULT_EVERY)
    ap.add_argument("--probe-n", type=int, default=DEFAULT_PROBE_SIZE)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args(argv)
    steps = args.steps or 8 * args.every
    import torch
    res = []
    for size in args.sizes:
        r = bench_size(size, steps, args.batch, args.task, args.level, args.every, args.probe_n, args.threads)
        res.append(r)
        print(f"{size:>6} ({r['n_params'] / 1e6:.2f}M params): {steps} steps x batch {args.batch}, every {args.every}, "
              f"probe {args.probe_n} rows, {r['measurements']} measurements: monitor {r['monitor_cpu_s']:.2f} CPU s / "
              f"training {r['train_cpu_s']:.2f} CPU s = {100 * r['fraction_cpu']:.1f}% "
              f"(wall {100 * r['fraction_wall']:.1f}%); {1000 * r['cpu_s_per_step']:.0f} ms/step, "
              f"{1000 * r['cpu_s_per_measurement']:.0f} ms/measurement; close() {r['close_cpu_s']:.2f} CPU s once "
              f"({', '.join(f'{k} {v:.2f}' for k, v in r['close_parts_cpu_s'].items())}; the figure's share is "
              f"mostly importing matplotlib, paid once per process: Monitor(figure=False) leaves it out)",
              flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"results": res, "torch": torch.__version__,
                                               "python": platform.python_version(), "threads": args.threads,
                                               "machine": platform.machine()}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
