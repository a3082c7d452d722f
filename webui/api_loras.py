"""LoRA routes: A1111's `/sdapi/v1/loras` list and refresh, plus each card's preview image.

The preview route takes a LoRA *name* and serves only the image `webui.lora_previews` finds
next to that library entry inside the LoRA folder; a request never supplies a path.
"""

from __future__ import annotations

from fastapi import APIRouter, HTTPException
from fastapi.concurrency import run_in_threadpool

from webui.lora_previews import PREVIEW_ROUTE
from webui.server_state import ServerState


def build_lora_router(state: ServerState) -> APIRouter:
    router = APIRouter()

    @router.get("/sdapi/v1/loras")
    async def loras():
        from webui.lora_cards import lora_cards

        if state.lora_library is None:
            return []
        return await run_in_threadpool(lambda: [card.as_a1111() for card in lora_cards(state.lora_library)])

    @router.get(PREVIEW_ROUTE)
    async def lora_preview(name: str = ""):
        from fastapi.responses import FileResponse

        from webui.lora_previews import PREVIEW_MEDIA_TYPES, preview_for_name

        path = await run_in_threadpool(preview_for_name, state.lora_library, name) if state.lora_library else None
        if path is None:
            raise HTTPException(status_code=404, detail=f"No preview image for LoRA {name!r}.")
        return FileResponse(path, media_type=PREVIEW_MEDIA_TYPES[path.suffix.lower()], headers={"Cache-Control": "no-cache"})

    @router.post("/sdapi/v1/refresh-loras")
    async def refresh_loras():
        if state.lora_library is not None:
            state.lora_library.refresh()
        return {}

    return router
