"""Save and load the attribute judge: fp16 safetensors + JSON config + a record of how it was made.

fp16 halves the file (the judge is meant to ship inside the package); it is loaded back as float32
for inference, since the classifier's decisions do not depend on the last bits of its weights.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from mixkit.errors import CheckpointFormatError, ModelNotFoundError
from mixkit.evaluation.judge_model import AttributeJudge, JudgeConfig
from mixkit.io.atomic import atomic_write_bytes
from mixkit.io.loading import load_state_dict
from mixkit.io.saving import save_safetensors

WEIGHTS_FILE = "judge.safetensors"
CONFIG_FILE = "judge_config.json"
RECORD_FILE = "judge_record.json"


def save_judge(judge: AttributeJudge, folder: str | os.PathLike, record: dict | None = None) -> Path:
    """Write the judge's weights (fp16), config and an optional record (recipe, seed, metrics) to `folder`."""
    if not isinstance(judge, AttributeJudge):
        raise TypeError(f"judge must be an AttributeJudge, got {type(judge).__name__}")
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    tensors = {key: value.to(torch.float16) if value.is_floating_point() else value
               for key, value in judge.state_dict().items()}
    save_safetensors(tensors, target / WEIGHTS_FILE, metadata={"format": "mixkit-attribute-judge"})
    atomic_write_bytes(target / CONFIG_FILE, (json.dumps(judge.config.to_dict(), indent=2) + "\n").encode())
    if record is not None:
        atomic_write_bytes(target / RECORD_FILE, (json.dumps(record, indent=2) + "\n").encode())
    return target


def load_judge(folder: str | os.PathLike) -> AttributeJudge:
    """Load a judge saved by `save_judge`, as float32 in eval mode."""
    source = Path(folder)
    for name in (CONFIG_FILE, WEIGHTS_FILE):
        if not (source / name).is_file():
            raise ModelNotFoundError(f"{str(source / name)!r} not found: {str(source)!r} is not a judge folder "
                                     "(train one with mixkit.evaluation.train_judge and save_judge)")
    try:
        config = JudgeConfig.from_dict(json.loads((source / CONFIG_FILE).read_text(encoding="utf-8")))
    except (ValueError, TypeError) as error:
        raise CheckpointFormatError(f"{str(source / CONFIG_FILE)!r} is not a judge config ({error})") from None
    judge = AttributeJudge(config)
    state = load_state_dict(source / WEIGHTS_FILE)
    expected = judge.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    wrong = [key for key in expected if key in state and state[key].shape != expected[key].shape]
    if missing or unexpected or wrong:
        raise CheckpointFormatError(
            f"{str(source / WEIGHTS_FILE)!r} does not match {CONFIG_FILE}: missing {missing[:5]}, "
            f"unexpected {unexpected[:5]}, wrong shape {wrong[:5]}; save weights and config together with save_judge")
    judge.load_state_dict({key: value.to(expected[key].dtype) for key, value in state.items()})
    return judge.eval()


# The judge shipped with mixkit (trained by `mixkit world train-judge`; see its judge_record.json).
SHIPPED_JUDGE_FOLDER = Path(__file__).parent / "judge_weights"


def load_shipped_judge() -> AttributeJudge:
    """The judge that ships inside the package, as used by `mixkit eval tiny`."""
    if not (SHIPPED_JUDGE_FOLDER / WEIGHTS_FILE).is_file():
        raise ModelNotFoundError(f"no shipped judge at {str(SHIPPED_JUDGE_FOLDER)!r}; train one with "
                                 "`mixkit world train-judge DIR` and pass DIR to load_judge")
    return load_judge(SHIPPED_JUDGE_FOLDER)
