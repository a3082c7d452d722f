"""The server's upscaler model folders (A1111's models/ESRGAN, models/RealESRGAN, models/SwinIR, models/DAT) and their
A1111 listings."""

from __future__ import annotations

from pathlib import Path

from pipelines.model_upscale import ModelUpscaler, UpscalerScan, register_model_upscalers
from pipelines.upscale import UPSCALERS
from webui.config import ServerConfig, upscaler_folders


def register_server_upscalers(config: ServerConfig, tiling: dict[str, tuple[int, int]], *, compile_swinir: bool = False,
                              previous: UpscalerScan | None = None) -> UpscalerScan:
    """Register the files of the upscaler folders as upscalers, on the server's device, tiled as the options say
    (`ServerOptions.upscaler_tiling`); with `previous`, a refresh of that scan (new files added, removed ones
    dropped)."""
    folders = upscaler_folders(config)
    if not folders:
        return UpscalerScan()
    return register_model_upscalers(folders, device=config.device, tiling=tiling, compile_swinir=compile_swinir,
                                    previous=previous)


def unregister_server_upscalers(scan: UpscalerScan) -> None:
    """Remove the upscalers a server registered (when it closes), and free the loaded network."""
    from pipelines.model_upscale import LOADED

    for name in scan.names:
        if name in UPSCALERS:
            UPSCALERS.unregister(name)
    LOADED.clear()


def realesrgan_models(config: ServerConfig) -> list[dict]:
    """A1111's `/sdapi/v1/realesrgan-models`: name, path and scale of the upscalers from --realesrgan-models-path."""
    if not config.realesrgan_models_path:
        return []
    folder = Path(config.realesrgan_models_path).expanduser().resolve()
    return [{"name": name, "path": str(entry.path), "scale": entry.scale} for name, entry in UPSCALERS.items()
            if isinstance(entry, ModelUpscaler) and entry.path.resolve().is_relative_to(folder)]
