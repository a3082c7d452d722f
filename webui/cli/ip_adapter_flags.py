"""IP-Adapter on `mixkit generate` and `mixkit img2img`: `--ip-adapter PATH --ip-adapter-image IMG
[--ip-adapter-scale 0.6] [--ip-adapter-image-encoder PATH] [--ip-adapter-mask MASK] [--ip-adapter-guidance 0.2 0.8]`,
or `--ip-adapter-embeds FILE.safetensors` (written by `mixkit ip-adapter-embeds`) instead of the image.

Each flag may be repeated. With one `--ip-adapter`, every `--ip-adapter-image` is an image for it (their tokens are
concatenated, as diffusers does); with several, one image per adapter in the order given. `--ip-adapter-embeds`
replaces the images: one file per adapter, for every adapter (mixing the two would need a per-adapter marker the
command line has no natural spelling for). `--ip-adapter-mask` gives one grayscale mask per reference image, in
order (the images given, or the ones each embeddings file was made from). `--ip-adapter-scale`,
`--ip-adapter-guidance` and `--ip-adapter-image-encoder` take one value for all adapters or one per adapter.
Everything is checked and the files found before the model loads.
"""

from __future__ import annotations

import argparse
import sys
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
    group.add_argument("--ip-adapter-embeds", action="append", default=None, metavar="FILE",
                       help="precomputed image-prompt embeddings (`mixkit ip-adapter-embeds` writes them) instead of "
                            "--ip-adapter-image: one .safetensors file per --ip-adapter, in order; the image encoder "
                            "is then not loaded")
    group.add_argument("--ip-adapter-scale", action="append", type=float, default=None, metavar="SCALE",
                       help="how strongly the image steers, 0-2 (default 1; 0.5-0.7 keeps more of the prompt); "
                            "one for all adapters or one per adapter")
    group.add_argument("--ip-adapter-mask", action="append", default=None, metavar="MASK",
                       help="where a reference image acts: a grayscale image (white: acts, black: not) in the "
                            "output's aspect ratio, one per reference image in the order given (e.g. two "
                            "--ip-adapter-image with a left and a right mask)")
    group.add_argument("--ip-adapter-guidance", action="append", nargs=2, type=float, default=None,
                       metavar=("START", "END"),
                       help="the part of the steps the adapter acts in, as fractions (sd-webui-controlnet's "
                            "Starting/Ending Control Step, e.g. 0 0.6); one pair for all adapters or one per adapter")
    group.add_argument("--ip-adapter-image-encoder", action="append", default=None, metavar="PATH",
                       help="the CLIP vision encoder folder or hub id (default: image_encoder/ beside the weights); "
                            "one for all adapters or one per adapter")


# flag -> the attribute argparse gives it, for the checks that name flags
_FLAGS = {"--ip-adapter-image": "ip_adapter_image", "--ip-adapter-embeds": "ip_adapter_embeds",
          "--ip-adapter-scale": "ip_adapter_scale", "--ip-adapter-mask": "ip_adapter_mask",
          "--ip-adapter-guidance": "ip_adapter_guidance", "--ip-adapter-image-encoder": "ip_adapter_image_encoder"}


