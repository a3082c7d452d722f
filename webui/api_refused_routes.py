"""A1111 routes this server has no implementation for: a 501 in A1111's error shape that says what to use instead,
rather than a bare route 404 a client cannot act on."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException

REFUSALS: dict[str, str] = {
    # route -> what to use instead. (`interrogate` was one; it now captions: `webui.api_interrogate`.)
}


def add_refused_routes(router: APIRouter) -> None:
    def refuse_with(detail: str):
        def refuse():
            raise HTTPException(status_code=501, detail=detail)
        return refuse

    for route, detail in REFUSALS.items():
        router.add_api_route(f"/sdapi/v1/{route}", refuse_with(detail), methods=["POST"], name=route.replace("-", "_"))
