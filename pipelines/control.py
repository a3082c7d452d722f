"""Progress reporting and cancellation for a running generation.

A UI thread interrupts or skips while another thread samples, so the flags live in one small
thread-safe object rather than in callback return values.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable


class GenerationControl:
    """Interrupt (stop after the current step, keep what was made) or skip (end the current batch)."""

    def __init__(self) -> None:
        self._interrupt = threading.Event()
        self._skip = threading.Event()

    def interrupt(self) -> None:
        self._interrupt.set()

    def skip(self) -> None:
        self._skip.set()

    @property
    def interrupted(self) -> bool:
        return self._interrupt.is_set()

    def take_skip(self) -> bool:
        """True once per skip request, so a skip ends exactly one batch."""
        if self._skip.is_set():
            self._skip.clear()
            return True
        return False

    def reset(self) -> None:
        self._interrupt.clear()
        self._skip.clear()


@dataclass
class StepProgress:
    """What a per-step callback sees: where sampling is, and the current latents for previews."""

    step: int  # steps completed in this batch, 1-based
    total_steps: int
    batch_index: int
    batch_count: int
    latents: Any  # torch.Tensor [B, C, h, w]
    control: GenerationControl

    @property
    def fraction(self) -> float:
        done = self.batch_index * self.total_steps + self.step
        return done / max(1, self.total_steps * self.batch_count)


StepCallback = Callable[[StepProgress], Any]
