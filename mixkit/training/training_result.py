"""What every trainer returns: the written output, the losses, and where a resumed run started."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class TrainingResult:
    output: Path | None
    steps: int
    losses: list[float] = field(default_factory=list)
    first_step: int = 0  # where a resumed run started: `steps - first_step` steps ran in this process
    last_checkpoint: Path | None = None
    skipped_images: list = field(default_factory=list)
    seconds: float = 0.0
    intermediate_outputs: list[Path] = field(default_factory=list)  # files written by `save_every_n_steps`
    validation_losses: list[tuple[int, float]] = field(default_factory=list)  # (step, held-out loss)
    interrupted: bool = False  # ended before its last step because the caller's `should_stop` said so
