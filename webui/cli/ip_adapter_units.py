"""IP-Adapter units on `mixkit generate` / `mixkit img2img`: a `--controlnet-json` unit (or a `--controlnet` one)
whose module is one of sd-webui-controlnet's IP-Adapter modules (`ip-adapter_clip_sd15`, `ip-adapter_clip_sdxl`,
`ip-adapter-auto`, ...) is an image prompt, as in the extension and over HTTP.

Its model is an `ip-adapter*` file named as the server names it (in `--controlnet-dir`, with or without the
extension's " [hash]") or given as a path, its image encoder beside it (`image_encoder/`, or the module's
`image_encoder_clip_h/` / `image_encoder_clip_g/`), its `weight` the adapter's scale, `guidance_start/end` its
window and `effective_region_mask` (a file) its mask. The unit goes through the API's own check
(`webui.api_ip_adapter.ip_adapter_unit_spec`) and becomes the same `ip_adapter*` params fields; they join the
`--ip-adapter` flags' adapters (those first), with their masks, windows and embeddings.
"""

from __future__ import annotations

import argparse


def ip_adapter_unit_specs(args: argparse.Namespace) -> tuple[list, object]:
    """(the command's IP-Adapter units (`webui.api_ip_adapter.IPAdapterUnitSpec`), the store holding what their check
    read), pictures read and weights files checked before the model loads; ([], None) without any. Units without a
    picture keep none (img2img: the init image). Hand the store to the pipeline (`use_unit_store`): a `.bin` the
    check read whole is not read again."""
    from webui.api_ip_adapter import ip_adapter_unit_spec, is_ip_adapter_module
    from webui.cli.controlnet_flags import in_option_terms
    from webui.cli.controlnet_json import read_picture
    from webui.cli.controlnet_units import ControlNetCatalog, command_line_units

    units = [unit for unit in command_line_units(args) if is_ip_adapter_module(unit["fields"].get("module"))]
    if not units:
        return [], None
    catalog = ControlNetCatalog(getattr(args, "controlnet_dir", None))

    def decode(what: str, value: str):
        return read_picture(value, what)

    specs = []
    for unit in units:
        label = unit["flag"]
        try:
            specs.append(ip_adapter_unit_spec(label, unit["fields"], catalog, decode=decode))
        except FileNotFoundError as error:  # a picture or model path
            raise FileNotFoundError(f"{label}: {error}") from None
        except (ValueError, TypeError) as error:
            raise type(error)(in_option_terms(str(error))) from None
    return specs, catalog.ip_adapters


def use_unit_store(pipe, store) -> None:
    """Make the IP-Adapter pipeline `pipe` read adapters through `store` (`ip_adapter_unit_specs`'), if any."""
    if store is not None:
        pipe.use_ip_adapter_store(store)


def with_ip_adapter_units(fields: dict, specs: list, init_image=None) -> dict:
    """The `--ip-adapter` flags' params `fields` ({} without them) with the units' adapters after theirs, one list
    entry per adapter; `init_image` is img2img's (a unit without picture takes it). Checked as one call."""
    if not specs:
        return fields
    from pipelines.ip_adapter_inputs import check_ip_adapter_inputs
    from webui.api_ip_adapter import ip_adapter_fields

    units = ip_adapter_fields(specs, init_image=init_image)
    joined = _joined(_per_adapter(fields), units) if fields else units
    try:
        check_ip_adapter_inputs(**joined)
    except ValueError as error:
        what = "--ip-adapter and the IP-Adapter units together" if fields else "the IP-Adapter units"
        raise ValueError(f"{what}: {error}") from None
    return joined


def _per_adapter(fields: dict) -> dict:
    """The flags' fields (already checked) as lists with one entry per adapter, every field present."""
    from pipelines.ip_adapter_inputs import check_ip_adapter_inputs

    call = check_ip_adapter_inputs(**fields)
    return {"ip_adapter": list(call.sources),
            "ip_adapter_image": [None if images is None else list(images) for images in call.images],
            "ip_adapter_scale": list(call.scales), "ip_adapter_guidance": list(call.windows),
            "ip_adapter_image_embeds": list(call.embeds),
            "ip_adapter_mask": [None if masks is None else list(masks) for masks in call.masks]}


def _joined(flags: dict, units: dict) -> dict:
    """Flags' adapters then units'; the optional fields (embeddings, masks) only when some adapter has one."""
    count = len(units["ip_adapter"])
    joined = {key: flags[key] + units[key] for key in ("ip_adapter", "ip_adapter_image", "ip_adapter_scale",
                                                        "ip_adapter_guidance")}
    for key in ("ip_adapter_image_embeds", "ip_adapter_mask"):
        entries = flags[key] + list(units.get(key) or [None] * count)
        if any(entry is not None for entry in entries):
            joined[key] = entries
    return joined


def mask_names(fields: dict, specs: list) -> list[str]:
    """Per adapter of the joined fields, how the user gave its mask: the flag, or the unit's field (its label)."""
    flag_adapters = len(fields.get("ip_adapter", ()))
    return ["--ip-adapter-mask"] * flag_adapters + [f"{spec.label} effective_region_mask" for spec in specs]


def check_mask_sizes(fields: dict, names: list[str], width: int | None, height: int | None) -> None:
    """Refuse, before the model loads, a mask whose shape is not the output's, named by `names` (`mask_names`).
    Without a size (the model's native one, known after the load) the pipeline's own check runs later."""
    if not fields.get("ip_adapter_mask") or not width or not height:
        return
    from pipelines.ip_adapter_inputs import check_ip_adapter_inputs
    from pipelines.ip_adapter_masks import ASPECT_TOLERANCE

    for name, masks in zip(names, check_ip_adapter_inputs(**fields).masks):
        for mask in masks or ():
            if abs(mask.width / mask.height - width / height) > ASPECT_TOLERANCE * (width / height):
                raise ValueError(f"{name} is {mask.width}x{mask.height}, whose aspect ratio is not the output's "
                                 f"{width}x{height}; draw it at {width}x{height} (or any size of that shape).")
