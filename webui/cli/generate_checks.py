"""Checks `mixkit generate` runs on its flags before the (slow) model load: device, LoRAs, folders, backend, VAE.

Each raises the error the CLI turns into one line `mixkit: error: …` with exit code 2, naming the flag,
the value and what to pass instead, as the README promises for values checked before the model loads.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

# `<lora:name...>` / `<lyco:name...>` in a prompt: the tags that need a LoRA folder (A1111's extra-network syntax).
LORA_TAG = re.compile(r"<(?:lora|lyco):[^>]*>")
# The device types torch knows and mixkit can run on; torch also parses others (meta, hpu ...) that cannot hold weights.
RUNNABLE_DEVICE_TYPES = ("cpu", "cuda", "mps", "xpu")


def check_generate_args(args: argparse.Namespace, prompt: str) -> None:
    """Every flag check that needs no model, in the order a user reads the flags."""
    check_device(args.device)
    check_folder(args.lora_dir, "LoRA folder", "--lora-dir", "the folder that holds your LoRA files")
    check_lora_specs(args.lora)
    check_lora_tags_have_a_folder(prompt, args.lora_dir)
    check_folder(getattr(args, "hypernetwork_dir", None), "hypernetwork folder", "--hypernetwork-dir",
                 "the folder that holds your A1111 hypernetwork .pt files")
    check_hypernetwork_tags(prompt, getattr(args, "hypernetwork_dir", None))
    check_backend(args.backend)
    check_preset_on_backend(args.preset, args.backend, bool(getattr(args, "vae_tiling", False)))
    check_loras_on_backend(args.lora, prompt, args.backend)
    check_refiner_on_preset(args)
    check_vae_source(args.vae)


def check_device(device: str | None) -> None:
    """A device string torch parses, of a type mixkit runs on, that exists on this machine (None: cpu): the Python
    API's own check (`load_options.check_device`), its messages in flag terms."""
    from mixkit.models.diffusion.load_options import check_device as check_load_device

    try:
        check_load_device(device)
    except (TypeError, ValueError) as error:
        message = str(error).replace(f"device={device!r}", f"--device {device!r}").replace("device='cpu'", "--device cpu")
        raise ValueError(message) from None


def check_folder(folder: str | None, what: str, flag: str, hint: str) -> None:
    """An optional folder flag names an existing folder (a typo would otherwise surface as a later "not found")."""
    if folder is not None and not Path(folder).expanduser().is_dir():
        raise NotADirectoryError(f"{what} {folder} ({flag}) does not exist or is not a folder; pass {hint}")


def check_lora_specs(specs: list[str]) -> None:
    """Each `--lora NAME_OR_PATH[:WEIGHT[:UNET_WEIGHT]]` parses, and a weight part that is not a number is named as such.

    `mixkit.lora.LoraRequest.parse` reads numbers from the right and keeps anything else as part of the name (so
    `C:\\loras\\x.safetensors` works); `x.safetensors:abc` would then be looked up as a file called "x.safetensors:abc"
    after the model load. A last part without a path separator, on a name that is not an existing file, is a weight.
    """
    from mixkit.lora import LoraRequest

    for spec in specs:
        request = LoraRequest.parse(spec)  # empty names, non-finite or out-of-range strengths
        source = str(request.source)
        head, sep, tail = source.rpartition(":")
        if (sep and head.strip() and tail and not any(c in tail for c in "/\\")
                and not Path(source).expanduser().exists()):
            raise ValueError(f"--lora {spec!r}: the weight {tail!r} is not a number; write NAME_OR_PATH:WEIGHT with "
                             f"a number, e.g. {head}:0.8")


def check_hypernetwork_tags(prompt: str, hypernetwork_dir: str | None) -> None:
    """With --hypernetwork-dir, every `<hypernet:name:strength>` tag parses and names a file of the folder (the
    pipeline's own checks, run before the model load; without the folder the tags are skipped with a warning)."""
    if hypernetwork_dir is None:
        return
    from mixkit.hypernetworks import HypernetworkLibrary, parse_hypernetwork_tags

    library = HypernetworkLibrary(hypernetwork_dir)
    for request in parse_hypernetwork_tags(prompt):
        library.resolve(request.name)


