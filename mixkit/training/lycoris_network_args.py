"""kohya configs that train through LyCORIS (`network_module = "lycoris.kohya"`), translated to mixkit's settings.

LyCORIS 4.1.3's `kohya.create_network` reads its options from kohya's --network_args. mixkit accepts the ones whose
network it trains exactly: algo lora / locon (one module class in LyCORIS: `network_module_dict`), a layer preset
mixkit can build (`lycoris_presets`), conv_dim / conv_alpha (defaulting to network_dim / network_alpha, as there),
DoRA (dora_wd, output-row norms only), module_dropout and LoRA+; the LyCORIS preset files mixkit ships for its own
LoCon and cross-kv layers (`lycoris_presets.NETWORK_PRESET_FILES`, which its DoRA files name) read as those networks.
Every other option (another algo, use_tucker, train_norm, ...) is refused before anything loads, naming it and what is
accepted.
"""

from __future__ import annotations

import json

LYCORIS_MODULE = "lycoris.kohya"
ALGOS = ("lora", "locon")  # LyCORIS: both are LoConModule; the preset decides whether convolutions are adapted
# network_args LyCORIS reads and mixkit trains the same way, and the mixkit setting each becomes.
ACCEPTED_ARGS = {"algo": "network", "preset": "lycoris_preset", "conv_dim": "conv_rank", "conv_alpha": "conv_alpha",
                 "dora_wd": "dora_wd", "wd_on_output": None, "module_dropout": "module_dropout",
                 "dropout": None, "rank_dropout": None, "loraplus_lr_ratio": "loraplus_lr_ratio",
                 "loraplus_unet_lr_ratio": "loraplus_unet_lr_ratio",
                 "loraplus_text_encoder_lr_ratio": "loraplus_text_encoder_lr_ratio"}
# Why LyCORIS options mixkit knows of are refused (any other key gets the list of accepted ones).
REFUSED_WHY = {
    "use_tucker": "mixkit's LoCon has no Tucker-decomposed convolutions",
    "use_cp": "mixkit's LoCon has no Tucker-decomposed convolutions (use_cp is LyCORIS's old name of use_tucker)",
    "use_conv_cp": "mixkit's LoCon has no Tucker-decomposed convolutions (use_conv_cp is LyCORIS's old name of "
                   "use_tucker)",
    "disable_conv_cp": "mixkit's LoCon has no Tucker-decomposed convolutions",
    "train_norm": "mixkit adapts no normalisation layer",
    "use_scalar": "mixkit's adapters have no trained scalar",
    "rs_lora": "mixkit scales adapters by alpha / rank, not rank-stabilised alpha / sqrt(rank)",
    "bypass_mode": "mixkit's adapters always run beside the layer (that is LyCORIS's bypass mode for LoRA already); "
                   "remove it",
    "constraint": "mixkit has no constrained (OFT) adapter",
    "rescaled": "mixkit has no rescaled (OFT) adapter",
    "block_size": "mixkit has no OFT / BOFT adapter",
    "factor": "mixkit has no LoKr adapter",
    "decompose_both": "mixkit has no LoKr adapter",
    "full_matrix": "mixkit has no LoKr adapter",
    "unbalanced_factorization": "mixkit has no LoKr adapter",
    "rank_dropout_scale": "mixkit has no LyCORIS-style rank dropout",
}
# LyCORIS's dropout acts on the adapter's output and its rank_dropout keeps one mask for the whole batch without
# rescaling (modules/locon.py); mixkit's are kohya networks.lora's, so only their off values translate.
OFF_ONLY = {"dropout": "kohya's network_dropout (on the rank-wide hidden values)",
            "rank_dropout": "kohya's rank_dropout (one mask per sample, rescaled by 1 / (1 - p))"}


def _entries(value) -> list[tuple[str, str, str]]:
    """(entry, key, text) of kohya's network_args list (or one "key=value" string)."""
    out = []
    for entry in ([value] if isinstance(value, str) else list(value or [])):
        key, sep, text = str(entry).partition("=")
        if not sep or not key.strip():
            raise ValueError(f"network_args entry {entry!r}: kohya's form is key=value, like \"algo=locon\"")
        out.append((str(entry), key.strip(), text.strip()))
    return out


def _bool(entry: str, text: str) -> bool:
    word = text.lower()
    if word not in ("true", "false"):
        raise ValueError(f"network_args entry {entry!r}: the value must be True or False")
    return word == "true"


