"""A1111's `/sdapi/v1/create/hypernetwork` and `/sdapi/v1/train/hypernetwork` (see `webui.hypernetwork_jobs`); the
files land in `--hypernetwork-dir`, which `/sdapi/v1/hypernetworks` lists."""

from __future__ import annotations

from fastapi import APIRouter, Body, Request
from pydantic import BaseModel, ConfigDict, StrictInt, StrictStr

from webui.api_training_requests import run_create_request, run_training_request
from webui.server_state import ServerState


class CreateHypernetworkRequest(BaseModel):
    """A1111's create_hypernetwork arguments (None: A1111's default). Unlike the generation requests, an unknown key
    is refused (422 naming it): a misspelt `overwrite_old` must not silently keep or replace a file. The values are
    checked by `HypernetworkCreateConfig`, which names the field, not here."""

    model_config = ConfigDict(extra="forbid")

    name: str
    # strict: a `true` among the widths is refused, not read as width 1
    enable_sizes: list[StrictInt] | list[StrictStr] | StrictStr | StrictInt
    overwrite_old: bool = False
    layer_structure: list[float] | str | None = None
    activation_func: str | None = None
    weight_init: str | None = None
    add_layer_norm: bool = False
    use_dropout: bool = False
    dropout_structure: list[float] | str | None = None


def build_hypernetwork_training_router(state: ServerState) -> APIRouter:
    from webui.hypernetwork_jobs import create_hypernetwork, submit_hypernetwork_training

    router = APIRouter()

    @router.post("/sdapi/v1/create/hypernetwork")
    async def create(body: CreateHypernetworkRequest):
        arguments = body.model_dump()
        return await run_create_request(create_hypernetwork, "hypernetwork", state, arguments.pop("name"),
                                        **arguments)

    @router.post("/sdapi/v1/train/hypernetwork")
    async def train(request: Request, body: dict = Body(...)):
        return await run_training_request(state, request, submit_hypernetwork_training, body, "train hypernetwork")

    return router
