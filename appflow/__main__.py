"""`python -m appflow list|describe|run`: the registered apps, one app in detail, or one app run from the shell.

    python -m appflow list [APP] [--json]
    python -m appflow describe APP [--json]
    python -m appflow run APP --input prompt='a fox' [--option steps=20] [--seed 1] [-o OUTDIR]
"""

from __future__ import annotations

import argparse
import json
import sys

from appflow.run_command import (INTERRUPTED_EXIT_CODE, add_describe_arguments, add_run_arguments, describe_command,
                                 run_command)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m appflow", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    listing = commands.add_parser("list", help="list the registered apps")
    listing.add_argument("app", nargs="?", help="show only this app")
    listing.add_argument("--json", action="store_true", help="print JSON instead of text")
    listing.set_defaults(func=list_command)
    describe = commands.add_parser("describe", help="one app's inputs, outputs, options (defaults) and models")
    add_describe_arguments(describe)
    describe.set_defaults(func=describe_command)
    run = commands.add_parser("run", help="run an app and write its outputs to a folder")
    add_run_arguments(run)
    run.set_defaults(func=run_command)
    args = parser.parse_args(argv)
    from mixkit.errors import MixkitError

    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:  # the second Ctrl-C of a run: aborted, nothing saved
        print("appflow: interrupted", file=sys.stderr)
        return INTERRUPTED_EXIT_CODE
    except (ValueError, TypeError, KeyError, OSError, MixkitError) as error:
        message = str(error.args[0]) if isinstance(error, KeyError) and error.args else str(error)
        print(f"appflow: error: {message}", file=sys.stderr)
        return 2


def list_command(args: argparse.Namespace) -> int:
    from appflow.apps import APPS, describe_app, list_apps
    from appflow.listing import format_app_list

    infos = [describe_app(APPS.get(args.app).name)] if args.app else list_apps()
    print(json.dumps(infos, indent=2) if args.json else format_app_list(infos))
    return 0


if __name__ == "__main__":
    sys.exit(main())
