"""Whether a checkpoint's tensors fill a network exactly, said in one error.

The networks whose sizes are read from the file itself (model upscalers, face restorers, the face detector and
parser) are laid out from those sizes and must then be filled key for key: a tensor left over, missing or of another
shape means the file is not what its sizes claimed, and the user gets the first few of each to see why.
"""

from __future__ import annotations

from mixkit.errors import CheckpointFormatError


def check_state_fits(expected: dict, state: dict, file, looks_like: str, *, optional_suffixes: tuple[str, ...] = (),
                     hint: str = "") -> None:
    """CheckpointFormatError naming `file` unless `state`'s tensors are exactly `expected`'s keys and shapes.

    `looks_like`: what the file's sizes said it is ("the swinir layout", "RetinaFace resnet50"); `optional_suffixes`:
    keys the file may lack (BatchNorm's `num_batches_tracked`, absent before PyTorch 0.4.1 and unread in eval mode);
    `hint`: a sentence appended to the error (what such a file should be)."""
    missing = [key for key in expected if key not in state and not key.endswith(optional_suffixes)]
    unexpected = [key for key in state if key not in expected]
    mismatched = [f"{key} {tuple(value.shape)} (expected {tuple(expected[key].shape)})" for key, value in state.items()
                  if key in expected and expected[key].shape != value.shape]
    if missing or unexpected or mismatched:
        raise CheckpointFormatError(
            f"{str(file)!r} looks like {looks_like} but does not fit it: missing {missing[:5]}, unexpected "
            f"{unexpected[:5]}, wrong shapes {mismatched[:5]}." + (f" {hint}" if hint else ""))
