"""`mixkit info IMAGE`: print the A1111 infotext stored in an image (PNG chunk or JPEG/WebP EXIF).

Exit codes: 0 printed, 1 the image has no infotext, 2 the file is missing, unreadable or not an image.
"""

from __future__ import annotations

import argparse
import json
import sys

NO_INFOTEXT_EXIT_CODE = 1


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("info", help="print the generation parameters (infotext) stored in an image",
                              description=__doc__.splitlines()[0])
    p.add_argument("image", help="PNG, JPEG or WebP file")
    p.add_argument("--json", action="store_true", help="print the parsed parameters as JSON instead of the text")
    p.add_argument("--no-defaults", action="store_true",
                   help="with --json, leave out the values A1111 assumes for keys the infotext does not mention")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipelines.infotext import parse_infotext
    from pipelines.infotext_read import read_infotext

    if args.no_defaults and not args.json:
        raise ValueError("--no-defaults changes only the --json output (the text is printed as the image stores it, "
                         "with no defaults added); add --json, or leave out --no-defaults")
    text = read_infotext(args.image)
    if text is None:
        print(f"mixkit: {args.image} has no infotext (no PNG 'parameters' chunk, no EXIF UserComment)", file=sys.stderr)
        return NO_INFOTEXT_EXIT_CODE
    if args.json:
        print(json.dumps(parse_infotext(text, defaults=not args.no_defaults), ensure_ascii=False, indent=2))
    else:
        print(text)
    return 0
