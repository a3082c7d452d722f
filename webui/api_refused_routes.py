"""A1111 routes this server has no implementation for: a 501 in A1111's error shape that says what to use instead,
rather than a bare route 404 a client cannot act on."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException

REFUSALS = {
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