def ip_adapter_fields(args: argparse.Namespace) -> dict:
    """The IP-Adapter params fields of the flags ({} without --ip-adapter), images, masks and embeddings read and
    files found."""
    given = {flag: list(getattr(args, name, None) or []) for flag, name in _FLAGS.items()}
    adapters = args.ip_adapter or []
    if not adapters:
        named = [flag for flag, values in given.items() if values]
        if named:
            raise ValueError(f"{', '.join(named)} given without --ip-adapter PATH; add the IP-Adapter weights.")
        return {}
    images, embeds_files = given["--ip-adapter-image"], given["--ip-adapter-embeds"]
    _check_counts(len(adapters), given)
    encoders = given["--ip-adapter-image-encoder"]
    encoder_of = encoders * len(adapters) if len(encoders) == 1 else encoders or [None] * len(adapters)
    sources = [source_of_flag(value, encoder) for value, encoder in zip(adapters, encoder_of)]
    from webui.cli.img2img import read_init_image

    fields = {"ip_adapter": sources}
    if images:
        pictures = [read_init_image(path) for path in images]
        fields["ip_adapter_image"] = pictures if len(adapters) == 1 else [[p] for p in pictures]
    else:
        from webui.cli.ip_adapter_embeds_file import read_embeds_file

        fields["ip_adapter_image"] = None  # every adapter is fed by its embeddings
        fields["ip_adapter_image_embeds"] = [read_embeds_file(path, source, "--ip-adapter-embeds")
                                             for path, source in zip(embeds_files, sources)]
    scales = given["--ip-adapter-scale"]
    fields["ip_adapter_scale"] = (scales[0] if len(scales) == 1 else scales) if scales else 1.0
    windows = [tuple(window) for window in given["--ip-adapter-guidance"]]
    if windows:
        fields["ip_adapter_guidance"] = windows[0] if len(windows) == 1 else windows
    masks = given["--ip-adapter-mask"]
    if masks:
        fields["ip_adapter_mask"] = _masks_per_adapter([read_grayscale_mask(path) for path in masks], fields)
    from pipelines.ip_adapter_files import resolve_image_encoder, resolve_weight_file
    from pipelines.ip_adapter_inputs import check_ip_adapter_inputs

    from webui.cli.flag_names import errors_in_flag_terms

    with errors_in_flag_terms():  # `--ip-adapter-scale must be ...`, not the field name
        check_ip_adapter_inputs(**fields)  # the masks' shape against the output: `check_mask_sizes`
    for source in sources:  # a typo fails now, not after the model has loaded
        weights = resolve_weight_file(source)
        if images:  # embeddings need no encoder (none is loaded)
            resolve_image_encoder(source, weights)
    return fields


def _check_counts(adapters: int, given: dict[str, list]) -> None:
    """Refuse flag counts that do not say which adapter a value is for, naming the flag."""
    images, embeds = given["--ip-adapter-image"], given["--ip-adapter-embeds"]
    if images and embeds:
        raise ValueError("--ip-adapter-image and --ip-adapter-embeds were both given; give images or embeddings "
                         "files (one per --ip-adapter), not both (write embeddings for every adapter with "
                         "`mixkit ip-adapter-embeds`).")
    if not images and not embeds:
        raise ValueError("--ip-adapter needs --ip-adapter-image IMG (the picture the adapter steers towards) or "
                         "--ip-adapter-embeds FILE (its precomputed embeddings).")
    for flag in ("--ip-adapter-scale", "--ip-adapter-guidance", "--ip-adapter-image-encoder"):
        if len(given[flag]) not in (0, 1, adapters):
            raise ValueError(f"{flag} was given {len(given[flag])} times for {adapters} --ip-adapter; give it once "
                             "for all or once per adapter.")
    if embeds and len(embeds) != adapters:
        raise ValueError(f"--ip-adapter-embeds was given {len(embeds)} times for {adapters} --ip-adapter; give one "
                         "embeddings file per adapter, in the same order.")
    if embeds and given["--ip-adapter-image-encoder"]:
        raise ValueError("--ip-adapter-image-encoder given with --ip-adapter-embeds, which need no image encoder; "
                         "drop --ip-adapter-image-encoder.")
    if adapters > 1 and images and len(images) != adapters:
        raise ValueError(f"--ip-adapter-image was given {len(images)} times for {adapters} --ip-adapter; with "
                         "several adapters give one image per adapter, in the same order.")
    if images and given["--ip-adapter-mask"] and len(given["--ip-adapter-mask"]) != len(images):
        raise ValueError(f"--ip-adapter-mask was given {len(given['--ip-adapter-mask'])} times for "
                         f"{len(images)} --ip-adapter-image; give one mask per reference image, in the same order.")


def _masks_per_adapter(masks: list, fields: dict) -> list:
    """The masks (one per reference image, in order) as `ip_adapter_mask`'s one entry per adapter."""
    if fields["ip_adapter_image"] is not None:
        counts = [len(fields["ip_adapter_image"])] if len(fields["ip_adapter"]) == 1 else [1] * len(masks)
    else:
        counts = [int(embeds.shape[1]) for embeds in fields["ip_adapter_image_embeds"]]
    if sum(counts) != len(masks):
        raise ValueError(f"--ip-adapter-mask was given {len(masks)} times for the {sum(counts)} reference images "
                         f"of the --ip-adapter-embeds files ({', '.join(map(str, counts))} per adapter); give one "
                         "mask per reference image, in order.")
    entries, start = [], 0
    for count in counts:
        entries.append(masks[start:start + count])
        start += count
    return entries


