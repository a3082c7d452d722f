"""The `.safetensors` file holding one adapter's precomputed IP-Adapter embeddings (`mixkit ip-adapter-embeds`
writes it, `--ip-adapter-embeds` reads it).

One tensor, `ip_adapter_image_embeds`, in the layout the Python API takes per adapter (`[2, images, ...]`, negative
half first, as `encode_ip_adapter_image` returns), so `safetensors.torch.load_file(f)[TENSOR_KEY]` is a valid
`ip_adapter_image_embeds` entry in a script too. The metadata records the adapter's name and the number of images:
the embeddings only make sense with the weights they were made by (the projection is part of the adapter), so
reading them with other weights gets a note. Shapes are checked by the Python API, not here.
"""

from __future__ import annotations

import sys
from pathlib import Path

TENSOR_KEY = "ip_adapter_image_embeds"
FORMAT = "mixkit.ip_adapter_image_embeds/1"  # metadata "format"; a number to bump if the layout ever changes
SUFFIX = ".safetensors"


def write_embeds_file(path: str | Path, embeds, adapter_name: str) -> Path:
    """Write one adapter's `[2, images, ...]` embeddings atomically (an interrupted write leaves the old file)."""
    from safetensors.torch import save

    from mixkit.io.atomic import atomic_write_bytes

    metadata = {"format": FORMAT, "ip_adapter": adapter_name, "images": str(int(embeds.shape[1]))}
    data = save({TENSOR_KEY: embeds.detach().to("cpu").contiguous()}, metadata=metadata)
    atomic_write_bytes(path, data)
    return Path(path)


def check_output_path(path: str, flag: str = "-o") -> Path:
    """The file to write, refused before any model loads when it cannot be one."""
    file = Path(path).expanduser()
    if file.suffix.lower() != SUFFIX:
        raise ValueError(f"{flag} {path!r} must end in {SUFFIX} (the embeddings are written as safetensors).")
    if file.is_dir():
        raise ValueError(f"{flag} {path!r} is a folder; give a file name ending in {SUFFIX}.")
    if not file.parent.is_dir():
        raise FileNotFoundError(f"{flag} {path!r}: the folder {str(file.parent)!r} does not exist; create it first.")
    return file


def read_embeds_file(path: str, source, flag: str):
    """The embeddings tensor of a file this module wrote, errors naming `flag` and the file; a note on stderr when
    it was made by weights of another name than `source`'s."""
    from safetensors import SafetensorError, safe_open

    file = Path(path).expanduser()
    if not file.is_file():
        what = "is a folder" if file.is_dir() else "does not exist"
        raise FileNotFoundError(f"{flag} {path!r} {what}; give the .safetensors file `mixkit ip-adapter-embeds` "
                                "wrote.")
    try:
        with safe_open(str(file), framework="pt") as opened:
            metadata = opened.metadata() or {}
            keys = list(opened.keys())
            if TENSOR_KEY not in keys:
                raise ValueError(f"{flag} {path!r} holds no {TENSOR_KEY!r} tensor (it has {keys[:5]}); write the "
                                 "file with `mixkit ip-adapter-embeds`.")
            embeds = opened.get_tensor(TENSOR_KEY)
    except (SafetensorError, OSError) as error:
        raise ValueError(f"{flag} {path!r} is not a readable safetensors file: {error}") from None
    made_by = metadata.get("ip_adapter")
    if made_by is not None and made_by != source.name:
        print(f"mixkit: note: {flag} {path!r} was made by IP-Adapter {made_by!r}, not {source.name!r}; embeddings "
              "only match the weights that made them", file=sys.stderr)
    return embeds
