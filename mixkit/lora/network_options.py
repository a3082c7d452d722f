"""The training network a LoRA file's kohya `ss_*` metadata records: module, LyCORIS algo and preset, dims, DoRA.

kohya's train_network.py writes `ss_network_module`, `ss_network_dim`, `ss_network_alpha` and its --network_args as
the JSON object `ss_network_args` (values as given, so strings); LyCORIS runs through kohya say `lycoris.kohya` there,
with LyCORIS's defaults for what the args leave out (algo lora, preset full). Read here for `mixkit lora inspect` and
for reading a file back as a training config (`kohya_network_options`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

LYCORIS_MODULE = "lycoris.kohya"
# LyCORIS's kohya.create_network defaults for the args a run leaves out
LYCORIS_DEFAULT_ALGO, LYCORIS_DEFAULT_PRESET = "lora", "full"
SHOWN_ARGS = ("algo", "preset", "conv_dim", "conv_alpha", "dora_wd")  # the rest are listed as they are


def _recorded(metadata: dict[str, str], key: str) -> str | None:
    value = metadata.get(key)
    return None if value in (None, "", "None") else value


def _network_args(metadata: dict[str, str]) -> dict[str, str]:
    text = _recorded(metadata, "ss_network_args")
    if text is None:
        return {}
    try:
        args = json.loads(text)
    except ValueError:
        args = None
    if not isinstance(args, dict):
        raise ValueError(f"metadata ss_network_args={text!r} is not a JSON object of network_args")
    return {str(key): str(value) for key, value in args.items()}


def _number(text: str | None, label: str, read):
    """`text` as an int / float (None stays None); `label` names it in the error."""
    if text in (None, "", "None"):
        return None
    try:
        return int(float(text)) if read is int else float(text)
    except ValueError:
        raise ValueError(f"{label}={text!r} is not a number") from None


def kohya_network_options(metadata: dict[str, str]) -> dict:
    """The kohya network options a LoRA file's `ss_*` metadata records (network_module, network_dim, network_alpha,
    network_args as "key=value" entries), for reading a file back as a config: LyCORIS runs and mixkit's DoRA files
    say `lycoris.kohya` with `{"algo": "lora", "preset": "attn-mlp", "dora_wd": "True", ...}`. Raises ValueError for
    an undecodable dim, alpha or network_args."""
    out: dict = {}
    if _recorded(metadata, "ss_network_module"):
        out["network_module"] = metadata["ss_network_module"]
    for key, name, read in (("ss_network_dim", "network_dim", int), ("ss_network_alpha", "network_alpha", float)):
        value = _number(metadata.get(key), f"metadata {key}", read)
        if value is not None:
            out[name] = value
    args = _network_args(metadata)
    if args:
        out["network_args"] = [f"{key}={value}" for key, value in args.items()]
    return out


@dataclass(frozen=True)
class TrainedNetwork:
    """How a file's network was trained. `algo` / `preset` are LyCORIS's (its defaults filled in, `*_default` saying
    so); a networks.lora file's algo is "locon" when it records conv_dim (kohya's LoCon), else "lora", and it has no
    preset. `conv_dim` / `conv_alpha` are None when not recorded (LyCORIS then takes network_dim / network_alpha)."""

    module: str | None
    algo: str | None
    preset: str | None
    dim: int | None
    alpha: float | None
    conv_dim: int | None
    conv_alpha: float | None
    dora: bool
    algo_default: bool = False
    preset_default: bool = False
    other_args: dict[str, str] = field(default_factory=dict)

    def summary(self) -> str:
        """One line: `lycoris.kohya, algo locon, preset mixkit_locon.toml, dim 4, alpha 2, conv dim 2, ..., DoRA`."""
        default = " (LyCORIS's default)"
        parts = [self.module or "network module not recorded"]
        if self.algo is not None:
            parts.append(f"algo {self.algo}{default if self.algo_default else ''}")
        if self.preset is not None:
            parts.append(f"preset {self.preset}{default if self.preset_default else ''}")
        for name, value in (("dim", self.dim), ("alpha", self.alpha), ("conv dim", self.conv_dim),
                            ("conv alpha", self.conv_alpha)):
            if value is not None:
                parts.append(f"{name} {value:g}" if isinstance(value, float) else f"{name} {value}")
        if self.dora:
            parts.append("DoRA (dora_wd)")
        parts += [f"{key}={value}" for key, value in self.other_args.items()]
        return ", ".join(parts)


def trained_network(metadata: dict[str, str]) -> TrainedNetwork | None:
    """The network `metadata` records, None when it records none (no module, dim or args: a file saved without
    kohya's keys). Raises ValueError for an undecodable dim, alpha or network_args."""
    module = _recorded(metadata, "ss_network_module")
    dim = _number(metadata.get("ss_network_dim"), "metadata ss_network_dim", int)
    alpha = _number(metadata.get("ss_network_alpha"), "metadata ss_network_alpha", float)
    args = _network_args(metadata)
    if module is None and dim is None and not args:
        return None
    lycoris = module == LYCORIS_MODULE
    conv_dim = _number(args.get("conv_dim"), "metadata ss_network_args conv_dim", int)
    conv_alpha = _number(args.get("conv_alpha"), "metadata ss_network_args conv_alpha", float)
    if lycoris:
        algo, preset = args.get("algo", LYCORIS_DEFAULT_ALGO), args.get("preset", LYCORIS_DEFAULT_PRESET)
    else:
        algo = args.get("algo") or ("locon" if conv_dim else "lora" if module == "networks.lora" else None)
        preset = args.get("preset")
    return TrainedNetwork(module=module, algo=algo, preset=preset, dim=dim, alpha=alpha, conv_dim=conv_dim,
                          conv_alpha=conv_alpha, dora=args.get("dora_wd", "").lower() == "true",
                          algo_default=lycoris and "algo" not in args, preset_default=lycoris and "preset" not in args,
                          other_args={key: value for key, value in args.items() if key not in SHOWN_ARGS})