def _number(entry: str, text: str, integer: bool = False):
    try:
        number = json.loads(text)
    except ValueError:
        number = None
    if isinstance(number, bool) or not isinstance(number, (int, float)) or (integer and not isinstance(number, int)):
        raise ValueError(f"network_args entry {entry!r}: the value must be {'an integer' if integer else 'a number'}")
    return number


def lycoris_settings(network_args, settings: dict) -> dict:
    """mixkit's settings for a LyCORIS run with these --network_args; `settings` are the run's other kohya options
    (kohya's --network_dropout is refused there: kohya passes it as neuron_dropout, which LyCORIS ignores)."""
    from mixkit.training.lycoris_presets import LYCORIS_PRESETS, NETWORK_PRESET_FILES, network_of_preset_file

    accepted = [f"{key} (0 only)" if key in OFF_ONLY else key for key in sorted(ACCEPTED_ARGS)]
    out: dict = {"network": "lora", "lycoris_preset": "full", "conv_rank": None, "conv_alpha": None}
    own_network = None  # a preset file of mixkit's own layers (`NETWORK_PRESET_FILES`) names its network
    for entry, key, text in _entries(network_args):
        if key in REFUSED_WHY:
            raise ValueError(f"network_args entry {entry!r}: {REFUSED_WHY[key]}. With network_module "
                             f"{LYCORIS_MODULE!r} mixkit accepts {accepted}; remove the entry")
        if key not in ACCEPTED_ARGS:
            raise ValueError(f"network_args entry {entry!r}: not a LyCORIS option mixkit trains; with network_module "
                             f"{LYCORIS_MODULE!r} mixkit accepts {accepted}; remove the entry")
        if key == "algo":
            if text.lower() not in ALGOS:
                raise ValueError(f"network_args entry {entry!r}: mixkit trains LyCORIS's algo lora and locon (LoRA / "
                                 "LoCon, one algorithm there); loha, lokr, ia3, glora, diag-oft, boft, full, dylora "
                                 "and tlora have no mixkit trainer. Use algo=lora or algo=locon")
            out["network"] = text.lower()
        elif key == "preset":
            own_network = network_of_preset_file(text)
            if own_network is None and text not in LYCORIS_PRESETS:
                raise ValueError(f"network_args entry {entry!r}: mixkit builds LyCORIS's presets "
                                 f"{LYCORIS_PRESETS.names()} and its own preset files "
                                 f"{sorted(NETWORK_PRESET_FILES.values())} (ia3 is for algo=ia3; other preset files "
                                 "are not read); use one of them")
            out["lycoris_preset"] = None if own_network else text
        elif key == "conv_dim":
            # LyCORIS: int(conv_dim or network_dim) of the entry's text, so "0" is 0: no 3x3 convolution adapted
            out["conv_rank"] = _number(entry, text, integer=True)
        elif key == "conv_alpha":
            out["conv_alpha"] = _number(entry, text)  # "0": LoConModule then takes alpha = rank, as mixkit's 0
        elif key in ("dora_wd",):
            out["dora_wd"] = _bool(entry, text)
        elif key == "wd_on_output":
            if not _bool(entry, text):
                raise ValueError(f"network_args entry {entry!r}: mixkit's DoRA normalises each output row (LyCORIS's "
                                 "default wd_on_output=True) only; remove the entry")
        elif key in OFF_ONLY:
            if _number(entry, text) != 0:
                raise ValueError(f"network_args entry {entry!r}: LyCORIS's {key} is not {OFF_ONLY[key]}, which is "
                                 f"what mixkit trains; remove it, or train with network_module 'networks.lora' and "
                                 f"kohya's {key} semantics")
        else:
            out[ACCEPTED_ARGS[key]] = _number(entry, text)
    if own_network is not None:
        # the file builds exactly that network's layers, whatever the algo (LyCORIS's lora and locon are one module)
        out["network"] = own_network
    elif not LYCORIS_PRESETS.get(out["lycoris_preset"]).adapts_text_encoder:
        # LyCORIS builds no text-encoder module then, whatever kohya's network_train_unet_only says
        out["train_text_encoder"] = False
    if settings.get("network_dropout") not in (None, 0, 0.0):
        raise ValueError(f"network_dropout={settings['network_dropout']!r}: under network_module {LYCORIS_MODULE!r} "
                         "kohya passes it as neuron_dropout, which LyCORIS ignores; remove it (LyCORIS's own dropout "
                         "arg differs from kohya's and is not trained by mixkit)")
    return out
