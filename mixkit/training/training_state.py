"""Save and restore everything a run needs to continue bit-for-bit: weights, optimizer, LR schedule, RNGs.

One file per checkpoint, written through `atomic_output_path` (temp file, fsync, rename), so a
crash or a full disk while saving leaves the previous checkpoint untouched. The file is a plain
`torch.save` of tensors, numbers and strings only, so it loads with `weights_only=True` (no
pickled code). A fingerprint of the trained architecture guards against resuming on another model.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from pathlib import Path

import numpy as np
import torch

from mixkit.errors import MixkitError
from mixkit.io.atomic import atomic_output_path

STATE_FORMAT = "mixkit-training-state/1"
CHECKPOINT_NAME = re.compile(r"^step-(\d+)\.pt$")


class CheckpointMismatchError(MixkitError, ValueError):
    """A training checkpoint belongs to a different model, network or trainer."""


def architecture_fingerprint(parameters: dict[str, torch.Tensor], extra: dict) -> str:
    """sha256 over parameter names and shapes plus `extra` (model config): equal iff resuming is meaningful."""
    digest = hashlib.sha256()
    for name in sorted(parameters):
        digest.update(f"{name}:{tuple(parameters[name].shape)};".encode())
    digest.update(json.dumps(extra, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:16]


def capture_rng_states() -> dict:
    numpy_state = np.random.get_state()
    return {
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
        "numpy": {"key": torch.from_numpy(numpy_state[1].astype(np.int64)), "pos": int(numpy_state[2]),
                  "has_gauss": int(numpy_state[3]), "cached_gaussian": float(numpy_state[4])},
    }


def restore_rng_states(states: dict) -> None:
    torch.set_rng_state(states["torch"])
    version, internal, gauss = states["python"]
    random.setstate((version, tuple(internal), gauss))
    n = states["numpy"]
    np.random.set_state(("MT19937", n["key"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["cached_gaussian"]))


def checkpoint_path(folder: str | Path, step: int) -> Path:
    return Path(folder) / f"step-{step:08d}.pt"


def save_training_state(path: str | Path, *, step: int, fingerprint: str, trainable: dict[str, torch.Tensor],
                        optimizer, scheduler, config_json: str) -> Path:
    """Write one checkpoint atomically; on any failure the previous file at `path` is unchanged."""
    state = {
        "format": STATE_FORMAT, "step": step, "fingerprint": fingerprint, "config": config_json,
        "trainable": {k: v.detach().cpu().clone() for k, v in trainable.items()},
        "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "rng": capture_rng_states(),
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_output_path(path) as temp:
        torch.save(state, temp)
    return path


def latest_checkpoint(folder: str | Path) -> Path | None:
    """The highest-step `step-*.pt` in `folder` (temp files from crashed saves are ignored)."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    steps = [(int(m.group(1)), p) for p in folder.iterdir() if (m := CHECKPOINT_NAME.match(p.name))]
    return max(steps)[1] if steps else None


def check_finite_loss(loss: float, step: int, *, last_checkpoint: str | Path | None = None,
                      checkpoint_every: int = 0) -> None:
    """Stop a run whose loss became NaN or infinite: every later step would train on garbage and the saved
    weights would be NaN (a CLIP run on fp16 weights used to save an all-NaN model and exit 0).

    `last_checkpoint` is the newest resume state before this step (written by this run, or the one it resumed
    from), None when there is none: the advice names it, or says how to have one next time, never a file that
    does not exist."""
    if math.isfinite(loss):
        return
    if last_checkpoint is not None:
        then = f"then resume with resume_from={str(last_checkpoint)!r}, the last checkpoint before it"
    elif checkpoint_every:
        then = (f"then start the run again: no checkpoint was written before it (checkpoint_every={checkpoint_every}: "
                f"the first falls at step {checkpoint_every})")
    else:
        then = ("then start the run again: no checkpoint was written (checkpoint_every is 0); set checkpoint_every "
                "(like 100) to keep resume states a later run can continue from")
    raise FloatingPointError(f"the training loss became {loss} at step {step}; nothing was saved after that. "
                             f"Lower the learning rate, or train in float32 (mixed_precision: no), {then}.")


