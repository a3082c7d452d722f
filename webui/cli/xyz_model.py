"""The model a CLI X/Y/Z plot runs on, as the plot's axes see it: the VAEs its VAE axis picks from (`--vae-dir`,
swapped on the loaded pipeline as the web UI's Settings swap them, and the loaded VAE put back after the plot), and
what `--int8` / `--backend` fix in the UNet, known before the model loads (axes that change the UNet's layers are
refused then, not after a load and an int8 calibration).

"Automatic" is the VAE the command loaded (the checkpoint's own, or `--vae`'s); "None" the checkpoint's built-in one
(for a single-file checkpoint, read again from its file), as on the server (`webui.model_switch.ModelHolder.set_vae`).
"""

from __future__ import annotations

import argparse
import os
from contextlib import contextmanager
from typing import Any, Iterator

CLI_REDO = "run the command again (it loads the model afresh)."


def fixed_unet_of(args: argparse.Namespace) -> str | None:
    """Why the UNet of this command has a fixed graph (what ToMe and FP8 storage cannot change), or None."""
    if getattr(args, "int8", False):
        return "--int8 compiles the UNet into a fixed int8 graph"
    backend = getattr(args, "backend", "torch")
    if backend != "torch":
        return f"--backend {backend} replaces the UNet with a compiled graph"
    return None


def cli_plot_model(args: argparse.Namespace) -> "CliPlotModel | None":
    """The plot's model context when the flags ask for a plot, else None; `--vae-dir` without a plot is refused (it
    only names the VAE axis's VAEs; `--vae` replaces the model's VAE for a single generation)."""
    from webui.cli.xyz_flags import xyz_requested

    if not xyz_requested(args):
        if getattr(args, "vae_dir", None):
            raise ValueError("--vae-dir lists the VAEs of an X/Y/Z plot's VAE axis (--xyz-x \"VAE:...\"); without a "
                             "plot, use --vae FILE_OR_FOLDER to decode with another VAE.")
        return None
    return CliPlotModel.of(args)


class CliPlotModel:
    """The plot's model-side context for `mixkit generate` / `mixkit img2img`: built from the flags before the load
    (so the plot is checked then), attached to the loaded pipeline before the plot runs."""

    def __init__(self, vae_dir: str | None, model_source: str | None, fixed_unet: str | None = None) -> None:
        from webui.vae_catalog import VaeCatalog

        self.vaes = VaeCatalog(vae_dir)  # a missing folder: ModelNotFoundError naming --vae-dir, before the load
        self.model_source = model_source
        self.fixed_unet = fixed_unet
        self.holder = None
        self._plot_pipe = None

    @classmethod
    def of(cls, args: argparse.Namespace) -> "CliPlotModel":
        return cls(getattr(args, "vae_dir", None), getattr(args, "model", None), fixed_unet_of(args))

    def context(self) -> dict[str, Any]:
        """The plot's context keys (`pipelines.scripts.xyz_axes.PlotContext`)."""
        return {"vae_names": [name for name in self.vaes.names() if name != "Automatic"],
                "switch_vae": self.switch_vae, "fixed_unet": self.fixed_unet}

    def attach(self, pipe) -> None:
        """The pipeline the plot runs (its hires-fix wrapper shares the model), whose model's VAE the axis swaps. A
        batch attaches per input; the holder is made once per loaded model (its VAE as loaded is "Automatic")."""
        if self.holder is None or self.holder.txt2img().model is not pipe.model:
            from webui.checkpoints import CheckpointEntry
            from webui.model_switch import ModelHolder

            source = self.model_source
            name = None if source is None else os.path.basename(os.path.normpath(source))
            entry = None if source is None else CheckpointEntry(name, name, source)
            self.holder = ModelHolder.holding(pipe, entry)
        self._plot_pipe = pipe

    def switch_vae(self, name: str):
        """The plot's pipeline decoding with VAE `name` (the VAE axis's `switch_vae`)."""
        if self.holder is None:
            raise RuntimeError("the VAE axis ran before the model was attached (CliPlotModel.attach).")
        if name != self.holder.vae_name:
            self.holder.set_vae(name, self.vaes.find(name))
        return self._plot_pipe

    @contextmanager
    def vae_kept(self) -> Iterator[None]:
        """The loaded VAE put back after the plot; one that cannot be is an error, as on the server."""
        if self.holder is None:
            yield
            return
        from webui.generation_jobs import vae_kept

        with vae_kept(self, redo=CLI_REDO):
            yield
