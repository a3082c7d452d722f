"""`/sdapi/v1/cmd-flags`: every `mixkit webui` flag has its key (A1111's name where it has one), limits included with
the values in force; `--auth` never appears."""

from __future__ import annotations

import argparse
import json

from webui.api_listings import command_line_flags
from webui.cli.webui import add_parser, config_from_args
from webui.server_state import ServerState

# flag dest -> its key in cmd-flags where the two differ (A1111's names); None: never shown
RENAMED = {"models_dir": "ckpt_dir", "queue": "queue_size", "api_only": "nowebui", "auth": None}


def webui_parser() -> argparse.ArgumentParser:
    """The `mixkit webui` parser, as the CLI builds it."""
    subparsers = argparse.ArgumentParser().add_subparsers()
    add_parser(subparsers)
    return subparsers.choices["webui"]


def flags_for(argv: list[str]) -> dict:
    return command_line_flags(ServerState(config_from_args(webui_parser().parse_args(argv))))


def test_every_webui_flag_has_its_key(tmp_path):
    flags = flags_for(["--model", "unused", "--output-dir", str(tmp_path / "out"), "--ui-settings-file", ""])
    dests = {action.dest for action in webui_parser()._actions if action.dest != "help"}
    missing = {dest for dest in dests if RENAMED.get(dest, dest) is not None and RENAMED.get(dest, dest) not in flags}
    assert missing == set()
    assert "auth" not in flags


def test_limits_are_the_values_in_force(tmp_path):
    from pipelines.params import DEFAULT_MAX_SCRIPT_IMAGES, GenerationLimits

    flags = flags_for(["--model", "unused", "--output-dir", str(tmp_path / "out"), "--ui-settings-file", ""])
    assert flags["max_script_images"] == DEFAULT_MAX_SCRIPT_IMAGES
    assert flags["max_image_pixels"] == GenerationLimits().max_pixels * 4  # the default: 4x the generation cap
    assert flags["queue_size"] == 8
    flags = flags_for(["--model", "unused", "--output-dir", str(tmp_path / "out"), "--ui-settings-file", "",
                       "--max-script-images", "123", "--max-image-pixels", "100000", "--queue", "3",
                       "--allowed-hosts", "a.example, b.example", "--auth", "user:secret-word"])
    assert (flags["max_script_images"], flags["max_image_pixels"], flags["queue_size"]) == (123, 100000, 3)
    assert flags["allowed_hosts"] == "a.example,b.example"
    assert "secret-word" not in json.dumps(flags)


def test_the_route_answers_with_the_limits(client):
    from pipelines.params import DEFAULT_MAX_SCRIPT_IMAGES

    flags = client.get("/sdapi/v1/cmd-flags").json()
    assert flags["max_script_images"] == DEFAULT_MAX_SCRIPT_IMAGES and flags["max_image_pixels"] > 0
