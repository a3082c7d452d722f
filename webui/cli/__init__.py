"""The `mixkit` command line: one module per sub-command, each a thin layer over the Python API.

Each module in `SUBCOMMANDS` defines `add_parser(subparsers)` (which sets `func` on its parser)
and does its heavy imports inside the function it runs, so `mixkit --help` stays fast.
User errors (bad values, missing files, unsafe checkpoints) end in one line on stderr and exit
code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from mixkit.errors import MixkitError

SUBCOMMANDS = ["apps", "cache", "eval", "extras", "generate", "img2img", "info", "interrogate", "ip_adapter_embeds",
               "lora", "merge", "outpaint", "samplers", "tiny_model", "train", "webui", "world"]

# MixkitError: every mixkit error is a user's, including those that are OSErrors (a checkpoint that cannot be
# written, an unusable latent-cache folder) or ImportErrors (an attention backend that is not installed).
USER_ERRORS = (ValueError, TypeError, FileNotFoundError, NotADirectoryError, PermissionError, KeyError, MixkitError)
# A reader that closed our stdout early (`mixkit samplers | head -1`) is not an error: exit quietly, with the
# status a process killed by SIGPIPE reports in a shell (128 + 13), as `cat` and other Unix tools do.
BROKEN_PIPE_EXIT_CODE = 141


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mixkit", description="mixkit: multimodal generation and understanding on PyTorch.")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(f"webui.cli.{name}").add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    # A sub-command that takes free-form flags (`train`: kohya's --network_dim=16 ...) sets `extra_flags` to a
    # function that folds them into its arguments; for every other one they stay argparse's error.
    args, extra = parser.parse_known_args(argv)
    if extra and getattr(args, "extra_flags", None) is None:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.version:
        from mixkit import __version__

        print(f"mixkit {__version__}")
        return 0
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        if extra:
            args.extra_flags(args, extra)
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler below, not at interpreter exit
        return code
    except BrokenPipeError:
        _silence_stdout()
        return BROKEN_PIPE_EXIT_CODE
    except KeyboardInterrupt:
        print("mixkit: interrupted", file=sys.stderr)
        return 130
    except USER_ERRORS as error:
        message = str(error.args[0]) if isinstance(error, KeyError) and error.args else str(error)
        print(f"mixkit: error: {message}", file=sys.stderr)
        return 2


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush of what is still buffered for the closed pipe
    raises no second BrokenPipeError (the recipe of Python's `signal` documentation)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout replaced by an object without a file descriptor (tests)
        pass


if __name__ == "__main__":
    sys.exit(main())
