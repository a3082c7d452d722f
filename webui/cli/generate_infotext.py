"""`mixkit generate --infotext IMAGE_OR_TEXT`: the settings of an A1111 infotext, as A1111's "Send to txt2img" pastes them.

The infotext is read with mixkit's own parser (`pipelines.infotext.parse_infotext`, A1111's reading and its
defaults for missing keys; `pipelines.infotext_samplers` for old "DPM++ 2M Karras" names). Flags given on the
command line win over it; a hires-fix infotext turns on hires fix (webui.cli.generate_hires). Every key the
command cannot honour is either refused (it would change the image substantially: img2img, a hires sampler or
checkpoint) or named in one warning on stderr, never dropped silently; ControlNet units (`ControlNet 0`, ...) are
recreated by webui.cli.controlnet_units. A1111
does not switch checkpoints on paste either (its `disable_weights_auto_swap`), so a different `Model hash` or
`VAE hash` is a warning after the load, naming the flag to pass.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable

from pipelines.infotext_values import as_flag, as_integer, as_number, as_text
from webui.cli.sampler_parameter_flags import INFOTEXT_FLAG_KEYS
from webui.cli.speedup_flags import SPEEDUP_FLAG_KEYS

# argparse destination -> (infotext key as `parse_infotext` returns it, conversion). A flag left at None takes it.
FLAG_KEYS: dict[str, tuple[str, Callable[[object], Any]]] = {
    "prompt": ("Prompt", as_text),
    "negative": ("Negative prompt", as_text),
    "steps": ("Steps", as_integer),
    "cfg": ("CFG scale", as_number),
    "seed": ("Seed", as_integer),
    "subseed": ("Variation seed", as_integer),  # with its strength; A1111 writes both only when strength > 0
    "subseed_strength": ("Variation seed strength", as_number),
    "width": ("Size-1", as_integer),
    "height": ("Size-2", as_integer),
    "clip_skip": ("Clip skip", as_integer),  # A1111's default "1" when the infotext has none
    "emphasis": ("Emphasis", as_text),  # A1111 writes it when not "Original"; missing means "Original"
    "ensd": ("ENSD", as_integer),
    "ngms": ("NGMS", as_number),
    "ngms_all_steps": ("NGMS all steps", as_flag),
    "skip_early_cfg": ("Skip Early CFG", as_number),
    "refiner_switch_at": ("Refiner switch at", as_number),  # with --refiner: the infotext names a checkpoint title
    # A1111 writes it on every image made with the setting on (a refiner or not)
    "refiner_switch_by_sample_steps": ("Refiner switch by sampling steps", as_flag),
    # A1111 writes it when the option changed a schedule of the image
    "use_old_scheduling": ("Old prompt editing timelines", as_flag),
    "tiling": ("Tiling", as_flag),  # A1111 writes "Tiling: True" when on
    # A1111's paste of a restored image: Restore faces on, with the restorer it names (its folder flag is needed)
    "restore_faces": ("Face restoration", lambda text: True),
    "face_restoration_model": ("Face restoration", as_text),
    **SPEEDUP_FLAG_KEYS,  # A1111's Hypertile keys and mixkit's FreeU (webui.cli.speedup_flags)
    **INFOTEXT_FLAG_KEYS,  # A1111's Sampler parameters: Sigma churn, Schedule rho, ... (webui.cli.sampler_parameter_flags)
}
ETA_KEYS = ("Eta DDIM", "Eta")  # A1111 writes one of them, for DDIM or the ancestral samplers, when not the default
SAMPLER_KEYS = ("Sampler", "Schedule type")
# Written by mixkit / A1111 for people or checked after the load; reading them back changes nothing.
INFORMATIONAL_KEYS = {"Version", "User", "Lora hashes", "TI hashes", "Model", "Model hash", "VAE", "VAE hash", "RNG",
                      "Refiner"}  # with --refiner given (otherwise refused); its title is checked by nobody
HIRES_KEYS = ("Hires upscale", "Hires upscaler", "Hires resize-1", "Hires resize-2", "Hires steps", "Hires sampler",
              "Hires schedule type", "Hires checkpoint", "Hires prompt", "Hires negative prompt", "Hires CFG Scale",
              "Hires refiner")
# Hires keys with no `mixkit generate` flag (webui.cli.generate_hires has the others): A1111's hires checkpoint and
# CFG choices, and which pass the refiner finishes.
UNSUPPORTED_HIRES_KEYS = ("Hires checkpoint", "Hires CFG Scale", "Hires refiner")
# sd-webui-controlnet's unit keys, `ControlNet 0`, ...: recreated as units (webui.cli.controlnet_units)
CONTROLNET_KEY = re.compile(r"^ControlNet \d+$", re.MULTILINE)
# key -> why `mixkit generate` refuses it: honouring none of it would give a substantially different image.
REFUSED_KEYS = {
    "Denoising strength": "it is an img2img image (denoising strength without hires-fix keys; `mixkit img2img "
                          "IMAGE` redraws an image)",
    "Mask blur": "it is an inpainting image",
}


def read_infotext_argument(value: str) -> str:
    """The infotext text from `--infotext`: an image file (its PNG chunk or EXIF), a `.txt` file, `-` (stdin) or
    the text itself.

    A value is a file when one by that name exists; otherwise it is the text itself if it has more than one line or
    an A1111 parameters line (`Steps: 20, Sampler: …`, which every infotext A1111 writes has). A one-line value
    without one that looks like a path (a path separator, a leading `~`, or a file-like suffix as in `.png`, `.txt`
    or a mistyped `.pn`) is refused as a missing file, so a wrong file name never becomes the prompt of a useless
    image. Any other one-line value is a prompt-only infotext, as A1111 reads one.
    """
    from pipelines.infotext import split_infotext
    from pipelines.infotext_read import read_infotext

    if value == "-":
        return sys.stdin.read()
    if not value.strip():
        raise ValueError("--infotext is empty; pass an image with an infotext or the infotext text")
    if "\n" in value:  # no file name has a line break
        return value
    path = Path(value).expanduser()
    # os.path's tests, not Path's: they say False, not OSError, for a one-line infotext longer than a file name.
    is_file, is_dir = os.path.isfile(path), os.path.isdir(path)
    if is_file and path.suffix.lower() == ".txt":  # A1111's save_txt writes infotexts so
        text = path.read_text(encoding="utf-8", errors="replace")
        if not text.strip():
            raise ValueError(f"--infotext {value}: the text file is empty; pass an image or an infotext")
        return text
    if is_file:
        text = read_infotext(path)
        if text is None:
            raise ValueError(f"--infotext {value}: the image has no infotext (no PNG 'parameters' chunk, no EXIF "
                             "UserComment); pass another image or the infotext text")
        return text
    if is_dir:
        raise ValueError(f"--infotext {value}: is a folder; pass one image in it (or its .txt file), or the "
                         "infotext text")
    if split_infotext(value)[2]:  # a parameters line: the text itself
        return value
    if _looks_like_a_path(value):
        raise FileNotFoundError(f"--infotext {value}: no such file; pass an existing image or .txt file, or the "
                                "infotext text itself (with its 'Steps: ...' line)")
    return value


# A file-like ending: a dot, a letter, then up to four letters or digits (.png, .txt, .jpeg, a mistyped .pn), but
# not the ".5" of "v1.5" or the ".2)" of "(cat:1.2)" a prompt ends with.
FILE_LIKE_SUFFIX = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,4}$")


def _looks_like_a_path(value: str) -> bool:
    """A one-line `--infotext` value that names a file rather than being a prompt. A backslash is no separator
    on POSIX: A1111 prompts escape brackets with it, as in `\\(cat\\)`."""
    separators = [sep for sep in (os.sep, os.altsep) if sep]
    return (any(sep in value for sep in separators) or value.startswith("~")
            or FILE_LIKE_SUFFIX.search(value.strip()) is not None)


def apply_infotext(args: argparse.Namespace, text: str, img2img=None) -> tuple[argparse.Namespace, dict[str, object]]:
    """`args` with every generation flag the command line left out (None) taken from the infotext, and the
    infotext's own keys (for `warn_about_model`). Refuses what would change the image substantially; warns on
    stderr about every other key it cannot honour.

    `img2img` is `mixkit img2img`'s `Img2ImgInfotextKeys` (webui.cli.img2img_infotext): its own flags are filled
    too, and, as A1111's paste into the img2img tab, an img2img or inpaint infotext is welcome and hires keys are
    left unused (img2img has no hires fix) instead of refused."""
    from pipelines.infotext import parse_infotext
    from pipelines.infotext_samplers import sampler_and_schedule

    from webui.cli.generate_hires import HIRES_INFOTEXT_KEYS, is_hires_infotext

    parsed = parse_infotext(text)
    written = parse_infotext(text, defaults=False)  # the keys the text itself has
    _refuse_what_changes_the_image(written, args, img2img is not None)
    args = argparse.Namespace(**vars(args))
    # hires flags from the text's own keys only: A1111's defaults for missing ones would turn hires fix on
    taken = _fill_flags(args, HIRES_INFOTEXT_KEYS, written) if img2img is None and is_hires_infotext(written) else []
    unused = {} if img2img is None else img2img.unused(args, written)
    if img2img is not None:  # the text's own keys only, as for hires: missing ones keep the command's defaults
        taken += _fill_flags(args, img2img.flag_keys(args), written)
    taken += [key for key in _fill_flags(args, FLAG_KEYS, parsed) if key in written]
    taken += _fill_seed_resize(args, written)
    # --rng-source from a written `RNG` only (A1111 writes it when not its default, GPU): a missing key is GPU noise
    taken += _fill_flags(args, {"rng_source": ("RNG", as_text)}, written)
    from webui.cli.ip_adapter_flags import fill_ip_adapter_infotext

    taken += fill_ip_adapter_infotext(args, written)  # with --ip-adapter given: its scales and windows
    if "Prompt" in taken and getattr(args, "lora_dir", None) and written.get("Lora hashes"):
        # A1111's paste: tags re-linked through `Lora hashes` to the local files with those hashes (renamed copies).
        from mixkit.lora import LoraLibrary
        from mixkit.lora.relink import library_lookup, relink_lora_tags

        args.prompt = relink_lora_tags(args.prompt, written["Lora hashes"], library_lookup(LoraLibrary(args.lora_dir)))
    ignored = []
    sampler, schedule = sampler_and_schedule(parsed)
    if args.sampler is None and sampler is not None:
        args.sampler = sampler
        taken.append("Sampler")
        if args.schedule_type is None:
            args.schedule_type = schedule
    elif sampler is not None:  # --sampler wins; the infotext's schedule and eta were meant for its own sampler
        ignored.append(f"Sampler: {parsed['Sampler']} (--sampler {args.sampler} given)")
    eta_key = next((key for key in ETA_KEYS if key in written), None)
    if eta_key is not None:
        if args.eta is not None:
            pass  # --eta wins
        elif "Sampler" in taken:
            try:
                args.eta = as_number(written[eta_key])
            except ValueError:
                raise ValueError(f"--infotext: {eta_key}: {written[eta_key]!r} is not a number; fix the infotext or "
                                 "pass --eta") from None
        else:
            ignored.append(f"{eta_key}: {written[eta_key]} (for the infotext's sampler, not --sampler {args.sampler})")
    handled = {*(key for key, _ in FLAG_KEYS.values()), *ETA_KEYS, *SAMPLER_KEYS, *INFORMATIONAL_KEYS, "Size-2",
               "Prompt", "Negative prompt", *taken,
               *CONTROLNET_KEY.findall("\n".join(written))}  # the units: webui.cli.controlnet_units
    ignored += [f"{key}: {value}{unused.get(key, '')}" for key, value in written.items() if key not in handled]
    if "RNG" not in written:
        ignored.append("RNG: GPU (no RNG key: A1111's GPU noise, which mixkit does not draw; NV is what an NVIDIA "
                       "GPU drew: pass --rng-source NV for such an image, up to float rounding)")
    if ignored:
        print("mixkit: warning: --infotext keys not honoured: " + "; ".join(ignored), file=sys.stderr)
    return args, written


def _fill_seed_resize(args: argparse.Namespace, written: dict[str, object]) -> list[str]:
    """--seed-resize-from from the infotext's `Seed resize from: WxH` when the command line left it out."""
    keys = ("Seed resize from-1", "Seed resize from-2")
    if getattr(args, "seed_resize_from", None) is not None or not all(key in written for key in keys):
        return []
    try:
        args.seed_resize_from = (as_integer(written[keys[0]]), as_integer(written[keys[1]]))
    except ValueError:
        raise ValueError(f"--infotext: Seed resize from: {written[keys[0]]}x{written[keys[1]]} is not a size; fix "
                         "the infotext or pass --seed-resize-from") from None
    return list(keys)


