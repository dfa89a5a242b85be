"""What every command's parser shares: one-line usage errors, --help text from a module
docstring, positive integers."""
from __future__ import annotations

import argparse


def plain(doc: str) -> str:
    """A module docstring as --help text: the reST literal markup dropped."""
    return (doc or "").replace("``", "")


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser with a usage error as one line naming the argument (exit 2), not
    the usage block before it; ``--help`` prints the usage as always. Subcommand parsers
    (``add_subparsers``) are of this class too."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (a batch size or thread count of 0 is refused by name)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{v} is not >= 1")
    return v


def device_arg(text: str) -> str:
    """argparse type: a device this machine has (runtime.device_problem): an empty string, 'gpu',
    or a CUDA device torch does not see is refused in one line before any work."""
    from ..runtime import device_problem
    problem = device_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text
