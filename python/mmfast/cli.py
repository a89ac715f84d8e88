"""The ``mmfast`` command line."""

from __future__ import annotations

import argparse
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``mmfast`` console script."""
    parser = argparse.ArgumentParser(
        prog="mmfast",
        description="Images to vision-language-model tensors: bit-exact, fast, GIL-free.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser(
        "bench",
        help="time every kernel against its alternatives, measured in the same run",
        description="Time every kernel on generated images against the NumPy reference and "
        "the memory floor (np.copyto), and print the ratios.",
    )
    args = parser.parse_args(argv)
    if args.command == "bench":
        from mmfast import bench

        bench.run()
    return 0
