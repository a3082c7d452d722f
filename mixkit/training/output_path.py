"""The check every trainer makes of its output file before it trains: a run that cannot write its result is refused
at the start, not after hours of training."""

from __future__ import annotations

import os
from pathlib import Path


def check_output_path(output: str | Path, what: str = "LoRA file", example: str = "my_lora.safetensors") -> None:
    """Refuse, before any training, an output the trained file (`what`) cannot become: finding out when the finished
    run writes it would lose the run. A missing folder is fine (it is created at the first write, as kohya does)."""
    output = Path(output).expanduser().absolute()
    if output.is_dir():
        raise ValueError(f"output {str(output)!r} is a folder; name the {what} to write, like "
                         f"{str(output / example)!r}")
    if output.suffix.lower() != ".safetensors":
        raise ValueError(f"output {str(output)!r} must end in .safetensors: the file is written in that format, "
                         "which A1111, ComfyUI and mixkit's LoRA folders list by that suffix (a .ckpt name would "
                         f"make other tools unpickle it); try {str(output.with_suffix('.safetensors'))!r}")
    existing = output.parent
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ValueError(f"the folder of output {str(output)!r} cannot be created: {str(existing)!r} is a file; "
                         "choose another output path")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"the folder of output {str(output)!r} cannot be written: {str(existing)!r} is not "
                         "writable; choose another output path")
