"""IP-Adapter on `mixkit generate` and `mixkit img2img`: `--ip-adapter PATH --ip-adapter-image IMG
[--ip-adapter-scale 0.6] [--ip-adapter-image-encoder PATH]`.

Each flag may be repeated. With one `--ip-adapter`, every `--ip-adapter-image` is an image for it (their tokens are
concatenated, as diffusers does); with several, one image per adapter in the order given. `--ip-adapter-scale` and
`--ip-adapter-image-encoder` take one value for all adapters or one per adapter. Everything is checked and the
files found before the model loads.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pipelines.ip_adapter_files import WEIGHT_SUFFIXES, IPAdapterSource


def add_ip_adapter_flags(p: argparse.ArgumentParser) -> None:
    group = p.add_argument_group("IP-Adapter (image prompts)")
    group.add_argument("--ip-adapter", action="append", default=None, metavar="PATH",
                       help="IP-Adapter weights: an ip-adapter_*.safetensors/.bin file (its image encoder in "
                            "image_encoder/ beside it, h94's layout), a folder holding one, or a hub file "
                            "ORG/NAME/SUBFOLDER/FILE (e.g. h94/IP-Adapter/models/ip-adapter_sd15.safetensors); "
                            "repeat for several adapters")
    group.add_argument("--ip-adapter-image", action="append", default=None, metavar="IMG",
                       help="the image prompt; repeat for several images (one adapter) or one per adapter")
    group.add_argument("--ip-adapter-scale", action="append", type=float, default=None, metavar="SCALE",
                       help="how strongly the image steers, 0-2 (default 1; 0.5-0.7 keeps more of the prompt); "
                            "one for all adapters or one per adapter")
    group.add_argument("--ip-adapter-image-encoder", action="append", default=None, metavar="PATH",
                       help="the CLIP vision encoder folder or hub id (default: image_encoder/ beside the weights); "
                            "one for all adapters or one per adapter")


def ip_adapter_fields(args: argparse.Namespace) -> dict:
    """The IP-Adapter params fields of the flags ({} without --ip-adapter), images read and files found."""
    adapters = args.ip_adapter or []
    images = args.ip_adapter_image or []
    scales = args.ip_adapter_scale or []
    encoders = args.ip_adapter_image_encoder or []
    if not adapters:
        given = [flag for flag, value in (("--ip-adapter-image", images), ("--ip-adapter-scale", scales),
                                          ("--ip-adapter-image-encoder", encoders)) if value]
        if given:
            raise ValueError(f"{', '.join(given)} given without --ip-adapter PATH; add the IP-Adapter weights.")
        return {}
    if not images:
        raise ValueError("--ip-adapter needs --ip-adapter-image IMG: the picture the adapter steers towards.")
    for flag, values in (("--ip-adapter-scale", scales), ("--ip-adapter-image-encoder", encoders)):
        if len(values) not in (0, 1, len(adapters)):
            raise ValueError(f"{flag} was given {len(values)} times for {len(adapters)} --ip-adapter; give it once "
                             "for all or once per adapter.")
    if len(adapters) > 1 and len(images) != len(adapters):
        raise ValueError(f"--ip-adapter-image was given {len(images)} times for {len(adapters)} --ip-adapter; with "
                         "several adapters give one image per adapter, in the same order.")
    encoder_of = encoders * len(adapters) if len(encoders) == 1 else encoders or [None] * len(adapters)
    sources = [source_of_flag(value, encoder) for value, encoder in zip(adapters, encoder_of)]
    from webui.cli.img2img import read_init_image

    pictures = [read_init_image(path) for path in images]
    fields = {"ip_adapter": sources, "ip_adapter_image": pictures if len(adapters) == 1 else [[p] for p in pictures],
              "ip_adapter_scale": (scales[0] if len(scales) == 1 else scales) if scales else 1.0}
    from pipelines.ip_adapter_files import resolve_image_encoder, resolve_weight_file
    from pipelines.ip_adapter_inputs import check_ip_adapter_inputs

    from webui.cli.flag_names import errors_in_flag_terms

    with errors_in_flag_terms():  # `--ip-adapter-scale must be ...`, not the field name
        check_ip_adapter_inputs(**fields)
    for source in sources:  # a typo fails now, not after the model has loaded
        resolve_image_encoder(source, resolve_weight_file(source))
    return fields


def source_of_flag(value: str, encoder: str | None) -> IPAdapterSource:
    """A local path as it is; `ORG/NAME/[SUBFOLDER/]FILE` (no such local path) as a hub repo's file."""
    encoder_folder = encoder if encoder is not None else "image_encoder"
    parts = value.split("/")
    if not Path(value).expanduser().exists() and len(parts) >= 3 and parts[-1].lower().endswith(WEIGHT_SUFFIXES):
        return IPAdapterSource("/".join(parts[:2]), subfolder="/".join(parts[2:-1]) or None, weight_name=parts[-1],
                               image_encoder_folder=encoder_folder)
    return IPAdapterSource(value, image_encoder_folder=encoder_folder)


def fill_ip_adapter_scales(args: argparse.Namespace, written: dict) -> list[str]:
    """An --infotext's `IP-Adapter` scales for the --ip-adapter weights given (the text names adapters by file stem,
    which is no path here, so the weights must be passed; scales given with --ip-adapter-scale win). Returns the
    keys taken: ["IP-Adapter"], or [] when nothing was taken (the key is then warned about as not honoured)."""
    from pipelines.ip_adapter_infotext import INFOTEXT_KEY, ip_adapters_from_infotext

    adapters = getattr(args, "ip_adapter", None)
    if INFOTEXT_KEY not in written or not adapters or getattr(args, "ip_adapter_scale", None):
        return []
    entries = ip_adapters_from_infotext(written)
    if len(entries) != len(adapters):
        return []
    args.ip_adapter_scale = [scale for _name, scale in entries]
    return [INFOTEXT_KEY]
