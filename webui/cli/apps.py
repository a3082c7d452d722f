"""`mixkit apps [APP] [--json]`: list the AppFlow apps with their inputs, outputs and default models."""

from __future__ import annotations

import argparse
import json


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("apps", help="list the AppFlow apps (inputs, outputs, default models)",
                              description=__doc__.splitlines()[0])
    p.add_argument("app", nargs="?", help="show only this app")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from appflow import APPS, describe_app, list_apps
    from appflow.listing import format_app_list

    # An unknown name raises UnknownNameError (a KeyError/ValueError): the CLI prints it on one line.
    infos = [describe_app(APPS.get(args.app).name)] if args.app else list_apps()
    print(json.dumps(infos, indent=2) if args.json else format_app_list(infos))
    return 0
