"""`mixkit apps`: list the AppFlow apps, describe one, or run one.

    mixkit apps [APP] [--json]          the apps with their inputs, outputs and default models (`list` is implied)
    mixkit apps describe APP [--json]   one app's inputs, outputs, options with defaults and models
    mixkit apps run APP --input prompt='a fox' [--option steps=20] [--seed 1] [-o OUTDIR]
"""

from __future__ import annotations

import argparse
import json

COMMANDS = ("list", "describe", "run")


class AppsArgumentParser(argparse.ArgumentParser):
    """`mixkit apps`'s parser: without a sub-command (`mixkit apps`, `mixkit apps qrcode_art --json`) it lists, as it
    did before `describe` and `run` existed, so those command lines keep working."""

    def parse_known_args(self, args=None, namespace=None):
        args = list(args or [])
        first = next((arg for arg in args if not arg.startswith("-")), None)
        if first not in COMMANDS and not any(arg in ("-h", "--help") for arg in args[:1]):
            args = ["list", *args]
        return super().parse_known_args(args, namespace)


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("apps", help="list, describe or run the AppFlow apps",
                              description=__doc__.splitlines()[0], epilog=__doc__.split("\n\n", 1)[1],
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    # argparse builds sub-parsers itself (one class for all); this one alone needs the default sub-command above
    p.__class__ = AppsArgumentParser
    commands = p.add_subparsers(dest="apps_command", metavar="{list,describe,run}", parser_class=argparse.ArgumentParser)
    listing = commands.add_parser("list", help="list the apps (the default)")
    listing.add_argument("app", nargs="?", help="show only this app")
    listing.add_argument("--json", action="store_true", help="print JSON instead of text")
    listing.set_defaults(func=run_list)
    from appflow.run_command import add_describe_arguments, add_run_arguments, describe_command, run_command

    describe = commands.add_parser("describe", help="one app's inputs, outputs, options (defaults) and models")
    add_describe_arguments(describe)
    describe.set_defaults(func=describe_command)
    run = commands.add_parser("run", help="run an app and write its outputs to a folder",
                              description="Run an AppFlow app: inputs typed by its ports, options by their defaults; "
                                          "images, masks, video and audio written as files, the rest as result.json.")
    add_run_arguments(run)
    run.set_defaults(func=run_command)


def run_list(args: argparse.Namespace) -> int:
    from appflow import APPS, describe_app, list_apps
    from appflow.listing import format_app_list

    # An unknown name raises UnknownNameError (a KeyError/ValueError): the CLI prints it on one line.
    infos = [describe_app(APPS.get(args.app).name)] if args.app else list_apps()
    print(json.dumps(infos, indent=2) if args.json else format_app_list(infos))
    return 0