def _fill_flags(args: argparse.Namespace, flag_keys: dict[str, tuple[str, Callable[[object], Any]]],
                values: dict[str, object]) -> list[str]:
    """Set each flag of `flag_keys` the command line left out (None) from `values`; returns the keys taken."""
    taken = []
    for dest, (key, convert) in flag_keys.items():
        if getattr(args, dest) is not None or key not in values:
            continue
        try:
            setattr(args, dest, convert(values[key]))
        except ValueError:
            raise ValueError(f"--infotext: {key}: {values[key]!r} is not a valid value; fix the infotext or pass "
                             f"--{dest.replace('_', '-')}") from None
        taken.append(key)
    return taken


def _same_checkpoint(written_hash: str, model) -> bool:
    """The infotext's "Model hash" names the loaded checkpoint: its 10-digit hash, or for a single file also the
    legacy 8-digit hash of pre-2023 infotexts (A1111 keeps both among a checkpoint's ids)."""
    from pathlib import Path

    from mixkit.io import model_hash_matches

    if written_hash.lower() == str(model.model_hash).lower():
        return True
    source = Path(str(model.source)) if getattr(model, "source", None) else None
    return source is not None and source.is_file() and model_hash_matches(written_hash, source)


def _same_vae_name(written: str, model) -> bool:
    """The infotext's `VAE` names the loaded VAE: its file or folder name, with or without the extension."""
    from pathlib import Path

    loaded = model.extras.get("vae_name")
    if not loaded:
        return False
    return written in (loaded, Path(str(loaded)).stem)


