"""LyCORIS 4.1.3 as the oracle of which modules a network has: `kohya.create_network` run as kohya would run it,
shared by the preset comparison and the DoRA files' recorded-network check."""

from __future__ import annotations


def lycoris_created_modules(model, dim: int, alpha: float, network_args: dict) -> dict[str, tuple[int, float]]:
    """(rank, alpha) of each module LyCORIS's kohya.create_network builds on `model` with these `--network_args`
    (a mixkit preset file's name resolved to the shipped file, where kohya's command line would point); text-encoder
    names get the `text_model_` level transformers 5 dropped and files keep."""
    import lycoris.kohya

    from mixkit.training.lycoris_presets import PRESET_FILES_FOLDER, network_of_preset_file

    network_args = dict(network_args)
    if network_of_preset_file(network_args.get("preset", "")):
        network_args["preset"] = str(PRESET_FILES_FOLDER / network_args["preset"])
    text_encoders = model.text_encoders[0] if len(model.text_encoders) == 1 else list(model.text_encoders)
    network = lycoris.kohya.create_network(1.0, dim, alpha, None, text_encoders, model.unet, **network_args)
    out = {}
    for module in network.loras:
        name = module.lora_name
        for prefix in ("lora_te_", "lora_te1_", "lora_te2_"):
            if name.startswith(prefix) and not name.startswith(prefix + "text_model_"):
                name = prefix + "text_model_" + name[len(prefix):]
        out[name] = (module.lora_dim, float(module.alpha))
    return out
