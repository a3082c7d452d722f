"""Write the CLIP BPE merges that mixkit ships, from open_clip's `bpe_simple_vocab_16e6.txt.gz`.

Real SD checkpoints need the real CLIP tokenizer (49408 tokens), and the hub cannot be reached
offline, so mixkit ships `clip_bpe/merges.txt` (built once by this script; the lead runs it, users
never do). The vocabulary itself is derived from the merges at load time by
`mixkit.models.diffusion.single_file_tokenizer.clip_vocab_from_merges` (byte symbols, byte symbols
+ `</w>`, one token per merge, then the two special tokens), so only the merges are stored.

Usage: `pip download --no-deps open_clip_torch`, unzip `open_clip/bpe_simple_vocab_16e6.txt.gz`,
then `python make_clip_tokenizer.py path/to/bpe_simple_vocab_16e6.txt.gz`.
"""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

# CLIP's vocabulary has 49408 entries: 256 bytes, 256 bytes + "</w>", 48894 merges, 2 specials.
NUM_MERGES = 49408 - 256 - 256 - 2


def clip_merges_from_open_clip(gz_path: str | Path) -> list[str]:
    """The first NUM_MERGES merge lines of the open_clip BPE file (its line 0 is a header)."""
    lines = gzip.open(gz_path).read().decode("utf-8").split("\n")
    merges = lines[1 : NUM_MERGES + 1]
    if len(merges) != NUM_MERGES or any(len(m.split()) != 2 for m in merges):
        raise ValueError(f"{gz_path} does not look like open_clip's bpe_simple_vocab_16e6.txt.gz")
    return merges


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    out = Path(__file__).resolve().parent / "clip_bpe" / "merges.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("#version: 0.2\n" + "\n".join(clip_merges_from_open_clip(argv[0])) + "\n", encoding="utf-8")
    print(f"wrote {out} ({out.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