def warn_about_model(pipe, written: dict[str, object], vae_given: bool) -> None:
    """After the load: a warning when the infotext names another checkpoint or VAE than the one loaded."""
    model = pipe.model
    problems = []
    wanted = written.get("Model hash")
    if wanted and not _same_checkpoint(str(wanted), model):
        problems.append(f"its Model hash {wanted} (Model: {written.get('Model', '?')}) is not the loaded model's "
                        f"{model.model_hash}; pass that checkpoint with --model")
    vae = written.get("VAE hash")
    if vae and not vae_given and str(vae).lower() != str(model.extras.get("vae_hash") or "").lower():
        problems.append(f"its VAE hash {vae} (VAE: {written.get('VAE', '?')}) is not the loaded VAE's; pass it "
                        "with --vae")
    elif not vae and written.get("VAE") and not vae_given and not _same_vae_name(str(written["VAE"]), model):
        # A VAE folder (or an older infotext) has a name but no hash: compare the names, as A1111's paste does.
        loaded = model.extras.get("vae_name") or "the checkpoint's own"
        problems.append(f"its VAE {written['VAE']!r} is not the loaded one ({loaded}); pass it with --vae")
    if problems:
        print("mixkit: warning: the image will differ from the infotext's: " + "; ".join(problems), file=sys.stderr)


