"""`python -m appflow list [APP] [--json]`: the registered apps with inputs, outputs and default models."""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m appflow", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    listing = commands.add_parser("list", help="list the registered apps")
    listing.add_argument("app", nargs="?", help="show only this app")
    listing.add_argument("--json", action="store_true", help="print JSON instead of text")
    args = parser.parse_args(argv)
    from appflow.apps import APPS, describe_app, list_apps
    from appflow.listing import format_app_list
    from mixkit.errors import UnknownNameError

    try:
        infos = [describe_app(APPS.get(args.app).name)] if args.app else list_apps()
    except UnknownNameError as error:
        print(f"appflow: error: {error}", file=sys.stderr)
        return 2
    print(json.dumps(infos, indent=2) if args.json else format_app_list(infos))
    return 0


if __name__ == "__main__":
    sys.exit(main())
