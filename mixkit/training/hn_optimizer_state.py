"""A1111's optimizer state beside a hypernetwork (`NAME.pt.optim`, its "Saves Optimizer state as separate *.optim
file" setting `save_optimizer_state`), so a hypernetwork trained on later continues with its optimizer's moments.

The format is A1111 v1.10's (`Hypernetwork.save` / `Hypernetwork.load`): a pickled dict of `optimizer_name` (the
torch class name, "AdamW"), `hash` (the first 10 hex digits of the SHA-256 of the `.pt` written with it) and
`optimizer_state_dict`. A1111 uses the state only while the `.pt` still has that hash: a `.pt` trained on or replaced
since makes the `.optim` stale, and the optimizer then starts afresh. A1111 orders the optimizer's parameters by the
file's width keys (key MLP, then value MLP, each in layer order); mixkit orders widths ascending, so a file whose
widths are stored in another order (A1111's default "768, 320, 640, 1024, 1280") has its state renumbered on load.
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch

logger = logging.getLogger(__name__)

OPTIMIZER_STATE_SUFFIX = ".optim"


def optimizer_state_path(hypernetwork: str | Path) -> Path:
    """Where A1111 keeps the optimizer state of `hypernetwork`: the file name with `.optim` appended."""
    hypernetwork = Path(hypernetwork)
    return hypernetwork.with_name(hypernetwork.name + OPTIMIZER_STATE_SUFFIX)


def short_hash(path: Path) -> str:
    """A1111's hypernetwork `shorthash`: the first 10 hex digits of the file's SHA-256."""
    from mixkit.io.hashing import sha256_file

    return sha256_file(path, use_cache=False)[:10]


def _to_cpu(value):
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu").clone()
    if isinstance(value, dict):
        return {key: _to_cpu(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to_cpu(item) for item in value)
    return value


def save_optimizer_state(hypernetwork: Path, optimizer: torch.optim.Optimizer) -> Path:
    """Write `optimizer`'s state beside the just-written `hypernetwork` (atomically), tied to its hash."""
    from mixkit.io.atomic import atomic_output_path

    target = optimizer_state_path(hypernetwork)
    data = {"optimizer_name": type(optimizer).__name__, "hash": short_hash(hypernetwork),
            "optimizer_state_dict": _to_cpu(optimizer.state_dict())}
    with atomic_output_path(target) as temp:
        torch.save(data, temp)
    return target


def read_optimizer_state(hypernetwork: Path, optimizer_class: str) -> dict | None:
    """The optimizer state saved beside `hypernetwork` for an `optimizer_class` run, in mixkit's parameter order;
    None when there is no `.optim` or it is stale (the `.pt` changed since: A1111 then starts afresh too).

    A state of another optimizer class is refused (ValueError), before any model loads: its moments cannot seed
    this run's optimizer, and silently dropping them would make the continued run differ from an unbroken one.
    """
    from mixkit.io import read_checkpoint

    path = optimizer_state_path(hypernetwork)
    if not path.is_file():
        return None
    saved = read_checkpoint(path)
    if not isinstance(saved, dict) or not isinstance(saved.get("optimizer_state_dict"), dict):
        raise ValueError(f"{path} is not an A1111 optimizer state (a dict with optimizer_state_dict); remove it to "
                         "train the hypernetwork with a fresh optimizer")
    if saved.get("hash") != short_hash(hypernetwork):
        logger.warning("%s belongs to an earlier version of %s (hash %s); the optimizer starts afresh, as in A1111",
                       path, hypernetwork.name, saved.get("hash"))
        return None
    name = saved.get("optimizer_name", "AdamW")  # A1111's default when the key is missing
    if name != optimizer_class:
        raise ValueError(f"{path} holds the state of a {name} optimizer, but this run trains with {optimizer_class}; "
                         f"set optimizer to the {name} one it was trained with, or move {path.name} away to start "
                         "the optimizer afresh")
    return _in_ascending_width_order(saved["optimizer_state_dict"], read_checkpoint(hypernetwork), path)


def _in_ascending_width_order(state: dict, checkpoint: dict, path: Path) -> dict:
    """`state` with its parameter numbers moved from the file's width order to ascending widths."""
    widths = [key for key in checkpoint if isinstance(key, int) and not isinstance(key, bool)]
    groups = state.get("param_groups") or []
    count = sum(len(group.get("params", ())) for group in groups)
    if not widths or count % len(widths):
        raise ValueError(f"{path} holds {count} parameters, which do not split over the hypernetwork's widths "
                         f"{widths}; remove it to train with a fresh optimizer")
    per_width = count // len(widths)
    rank = {width: position for position, width in enumerate(sorted(widths))}
    renumber = {file_position * per_width + j: rank[width] * per_width + j
                for file_position, width in enumerate(widths) for j in range(per_width)}
    return {"state": {renumber[index]: value for index, value in state.get("state", {}).items()},
            "param_groups": [{**group, "params": sorted(renumber[index] for index in group["params"])}
                             for group in groups]}


def load_optimizer_state(optimizer: torch.optim.Optimizer, state: dict) -> None:
    """Give `optimizer` the saved moments and step counts, keeping this run's own settings (learning rate, betas,
    weight decay: A1111's schedule sets the rate anew each step too)."""
    own = [{key: value for key, value in group.items() if key != "params"} for group in optimizer.param_groups]
    sizes = [len(group["params"]) for group in optimizer.param_groups]
    saved_sizes = [len(group["params"]) for group in state["param_groups"]]
    if sum(sizes) != sum(saved_sizes):
        raise ValueError(f"the saved optimizer state has {sum(saved_sizes)} parameters, this hypernetwork "
                         f"{sum(sizes)}; remove the .optim file to train with a fresh optimizer")
    optimizer.load_state_dict(state)
    for group, settings in zip(optimizer.param_groups, own):
        group.update(settings)
