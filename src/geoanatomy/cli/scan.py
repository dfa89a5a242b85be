"""``geoanatomy scan SOURCE [SOURCE ...] --probe PROBE``: geometric events of checkpoints, one
curve over every source (``geoanatomy.scan``; docs/monitor.md).

    geoanatomy scan runs/my-model --probe prompts.txt             # one prompt a line: loss
    geoanatomy scan runs/my-model --probe syntax --out scan_out   # a shipped benchmark: accuracy
    geoanatomy scan pythia-160m --probe deduction3 --n-items 50 --device cuda
    geoanatomy scan EleutherAI/pythia-70m@step1000 EleutherAI/pythia-70m@step2000 --probe syntax --out o
    geoanatomy scan revisions.yaml --probe syntax                 # a YAML source list (run, cache_dir, sources)

A SOURCE is a folder of ``stepN/`` or ``checkpoint-N/`` sub-folders, a hub revision
``owner/name@revision`` (fetched into the Hugging Face cache, its weight files' sha256 checked
against the hub's listing, evicted once measured unless --keep-cache), or one YAML file listing
them. Sources that differ in architecture, or give one step twice, are refused before any
weights are downloaded. A rerun reuses every checkpoint already measured under the same
settings (``OUT/partial/``). Never remote code; safetensors or ``torch.load(weights_only=True)``.
"""
from __future__ import annotations

from .args import ArgumentParser, device_arg, plain, positive_int  # noqa: F401

import argparse
import sys


def _parser() -> argparse.ArgumentParser:
    from ..config.pythia import BENCHMARKS
    ap = ArgumentParser(prog="geoanatomy scan", description=plain(__doc__),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sources", nargs="+", metavar="SOURCE",
                    help="a folder with stepN/ or checkpoint-N/ sub-folders of a HF causal LM, a hub revision "
                         "owner/name@revision, or one YAML source list")
    ap.add_argument("--probe", required=True,
                    help=("a .jsonl file of {\"prompt\": ..., \"completion\": ...} lines (only the completion is "
                          "scored), "
                          f"a text file of prompts (one a line), or a shipped benchmark: {', '.join(BENCHMARKS)}"))
    ap.add_argument("--out", default=None, help="output folder (default: DIR/geoanatomy_scan for one folder, "
                                                "NAME_geoanatomy_scan beside a YAML list)")
    ap.add_argument("--run", default=None, help="run name in the table (default: the folder's, the YAML's or "
                                                "the repository's name)")
    ap.add_argument("--cache-dir", default=None, help="Hugging Face cache for hub revisions (default: HF_HOME's)")
    ap.add_argument("--keep-cache", action="store_true", default=None,
                    help="leave the hub revisions this scan downloaded in the cache (default: evicted once measured)")
    ap.add_argument("--tokenizer", default=None, help="tokenizer folder (default: the checkpoint's, then DIR)")
    ap.add_argument("--n-items", type=positive_int, default=None,
                    help="benchmark: items (deduction: how many to generate, fixed sets: the first n); "
                         "prompt file: the first n prompts")
    ap.add_argument("--seed", type=int, default=0, help="seed of the generated deduction puzzles")
    ap.add_argument("--train-probe", default=None, metavar="FILE",
                    help="a probe set from the training data (prompt/completion .jsonl or a benchmark): its accuracy "
                         "gives the training-fit event and grokking's delay (generalisation_delay)")
    ap.add_argument("--layer", default=None, help="headline layer (default: ln_final, the last)")
    ap.add_argument("--scoring", choices=["sum", "mean"], default="sum", help="benchmark accuracy scoring")
    ap.add_argument("--signals", nargs="*", default=[],
                    help="registry signals of the weights added to every checkpoint: stable_rank, update_gap")
    ap.add_argument("--device", type=device_arg, default="auto", help="auto | cpu | cuda[:N]")
    ap.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32",
                    help="dtype the checkpoints are loaded in (default float32)")
    ap.add_argument("--batch-size", type=positive_int, default=16, help="probe rows per forward pass (default 16)")
    ap.add_argument("--threads", type=positive_int, default=1, help="CPU threads (default 1)")
    ap.add_argument("--config", default=None, help="a config file whose `events:` block sets the thresholds")
    return ap


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    from ..runtime import limit_threads
    limit_threads(args.threads)
    from ..scan import ScanError, scan
    from ..hf import ScanLoadError
    cfg_events = None
    try:
        if args.config:
            from ..config import load_config
            cfg_events = load_config(args.config)["events"]
        scan(args.sources, args.probe, args.out, run=args.run, tokenizer=args.tokenizer, n_items=args.n_items,
             seed=args.seed, device=args.device, dtype=args.dtype, batch_size=args.batch_size,
             scoring=args.scoring, layer=args.layer, train_probe=args.train_probe, cfg_events=cfg_events,
             signals=args.signals,
             cache_dir=args.cache_dir, keep_cache=args.keep_cache)
    except (ScanError, ScanLoadError, ValueError) as e:
        print(f"geoanatomy scan: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