def _refuse_what_changes_the_image(written: dict[str, object], args: argparse.Namespace, img2img: bool) -> None:
    from webui.cli.generate_hires import is_hires_infotext

    hires = is_hires_infotext(written)
    unsupported = [key for key in (UNSUPPORTED_HIRES_KEYS if hires else HIRES_KEYS) if key in written]
    if unsupported and not img2img:
        what = "hires-fix settings" if hires else "hires keys without the Denoising strength that turns hires fix on"
        raise ValueError(f"--infotext has {what} `mixkit generate` cannot honour ({', '.join(unsupported)}); use the "
                         "web UI or the API (POST /sdapi/v1/txt2img with this infotext), or remove those keys from the "
                         "text")
    if written.get("Refiner") and getattr(args, "refiner", None) is None:
        # The infotext names the refiner by its checkpoint title (`name [hash]`), which is no path on this machine.
        raise ValueError(f"--infotext was made with the refiner {written['Refiner']!r} (Refiner switch at: "
                         f"{written.get('Refiner switch at', '?')}); pass --refiner with that checkpoint's path or hub "
                         "id to reproduce it, or remove the Refiner keys from the text to make the base image")
    for key, why in REFUSED_KEYS.items() if not img2img else ():
        if key == "Denoising strength" and hires:
            continue  # the hires fix's own (webui.cli.generate_hires)
        if key in written:
            raise ValueError(f"--infotext: {key}: {written[key]}: {why}, which `mixkit generate` cannot reproduce; "
                             "use the web UI or the API, or remove that key from the text")

