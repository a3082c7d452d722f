"""`mixkit cache list|clear`: what mixkit keeps on disk ($MIXKIT_CACHE_DIR, else ~/.cache/mixkit), and removing it.

Everything there is rebuilt on demand, so clearing is always safe; it only costs the time to
convert, calibrate, compile, render or hash again.
"""

from __future__ import annotations

import argparse
import sys


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("cache", help="list or clear mixkit's disk cache (OpenVINO graphs, compiled kernels...)",
                              description=__doc__.splitlines()[0])
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    actions.add_parser("list", help="every entry with its size, age and what it was made from").set_defaults(func=run_list)
    clear = actions.add_parser("clear", help="remove entries of the given kinds")
    clear.add_argument("kinds", nargs="+", metavar="KIND",
                       help="openvino (graphs and compiled blobs), compile (inductor kernels), world (rendered "
                            "shapes-world data), latents (training latents cached on disk), hashes (model file "
                            "hashes), or all")
    clear.add_argument("--older-than", type=float, default=None, metavar="DAYS",
                       help="only entries not modified for at least DAYS days")
    clear.add_argument("--keep-under", default=None, metavar="SIZE",
                       help="remove only as many of those entries as it takes, oldest first, for the whole cache to "
                            "hold at most SIZE (e.g. 10G, 500M)")
    clear.add_argument("--dry-run", action="store_true", help="print what would be removed, remove nothing")
    clear.set_defaults(func=run_clear)


def run_list(args: argparse.Namespace) -> int:
    from mixkit.io.cache_inventory import cache_entries
    from mixkit.io.cache_root import cache_root

    entries = cache_entries()
    print(f"mixkit cache: {cache_root()}  ({len(entries)} entries, {_size(sum(e.size for e in entries))})")
    for e in entries:
        print(f"{e.kind:9} {_size(e.size):>9} {e.age_days():6.1f} d  {e.detail}  [{e.path.name}]")
    return 0


def run_clear(args: argparse.Namespace) -> int:
    from mixkit.io.cache_inventory import cache_entries, oldest_until_under, parse_size, remove_entries, select_entries

    limit = parse_size(args.keep_under) if args.keep_under is not None else None  # a bad size fails before anything
    entries = cache_entries()
    chosen = select_entries(entries, tuple(args.kinds), args.older_than)
    if limit is not None:
        chosen = oldest_until_under(entries, chosen, limit)
    for e in chosen:
        print(f"{'would remove' if args.dry_run else 'removing'} {e.kind} {_size(e.size)}: {e.detail}  [{e.path}]")
    freed = sum(e.size for e in chosen) if args.dry_run else remove_entries(chosen)
    print(f"{'would free' if args.dry_run else 'freed'} {_size(freed)} ({len(chosen)} entries)", file=sys.stderr)
    if limit is not None and sum(e.size for e in entries) - freed > limit:
        print(f"the cache still holds {_size(sum(e.size for e in entries) - freed)}, over {args.keep_under}: "
              "the kinds chosen were not enough (try: all)", file=sys.stderr)
    return 0


def _size(count: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if count < 1024 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} GB"