def check_lora_tags_have_a_folder(prompt: str, lora_dir: str | None) -> None:
    """A `<lora:...>` tag names a file in the LoRA folder; without `--lora-dir` the pipeline would refuse it only
    after the model load."""
    tag = LORA_TAG.search(prompt or "")
    if tag is not None and lora_dir is None:
        raise ValueError(f"prompt tag {tag.group(0)!r} names a LoRA but no LoRA folder is set; pass --lora-dir FOLDER "
                         "(the folder that holds the LoRA files)")


def check_backend(backend: str) -> None:
    """The execution backend is a registered one (the registry's error lists them)."""
    from mixkit.errors import UnknownNameError
    from mixkit.runtime.backends import EXECUTION_BACKENDS

    try:
        EXECUTION_BACKENDS.get(backend)
    except UnknownNameError as error:
        raise ValueError(f"--backend: {error}") from None


def check_preset_on_backend(preset: str, backend: str, vae_tiling: bool) -> None:
    """`--preset` (and `--vae-tiling`) hold nothing `--backend` cannot honour: optimize()'s own check
    (`backend_refusals`), before the model load and in flag terms."""
    from mixkit.runtime import PRESETS
    from mixkit.runtime.apply import backend_refusals

    config = PRESETS.get(preset).with_changes(vae_tiling=vae_tiling)  # an unknown preset: the error lists them
    refused = backend_refusals(config, backend)
    if not refused:
        return
    from_preset = [name for name in refused if name != "vae_tiling"]
    flags = (["--vae-tiling"] if "vae_tiling" in refused else []) + ([f"--preset {preset}"] if from_preset else [])
    instead = (["leave out --vae-tiling"] if "vae_tiling" in refused else []) + (
        [f"use --preset exact or fast with --backend {backend}"] if from_preset else [])
    raise ValueError(f"{' with '.join(flags)}: backend {backend!r} runs its own compiled UNet, VAE and text-encoder "
                     f"graphs and cannot honour {refused}; {', or '.join(instead)}, or use --backend torch")


def check_loras_on_backend(specs: list[str], prompt: str, backend: str) -> None:
    """`--lora` and `<lora:>` tags need a backend that runs the torch UNet: OpenVINO's graphs are compiled with fixed
    weights, and the pipeline would refuse them only after loading the model and converting its graphs. The Python
    API's advice (merge before optimize) has no flag, so the CLI's is --backend torch."""
    if backend in ("torch", "torch.compile"):
        return
    tag = LORA_TAG.search(prompt or "")
    given = [f"--lora {spec}" for spec in specs] + ([f"prompt tag {tag.group(0)!r}"] if tag is not None else [])
    if given:
        raise ValueError(f"{', '.join(given)}: LoRAs cannot be applied on --backend {backend}, whose graphs are "
                         "compiled with fixed weights; use --backend torch (or torch.compile) for LoRAs")


def check_refiner_on_preset(args: argparse.Namespace) -> None:
    """`--refiner` with a preset or backend that changes the model: the CLI loads the refiner from its path, as a plain
    torch model, which the pipeline refuses (pipelines.refiner_optimization) only after the base model loaded."""
    tiling = bool(getattr(args, "vae_tiling", False))
    if args.refiner is None or (args.preset == "exact" and args.backend == "torch" and not tiling):
        return
    given, own = Path(args.refiner).expanduser(), Path(args.model or "").expanduser()
    if args.model and given.exists() and own.exists() and given.resolve() == own.resolve():
        return  # the model as its own refiner: nothing to switch to (A1111 writes no Refiner keys)
    flags = " ".join(flag for flag, on in ((f"--preset {args.preset}", args.preset != "exact"),
                                           (f"--backend {args.backend}", args.backend != "torch"),
                                           ("--vae-tiling", tiling)) if on)
    raise ValueError(f"--refiner {args.refiner} with {flags}: the refiner would run unoptimised while the infotext "
                     "labels the image with the base model's optimisation; leave out --refiner, or use it with "
                     "--preset exact --backend torch")


def check_vae_source(vae: str | None) -> None:
    """`--vae` is an existing path, a shipped tiny model or a Hugging Face id (the loader's own error would say
    "Model path")."""
    if vae is None:
        return
    from mixkit.errors import ModelNotFoundError
    from mixkit.io.sources import parse_hub_id, shipped_tiny_model

    if Path(vae).expanduser().exists() or shipped_tiny_model(vae) is not None or parse_hub_id(vae) is not None:
        return
    raise ModelNotFoundError(f"VAE path {vae!r} (--vae) does not exist; check the path (it is not a Hugging Face id "
                             "either, which looks like 'org/name'), or leave out --vae to use the model's own VAE")
