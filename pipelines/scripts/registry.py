"""Selectable scripts (A1111's "Script" dropdown): one registry, so the API, the UI and the CLI dispatch the same way.

A script is found by A1111's title in any case ("x/y/z plot", as `/sdapi/v1/scripts` lists it). It declares the
kinds it runs for, its positional `script_args` (what `/sdapi/v1/script-info` reports), a pure `parse` of those args
into a typed config (ValueError naming the slot, the value and what is allowed) and a `run` that makes a
`ScriptResult`. A new script is one `register_script(SelectableScript(...))`; nothing else dispatches on titles.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable

from mixkit.registry import Registry
from pipelines.generation import GenerationResult


@dataclass(frozen=True)
class ScriptArg:
    """One `script_args` slot as A1111's ScriptArg describes it: label, default and, for sliders, range and step, for
    choices the choices."""

    label: str | None
    default: Any
    minimum: float | None = None
    maximum: float | None = None
    step: float | None = None
    choices: list | None = None

    def info(self) -> dict:
        return {"label": self.label, "value": self.default, "minimum": self.minimum, "maximum": self.maximum,
                "step": self.step, "choices": self.choices}


@dataclass
class ScriptResult(GenerationResult):
    """A script's result in A1111's `Processed` shape: its first `index_of_first_image` images are grids (with
    `grid_infotexts`-style infotexts, already in `infotexts`), then the images. `samples` holds every image the script
    generated, returned or not, for saving as A1111 saves each sample; grids save as `<grid_prefix>-NNNN.png`."""

    index_of_first_image: int = 0
    grid_prefix: str = "grid"
    samples: GenerationResult | None = None

    def grids(self) -> list[tuple[Any, str]]:
        return list(zip(self.images[:self.index_of_first_image], self.infotexts[:self.index_of_first_image]))

    def save_grids(self, folder: str | os.PathLike, writing=None) -> list:
        """Each grid as `<grid_prefix>-NNNN.png` in `folder`, numbered on from the highest there, with its infotext."""
        from pipelines.image_grid import next_grid_path
        from pipelines.png import PNG_ONLY, save_png

        os.makedirs(folder, exist_ok=True)
        return [save_png(image, next_grid_path(folder, self.grid_prefix), text or None, writing=writing or PNG_ONLY)
                for image, text in self.grids()]

    def sample_images(self) -> GenerationResult:
        """Every image the script generated (with the copies kept from before face restoration / colour correction):
        `samples`, else the images after the grids."""
        if self.samples is not None:
            return self.samples
        first = self.index_of_first_image
        return GenerationResult(self.images[first:], self.seeds[first:], self.infotexts[first:])

    def save(self, folder: str | os.PathLike, writing=None) -> list:
        """The generated images (every sample), as `GenerationResult.save` names them; grids: `save_grids`."""
        return self.sample_images().save(folder, writing)


@dataclass(frozen=True)
class SelectableScript:
    """A script by A1111's `title`. `args(kind, **context)`: its script_args slots; `parse(script_args, kind=...,
    **context)`: the typed config; `plan(params, config, **context)`: the params of every generation it will run,
    after its own checks (a server checks each against its limits before queueing); `run(pipe, params, config,
    callback=None, control=None, **context)`: the result. `describe_call(config, index)`: where `plan`'s call
    `index` comes from ("line 12", "cell Size: 0x64"), so a server's refusal of one call names it."""

    title: str
    kinds: frozenset
    args: Callable[..., list[ScriptArg]]
    parse: Callable[..., Any]
    plan: Callable[..., list]
    run: Callable[..., ScriptResult]
    description: str = ""
    tags: tuple = field(default_factory=tuple)
    describe_call: Callable[[Any, int], str] | None = None

    @property
    def name(self) -> str:
        """A1111's name in /sdapi/v1/scripts and script-info: the title lower-cased."""
        return self.title.lower()


SCRIPTS: Registry[SelectableScript] = Registry("script")


def register_script(script: SelectableScript) -> SelectableScript:
    SCRIPTS.register(script.name, script)
    return script


def find_script(name: Any, kind: str | None = None) -> SelectableScript:
    """The script titled `name` (any case, surrounding spaces ignored); ValueError listing the valid titles, or
    saying which kinds it runs for."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"script_name must be a script's title, got {name!r}. Valid titles: {titles(kind)}.")
    key = name.strip().lower()
    if key not in SCRIPTS:
        raise ValueError(f"Unknown script_name {name!r}. Valid titles: {titles(kind)}.")
    script = SCRIPTS.get(key)
    if kind is not None and kind not in script.kinds:
        raise ValueError(f"script {script.title!r} runs for {', '.join(sorted(script.kinds))}, not {kind}.")
    return script


def is_registered_script(name: Any) -> bool:
    return isinstance(name, str) and name.strip().lower() in SCRIPTS


def titles(kind: str | None = None) -> str:
    return ", ".join(repr(script.title) for _, script in SCRIPTS.items() if kind is None or kind in script.kinds)


def script_info(**context) -> list[dict]:
    """A1111's ScriptInfo entries of the registered scripts, one per kind (their slots may differ by kind)."""
    return [{"name": script.name, "is_alwayson": False, "is_img2img": kind == "img2img",
             "args": [arg.info() for arg in script.args(kind, **context)]}
            for _, script in SCRIPTS.items() for kind in ("txt2img", "img2img") if kind in script.kinds]
