"""`mixkit samplers`: the sampler names and schedule types `generate` accepts."""

from __future__ import annotations

import argparse
import json


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("samplers", help="list samplers (WebUI names) and their schedule types",
                              description="List the samplers by their A1111 WebUI names, with the schedule types each "
                                          "takes and the one 'Automatic' picks for it.")
    p.add_argument("--json", action="store_true", help="print A1111's /sdapi/v1/samplers JSON shape")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipelines.samplers import SAMPLERS, list_samplers

    if args.json:
        print(json.dumps(list_samplers(), indent=2))
        return 0
    for name in SAMPLERS.names():
        spec = SAMPLERS.get(name)
        schedules = ", ".join(spec.schedule_types)
        automatic = ("the sampler's own schedule" if spec.default_schedule == "Automatic"
                     else spec.default_schedule)
        print(f"{name:<20} schedule types: {schedules} (Automatic = {automatic})")
    return 0
