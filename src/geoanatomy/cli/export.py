"""``geoanatomy export RUN_DIR``: a run's checkpoints as Hugging Face GPT-2 folders
(``geoanatomy.export``; docs/monitor.md, "Opening a run with other tools").

    geoanatomy export results/copy_L1_nano                        # every checkpoint -> results/copy_L1_nano/hf
    geoanatomy export results/copy_L1_nano --out hf/copy --steps 0,100,1500
    geoanatomy scan results/copy_L1_nano/hf --probe prompts.txt   # then scan it like any HF run

OUT gets one ``checkpoint-N/`` per checkpoint (config.json, model.safetensors, the tasks'
tokenizer), loadable with ``transformers.GPT2LMHeadModel.from_pretrained``, and
``geoanatomy_export.json`` (run, steps, sha256 of every source and written file). A rerun
keeps what is already exported and adds the missing steps. Needs ``pip install -e '.[pythia]'``.
"""
from __future__ import annotations

from .args import ArgumentParser, plain, positive_int  # noqa: F401

import argparse
import sys


def _steps(text: str):
    if text == "all":
        return "all"
    try:
        steps = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        steps = []
    if not steps or any(s < 0 for s in steps):
        raise argparse.ArgumentTypeError(f"{text!r}: give 'all' or step numbers separated by commas, e.g. 0,100,1500")
    return steps


def _parser() -> argparse.ArgumentParser:
    ap = ArgumentParser(prog="geoanatomy export", description=plain(__doc__),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir", metavar="RUN_DIR", help="a trained run folder, results/<run> (holding checkpoints/)")
    ap.add_argument("--out", default=None, help="output folder (default: RUN_DIR/hf); new, empty or an earlier "
                                                "export of the same run")
    ap.add_argument("--steps", type=_steps, default="all",
                    help="'all' (default) or the checkpoint steps to export, comma-separated: 0,100,1500")
    return ap


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    from ..errors import CheckpointError
    from ..export import ExportError, export_run
    try:
        export_run(args.run_dir, args.out, args.steps)
    except (ExportError, CheckpointError) as e:
        print(f"geoanatomy export: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
