"""A1111 routes this server has no implementation for: a 501 in A1111's error shape that says what to use instead,
rather than a bare route 404 a client cannot act on."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException

REFUSALS = {
    # A1111's memory routes (`unload_model_weights` moves the model to the CPU, `send_model_to_device` back); this
    # server keeps its one model on its device.
    "unload-checkpoint": "This server keeps its checkpoint loaded and cannot unload or reload it (POST "
                         "/sdapi/v1/unload-checkpoint); to use less memory, switch to a smaller checkpoint or "
                         "performance preset with POST /sdapi/v1/options, or stop the server.",
    "reload-checkpoint": "This server keeps its checkpoint loaded and cannot unload or reload it (POST "
                         "/sdapi/v1/reload-checkpoint); to load another one, set sd_model_checkpoint with POST "
                         "/sdapi/v1/options.",
    # A1111's CLIP interrogator (BLIP caption + CLIP-ranked artists/flavours) and DeepDanbooru tagger are not here;
    # mixkit's captioner is the image2text_generation app (BLIP-2 by default), which answers in its own shape.
    "interrogate": "A1111's interrogators ('clip', 'deepdanbooru') are not available on this server (POST "
                   "/sdapi/v1/interrogate); caption an image with POST /appflow/image2text_generation and "
                   "{\"inputs\": {\"image\": \"<base64 image>\"}} (the caption is its outputs.text).",
}


def add_refused_routes(router: APIRouter) -> None:
    def refuse_with(detail: str):
        def refuse():
            raise HTTPException(status_code=501, detail=detail)
        return refuse

    for route, detail in REFUSALS.items():
        router.add_api_route(f"/sdapi/v1/{route}", refuse_with(detail), methods=["POST"], name=route.replace("-", "_"))