def load_training_state(source: str | Path, fingerprint: str, max_steps: int | None = None) -> dict:
    """Read a checkpoint (a file, or the latest in a folder) and check it belongs to this run's model and, with
    `max_steps`, that the run has steps left to reach (a checkpoint past the end used to train nothing, write
    nothing and exit 0)."""
    path = Path(source)
    if path.is_dir():
        found = latest_checkpoint(path)
        if found is None:
            raise FileNotFoundError(f"No checkpoint (step-*.pt) in {str(path)!r}; pass a checkpoint file or folder.")
        path = found
    if not path.is_file():
        raise FileNotFoundError(f"Checkpoint {str(path)!r} does not exist; pass a step-*.pt file or its folder.")
    state = read_state_file(path, STATE_FORMAT, "training checkpoint")
    if state["fingerprint"] != fingerprint:
        raise CheckpointMismatchError(
            f"{path} was saved for a different model or network (fingerprint {state['fingerprint']}, this run "
            f"{fingerprint}); resume with the same base model, network type, rank and text-encoder setting, "
            "or start a new run without resume_from."
        )
    if max_steps is not None and state["step"] > max_steps:
        raise CheckpointMismatchError(
            f"{path} was saved at step {state['step']}, past this run's max_steps={max_steps}; set max_steps to at "
            f"least {state['step']} to continue it, or start a new run without resume_from.")
    return state


def read_state_file(path: Path, state_format: str, what: str) -> dict:
    """A state file's contents (tensors, numbers, strings: `weights_only`), refused unless it is `state_format`."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # torch raises several types for truncated or foreign files
        raise CheckpointMismatchError(f"{path} is not a readable mixkit {what} ({error}).") from None
    if not isinstance(state, dict) or state.get("format") != state_format:
        raise CheckpointMismatchError(f"{path} is not a mixkit {what} (format {state_format!r} expected).")
    return state


def check_same_settings(state: dict, settings: dict, source: str | Path) -> None:
    """Refuse a resume whose `settings` (name -> this run's value) differ from the checkpoint's saved config.

    Restoring the optimizer puts the saved run's hyper-parameters back into its parameter groups and the schedule
    its base rates, so such a change would be silently undone (a new learning rate) or mixed with the old run's
    (AdamW's moments, rate and betas loaded into Lion); refusing says so instead."""
    saved = json.loads(state.get("config") or "{}")
    # compared as the checkpoint stores them: JSON (a tuple of betas is a list there)
    now = json.loads(json.dumps(settings, default=str))
    changed = [f"{name}: {saved[name]!r} in the checkpoint, {value!r} now" for name, value in now.items()
               if name in saved and saved[name] != value]
    if changed:
        raise CheckpointMismatchError(
            f"{source} continues a run trained with other optimizer settings ({'; '.join(changed)}). Resuming "
            "restores the optimizer and schedule of that run, so these changes would not apply: set them back to "
            "resume exactly, or start a new run from the weights instead (network_weights= a file the run wrote, "
            "for a LoRA).")


def resume_run(source: str | Path, fingerprint: str, *, optimizer, lr_schedule,
               max_steps: int | None = None, settings: dict | None = None) -> tuple[dict[str, torch.Tensor], int]:
    """Restore optimizer, LR schedule and RNGs from a checkpoint; return (trainable tensors, step) for the caller.
    `settings` (optimizer and schedule settings of this run) must equal the checkpoint's (`check_same_settings`)."""
    state = load_training_state(source, fingerprint, max_steps)
    check_same_settings(state, settings or {}, source)
    optimizer.load_state_dict(state["optimizer"])
    lr_schedule.load_state_dict(state["scheduler"])
    restore_rng_states(state["rng"])
    return state["trainable"], state["step"]
