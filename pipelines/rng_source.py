"""A1111's "Random number generator source" (setting `randn_source`): which generator draws an image's noise.

A1111 offers GPU (torch.randn on the model's device, its default), CPU (a CPU torch generator) and NV (NVIDIA's
GPU noise computed on the CPU with Philox 4x32-10, `mixkit.random.philox`, so a seed gives the same picture on any
machine). In A1111 the source decides every draw of an image's `ImageRNG`: the initial noise, the variation
seed's noise, the resized-seed noise, and the noise ancestral/DDIM/LCM samplers add at each step (k-diffusion's
`randn_like`, routed to `ImageRNG.next`); the SDE samplers' Brownian trees stay torch's whatever the setting.
mixkit does the same, one generator per image of the chosen kind.

mixkit draws "CPU" by default, so its images reproduce on any machine; it writes `RNG: CPU` in every infotext (A1111
reads a missing key as its default, GPU) and `RNG: NV` for NV. "GPU" is accepted where it is the same noise as
CPU, on a model on the CPU (A1111 on a machine without CUDA draws torch.randn there too), and recorded as CPU.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

RNG_SOURCES = ("GPU", "CPU", "NV")  # A1111's choices, in its order
DEFAULT_RNG_SOURCE = "CPU"  # mixkit's; A1111's default is "GPU"
SETTING_KEY = "randn_source"  # A1111's option name (Settings, override_settings, GET /sdapi/v1/options)


def check_rng_source(value: Any, name: str = "rng_source") -> str:
    """`value` if it is one of A1111's RNG sources, spelt as A1111 spells them; ValueError listing them otherwise."""
    if not isinstance(value, str) or value not in RNG_SOURCES:
        hint = next((f" (did you mean {source!r}?)" for source in RNG_SOURCES
                     if isinstance(value, str) and source.casefold() == value.strip().casefold()), "")
        raise ValueError(f"{name} must be one of {', '.join(map(repr, RNG_SOURCES))} (A1111's RNG source: CPU is a "
                         f"CPU torch generator, NV NVIDIA's GPU noise drawn the same on any machine, GPU the model "
                         f"device's torch generator), got {value!r}{hint}.")
    return value


def check_rng_source_device(source: str, device: Any) -> None:
    """GPU noise is torch.randn on the model's device; mixkit draws every image's noise on the CPU, which is the
    same numbers only when the model is on the CPU. Elsewhere GPU is refused, naming the sources that do run."""
    if source == "GPU" and getattr(device, "type", "cpu") != "cpu":
        raise ValueError(f"RNG source GPU draws A1111's noise on the model's device ({device}), and mixkit draws all "
                         "noise with CPU generators so that an image reproduces on any machine; choose CPU (A1111's "
                         "CPU setting) or NV (NVIDIA's GPU noise, drawn on the CPU: what A1111 gives with GPU on an "
                         "NVIDIA card, or with NV anywhere).")


def infotext_rng(source: str) -> str:
    """The infotext's `RNG` value: NV for NV, CPU otherwise (GPU on a CPU model is the CPU noise, and `RNG: CPU`
    reproduces it in A1111 on any machine)."""
    return "NV" if source == "NV" else "CPU"


def new_generator(seed: int, source: str):
    """A freshly seeded generator of `source`'s kind: a CPU torch.Generator, or a PhiloxGenerator for NV."""
    if source == "NV":
        from mixkit.random import PhiloxGenerator

        return PhiloxGenerator(int(seed))
    import torch

    return torch.Generator("cpu").manual_seed(int(seed))


def is_philox(generator) -> bool:
    from mixkit.random import PhiloxGenerator

    return isinstance(generator, PhiloxGenerator)


def generator_source(generator) -> str:
    """The RNG source a generator draws for: NV for a PhiloxGenerator, CPU for a torch one."""
    return "NV" if is_philox(generator) else "CPU"


def copy_generator(generator):
    """A generator at the same point of the same stream; drawing from it leaves `generator` where it is."""
    if is_philox(generator):
        return generator.clone()
    import torch

    return torch.Generator("cpu").set_state(generator.get_state())


def randn_from(generator, shape) -> torch.Tensor:
    """The generator's next float32 CPU draw of `shape`: torch.randn for a torch generator, Philox for NV."""
    if is_philox(generator):
        return generator.randn(shape)
    import torch

    return torch.randn(shape, generator=generator, dtype=torch.float32)
