"""The trainer config fields `mixkit.training.run_schedule` reads, as a plain stand-in for the schedule tests."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ScheduleConfig:
    max_steps: int = 10
    gradient_accumulation_steps: int = 1
    save_every_n_steps: int = 0
    save_every_n_epochs: int = 0
    max_train_epochs: int | None = None
    save_n_epoch_ratio: int = 0
