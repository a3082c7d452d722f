"""Binding, auth and the `mixkit webui` flags: localhost by default, --listen only with --auth."""

from __future__ import annotations

import argparse
import base64

import httpx
import pytest

from webui.config import ServerConfig, check_server_config
from webui.http_guards import parse_credentials


def parse(argv: list[str]) -> argparse.Namespace:
    from webui.cli import webui as webui_cli

    parser = argparse.ArgumentParser(prog="mixkit")
    webui_cli.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["webui", *argv])


def test_defaults_bind_localhost_with_a_queue_of_8(tmp_path):
    from webui.cli.webui import config_from_args

    config = config_from_args(parse(["--model", str(tmp_path)]))
    assert config.host == "127.0.0.1" and config.port == 7860 and config.queue_size == 8 and config.auth is None


def test_ui_settings_file_flag(tmp_path):
    from webui.cli.webui import DEFAULT_SETTINGS_FILE, config_from_args

    assert config_from_args(parse(["--model", str(tmp_path)])).settings_file == DEFAULT_SETTINGS_FILE
    chosen = str(tmp_path / "mine.json")
    assert config_from_args(parse(["--model", str(tmp_path), "--ui-settings-file", chosen])).settings_file == chosen
    assert config_from_args(parse(["--model", str(tmp_path), "--ui-settings-file", ""])).settings_file is None


def test_upscaler_folder_flags_reach_the_config(tmp_path):
    from webui.cli.webui import config_from_args

    config = config_from_args(parse(["--model", str(tmp_path), "--esrgan-models-path", str(tmp_path),
                                     "--swinir-models-path", str(tmp_path), "--dat-models-path", str(tmp_path),
                                     "--scunet-models-path", str(tmp_path)]))
    assert (config.esrgan_models_path, config.realesrgan_models_path, config.swinir_models_path,
            config.dat_models_path, config.scunet_models_path) == (str(tmp_path), None, str(tmp_path), str(tmp_path),
                                                                   str(tmp_path))


def test_listen_requires_auth_or_explicit_insecure_flag(tmp_path):
    from webui.cli.webui import config_from_args

    with pytest.raises(ValueError, match="--listen exposes the server.*--auth user:password.*--insecure-no-auth"):
        config_from_args(parse(["--model", str(tmp_path), "--listen"]))
    config = config_from_args(parse(["--model", str(tmp_path), "--listen", "--auth", "me:pw:x"]))
    assert config.host == "0.0.0.0" and config.auth == (("me", "pw:x"),)
    assert config_from_args(parse(["--model", str(tmp_path), "--listen", "--insecure-no-auth"])).auth is None
    with pytest.raises(ValueError, match="contradict"):
        config_from_args(parse(["--model", str(tmp_path), "--auth", "a:b", "--insecure-no-auth"]))


@pytest.mark.parametrize("text", ["nopassword", ":pw", "user:", ""])
def test_bad_credentials_are_refused(text):
    with pytest.raises(ValueError, match="--auth"):
        parse_credentials(text)


@pytest.mark.parametrize("changes, fragment", [
    ({"queue_size": -1}, "queue size"), ({"port": 70000}, "port"), ({"models": []}, "No model to serve"),
])
def test_config_values_are_checked(tmp_path, changes, fragment):
    config = ServerConfig(models=[str(tmp_path)])
    for key, value in changes.items():
        setattr(config, key, value)
    with pytest.raises(ValueError, match=fragment):
        check_server_config(config)


@pytest.fixture(scope="module")
def guarded_server(tiny_sd1_dir, tmp_path_factory, serving):
    """An API server with auth whose model is never loaded: auth is checked before any route."""
    from webui.config import ServerConfig

    config = ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(tmp_path_factory.mktemp("auth")), ui=False,
                          auth=("user", "pass"))
    with serving(config, load_model=False) as running:
        yield running


@pytest.mark.parametrize("headers", [
    {}, {"Authorization": "Basic " + base64.b64encode(b"user:wrong").decode()},
    {"Authorization": "Bearer whatever"}, {"Authorization": "Basic !!!not-base64"},
])
def test_requests_without_valid_credentials_get_401(guarded_server, headers):
    for method, path in (("GET", "/sdapi/v1/options"), ("POST", "/sdapi/v1/txt2img"), ("GET", "/docs"), ("GET", "/")):
        response = httpx.request(method, guarded_server.url + path, headers=headers, json={})
        assert response.status_code == 401, (path, response.status_code)
        assert response.headers["www-authenticate"].startswith("Basic")


def test_valid_credentials_pass_and_no_model_is_a_clear_503(guarded_server):
    auth = ("user", "pass")
    assert httpx.get(guarded_server.url + "/sdapi/v1/options", auth=auth).status_code == 200
    response = httpx.post(guarded_server.url + "/sdapi/v1/txt2img", auth=auth, timeout=60,
                          json={"prompt": "x", "steps": 1, "width": 64, "height": 64})
    assert response.status_code == 503 and "No model is loaded" in response.json()["detail"]


def test_max_image_pixels_flag_sets_the_input_image_cap(tmp_path):
    from pipelines.params import GenerationLimits
    from webui.cli.webui import config_from_args

    default = config_from_args(parse(["--model", str(tmp_path)])).request_limits
    assert default.image_pixel_cap(GenerationLimits()) == 4 * 2048 * 2048  # 4x the generation cap
    raised = config_from_args(parse(["--model", str(tmp_path), "--max-image-pixels", "40000000"])).request_limits
    assert raised.image_pixel_cap(GenerationLimits()) == 40_000_000
    with pytest.raises(ValueError, match="--max-image-pixels must be a whole number of at least 4096"):
        config_from_args(parse(["--model", str(tmp_path), "--max-image-pixels", "10"]))


@pytest.mark.parametrize("user", ["tab\there", "nbsp\u00a0name", "x" * 257])
def test_an_auth_user_name_no_infotext_could_carry_is_refused_at_the_start(tmp_path, user):
    # before: the server started, then refused every txt2img/img2img of that user (422 "user must be 1 to 256
    # printable characters"), even with add_user_name_to_info off
    config = ServerConfig(models=[str(tmp_path)], auth=((user, "pw"), ("ok", "pw")))
    with pytest.raises(ValueError, match=r"--auth user .* cannot be used: user must be 1 to 256 printable characters"):
        check_server_config(config)
    check_server_config(ServerConfig(models=[str(tmp_path)], auth=(("ok", "pw"), ("élan ü", "pw"))))
