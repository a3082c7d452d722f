"""The server's face restorers: A1111's models/GFPGAN and models/Codeformer folders registered by name, and the
`/sdapi/v1/face-restorers` listing."""

from __future__ import annotations

from pipelines.face_restoration import FACE_RESTORERS, register_face_restorers
from webui.config import ServerConfig


def register_server_face_restorers(config: ServerConfig) -> list[str]:
    """Register "CodeFormer" / "GFPGAN" for the folders the server was started with, on its device; the names."""
    if not (config.gfpgan_models_path or config.codeformer_models_path):
        return []
    return register_face_restorers(gfpgan_folder=config.gfpgan_models_path,
                                   codeformer_folder=config.codeformer_models_path, device=config.device)


def unregister_server_face_restorers(names: list[str]) -> None:
    """Remove (and free) the restorers a server registered, when it closes: the registry is the process's."""
    for name in names:
        if name in FACE_RESTORERS:
            FACE_RESTORERS.unregister(name).unload()