def read_grayscale_mask(path: str, flag: str = "--ip-adapter-mask"):
    """The mask as an "L" image; a coloured or transparent one is refused, since which channel is meant would be a
    guess (an RGB file whose channels are equal, as most editors save black-and-white, is grayscale)."""
    import numpy as np

    from webui.cli.img2img import read_mask

    from PIL import Image

    mask = read_mask(path, flag)
    if mask.mode in ("L", "1"):
        return mask.convert("L")
    if mask.mode.startswith("I"):  # a 16-bit grayscale PNG: 0-65535, to 0-255 (PIL's own convert would clip)
        return Image.fromarray((np.asarray(mask, dtype=np.float64) / 257).round().clip(0, 255).astype(np.uint8))
    if mask.mode not in ("LA", "P", "PA", "RGB", "RGBA"):
        raise ValueError(f"{flag} {path!r} is a {mask.mode} image; give an 8- or 16-bit grayscale mask (white: the "
                         "reference acts, black: it does not).")
    rgba = np.asarray(mask.convert("RGBA"))
    if (rgba[..., 3] < 255).any():
        raise ValueError(f"{flag} {path!r} has transparent pixels; give a grayscale mask (white: the reference acts, "
                         "black: it does not) without transparency.")
    if not ((rgba[..., 0] == rgba[..., 1]) & (rgba[..., 1] == rgba[..., 2])).all():
        raise ValueError(f"{flag} {path!r} is a colour image; give a grayscale mask (white: the reference acts, "
                         "black: it does not).")
    return mask.convert("L")


def source_of_flag(value: str, encoder: str | None) -> IPAdapterSource:
    """A local path as it is; `ORG/NAME/[SUBFOLDER/]FILE` (no such local path) as a hub repo's file."""
    encoder_folder = encoder if encoder is not None else "image_encoder"
    parts = value.split("/")
    if not Path(value).expanduser().exists() and len(parts) >= 3 and parts[-1].lower().endswith(WEIGHT_SUFFIXES):
        return IPAdapterSource("/".join(parts[:2]), subfolder="/".join(parts[2:-1]) or None, weight_name=parts[-1],
                               image_encoder_folder=encoder_folder)
    return IPAdapterSource(value, image_encoder_folder=encoder_folder)


def fill_ip_adapter_infotext(args: argparse.Namespace, written: dict) -> list[str]:
    """An --infotext's `IP-Adapter` scales and `IP-Adapter Guidance` windows for the --ip-adapter weights given (the
    text names adapters by file stem, which is no path here, so the weights must be passed; --ip-adapter-scale and
    --ip-adapter-guidance given win). Returns the keys taken; a key not taken is warned about as not honoured."""
    from pipelines.ip_adapter_infotext import GUIDANCE_KEY, INFOTEXT_KEY, ip_adapter_fields_from_infotext

    adapters = getattr(args, "ip_adapter", None)
    if INFOTEXT_KEY not in written or not adapters:
        return []
    restored = ip_adapter_fields_from_infotext(written)
    if len(restored["ip_adapter_scale"]) != len(adapters):
        print(f"mixkit: note: --infotext names {len(restored['ip_adapter_scale'])} IP-Adapters but "
              f"{len(adapters)} --ip-adapter were given; its scales and windows are not used", file=sys.stderr)
        return []
    taken = []
    if not getattr(args, "ip_adapter_scale", None):
        args.ip_adapter_scale = restored["ip_adapter_scale"]
        taken.append(INFOTEXT_KEY)
    if GUIDANCE_KEY in written and not getattr(args, "ip_adapter_guidance", None):
        args.ip_adapter_guidance = [list(window) for window in restored["ip_adapter_guidance"]]
        taken.append(GUIDANCE_KEY)
    return taken
