"""The real CLIP BPE tokenizer, built offline from the merges mixkit ships.

Single-file checkpoints carry no tokenizer, and the hub may be unreachable, so the 49408-token
CLIP vocabulary is rebuilt from `configs/clip_bpe/merges.txt` (see `configs/make_clip_tokenizer.py`).
SD 1.x and SDXL's first encoder pad with `<|endoftext|>`; SD 2.x and SDXL's OpenCLIP encoder pad
with `!` (id 0), as their published `tokenizer*/special_tokens_map.json` say.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

CLIP_BPE_MERGES = Path(__file__).resolve().parent / "configs" / "clip_bpe" / "merges.txt"
CLIP_VOCAB_SIZE = 49408
PAD_TOKENS = ("<|endoftext|>", "!")


def _bytes_to_unicode() -> list[str]:
    """GPT-2/CLIP's byte symbols in vocabulary order: printable bytes first, then the rest as 256+n."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(256) if b not in printable]
    return [chr(b) for b in printable] + [chr(256 + n) for n in range(len(others))]


def clip_vocab_from_merges(merges: list[tuple[str, str]]) -> dict[str, int]:
    """CLIP's token -> id table: bytes, bytes + `</w>`, one token per merge, then the two specials."""
    symbols = _bytes_to_unicode()
    tokens = symbols + [s + "</w>" for s in symbols] + ["".join(m) for m in merges]
    tokens += ["<|startoftext|>", "<|endoftext|>"]
    return {token: i for i, token in enumerate(tokens)}


@lru_cache(maxsize=1)
def _read_merges(path: str) -> tuple[tuple[str, str], ...]:
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return tuple(tuple(line.split(" ")) for line in lines if line and not line.startswith("#version"))


def load_clip_tokenizer(pad_token: str = "<|endoftext|>", model_max_length: int = 77):
    """A transformers `CLIPTokenizer` with the real CLIP vocabulary, built without network access."""
    from transformers import CLIPTokenizer

    if pad_token not in PAD_TOKENS:
        raise ValueError(f"pad_token must be one of {PAD_TOKENS}, got {pad_token!r}")
    if not CLIP_BPE_MERGES.is_file():
        raise FileNotFoundError(
            f"The shipped CLIP merges file {CLIP_BPE_MERGES} is missing; reinstall mixkit or regenerate it "
            "with mixkit/models/diffusion/configs/make_clip_tokenizer.py"
        )
    merges = list(_read_merges(str(CLIP_BPE_MERGES)))
    vocab = clip_vocab_from_merges(merges)
    return CLIPTokenizer(vocab=vocab, merges=merges, pad_token=pad_token, model_max_length=model_max_length)
