"""HTTP API hardening: CSRF-proof options, A1111's error shape, non-finite JSON, multi-user --auth, base64 and png-info.

References (A1111 modules/api/api.py):
- `set_config(self, req: dict[str, Any])` is a typed FastAPI body, so a `text/plain` POST is a 422 there.
- `api_middleware.handle_exception` answers every error with `{"error": type(e).__name__, "detail": ..., "body": ...,
  "errors": str(e)}` and the exception's status code; `str(HTTPException)` is "<status>: <detail>".
- `Api.__init__` reads `--api-auth` as `for auth in api_auth.split(","): user, password = auth.split(":")`.
- `decode_base64_to_image` calls `base64.b64decode(encoding)` without validate=True, so line breaks are dropped.
"""

from __future__ import annotations

import base64
import io
import json
import socket
import struct
import zlib

import httpx
import pytest
from PIL import Image, PngImagePlugin

from webui.http_guards import BasicAuthMiddleware, parse_credentials

USERS = (("alice", "pw1"), ("bob", "pw:2"))
A1111_ERROR_KEYS = {"error", "detail", "body", "errors"}


@pytest.fixture(scope="module")
def server(tiny_sd1_dir, tmp_path_factory, serving):
    """An API server whose model is never loaded: everything here is refused or answered before a model is needed."""
    from webui.config import ServerConfig

    config = ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(tmp_path_factory.mktemp("security")), ui=False)
    with serving(config, load_model=False) as running:
        yield running


@pytest.fixture(scope="module")
def auth_server(tiny_sd1_dir, tmp_path_factory, serving):
    """The same, started as `--auth alice:pw1,bob:pw:2`."""
    from webui.config import ServerConfig

    config = ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(tmp_path_factory.mktemp("security-auth")),
                          ui=False, auth=parse_credentials("alice:pw1,bob:pw:2"))
    with serving(config, load_model=False) as running:
        yield running


@pytest.fixture()
def client(server):
    with httpx.Client(base_url=server.url, timeout=60) as http:
        yield http


def png_bytes(size=(8, 8), text: dict[str, str] | None = None) -> bytes:
    info = PngImagePlugin.PngInfo()
    for key, value in (text or {}).items():
        info.add_text(key, value)
    buffer = io.BytesIO()
    Image.new("RGB", size, (10, 20, 30)).save(buffer, format="PNG", pnginfo=info)
    return buffer.getvalue()


def chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def insert_chunk(png: bytes, new_chunk: bytes, *, before: bytes) -> bytes:
    """`png` with `new_chunk` placed right before its first chunk of type `before` (b"IDAT" or b"IEND")."""
    at = png.index(before) - 4
    return png[:at] + new_chunk + png[at:]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# 2. options: only a JSON content type is read (no cross-site text/plain "simple request")

@pytest.mark.parametrize("content_type", ["text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
                                          None])
def test_options_post_without_json_content_type_is_refused_and_changes_nothing(client, content_type):
    """Also from a client that sends no Origin (a browser's cross-site one is refused before: test_origin_guard)."""
    before = client.get("/sdapi/v1/options").json()["CLIP_stop_at_last_layers"]
    headers = {"content-type": content_type} if content_type else {}
    response = client.post("/sdapi/v1/options", content=json.dumps({"CLIP_stop_at_last_layers": before + 1}),
                           headers=headers)
    assert response.status_code == 422
    assert "Content-Type: application/json" in response.json()["detail"]
    assert client.get("/sdapi/v1/options").json()["CLIP_stop_at_last_layers"] == before


@pytest.mark.parametrize("content_type", ["application/json", "application/json; charset=utf-8", "application/vnd.x+json"])
def test_options_post_with_json_content_type_applies(client, content_type):
    before = client.get("/sdapi/v1/options").json()["CLIP_stop_at_last_layers"]
    wanted = 2 if before != 2 else 1
    response = client.post("/sdapi/v1/options", content=json.dumps({"CLIP_stop_at_last_layers": wanted}),
                           headers={"content-type": content_type})
    assert response.status_code == 200, response.text
    assert client.get("/sdapi/v1/options").json()["CLIP_stop_at_last_layers"] == wanted


# 3./4. A1111's error shape, and non-finite JSON numbers are a 422

@pytest.mark.parametrize("raw_value", ["NaN", "Infinity", "-Infinity", "1e999"])
@pytest.mark.parametrize("field", ["steps", "width", "seed"])
def test_non_finite_numbers_are_a_422_naming_the_field_and_the_connection_survives(client, field, raw_value):
    response = client.post("/sdapi/v1/txt2img", content=f'{{"prompt": "a", "{field}": {raw_value}}}',
                           headers={"content-type": "application/json"})
    assert response.status_code == 422, response.text
    body = response.json()
    assert set(body) == A1111_ERROR_KEYS and body["error"] == "RequestValidationError" and body["body"] == ""
    assert body["detail"][0]["loc"] == ["body", field] and body["detail"][0]["input"] in ("NaN", "Infinity", "-Infinity")
    assert body["errors"].startswith(f"422: {field}: ")
    assert client.get("/sdapi/v1/options").status_code == 200  # same keep-alive connection still answers


@pytest.mark.parametrize("field", ["denoising_strength", "hr_scale", "refiner_switch_at", "s_noise"])
def test_non_finite_numbers_in_fields_txt2img_does_not_use_are_a_422(client, field):
    """These fields are unused by a plain txt2img; their NaN reached the answer's `parameters` echo, a 500 after the
    image was made (JSON cannot encode NaN)."""
    response = client.post("/sdapi/v1/txt2img", content=f'{{"prompt": "a", "steps": 1, "{field}": NaN}}',
                           headers={"content-type": "application/json"})
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == ["body", field]


@pytest.mark.parametrize("field, value, named", [
    ("script_args", "[16, NaN]", "script_args[1] is nan"),
    ("override_settings", '{"eta_noise_seed_delta": Infinity}', "override_settings.eta_noise_seed_delta is inf"),
    ("override_settings", '{"not_an_option": NaN}', "override_settings.not_an_option is nan"),
    ("alwayson_scripts", '{"controlnet": {"args": [{"weight": -Infinity}]}}',
     "alwayson_scripts.controlnet.args[0].weight is -inf"),
    ("comments", '{"note": [1, NaN]}', "comments.note[1] is nan"),
])
@pytest.mark.parametrize("route", ["txt2img", "img2img"])
def test_non_finite_numbers_inside_free_form_fields_are_a_422_naming_where(client, route, field, value, named):
    """script_args [inf] was an OverflowError (500) in the outpainting script, override_settings' ENSD Infinity one in
    int(), and a NaN in any of them that the job ignores came back in the `parameters` echo (500)."""
    response = client.post(f"/sdapi/v1/{route}", content=f'{{"prompt": "a", "steps": 1, "{field}": {value}}}',
                           headers={"content-type": "application/json"})
    assert response.status_code == 422, response.text
    detail = response.json()["detail"][0]
    assert detail["loc"] == ["body", field]
    assert f"{named}, which is not a JSON number" in detail["msg"]


@pytest.mark.parametrize("content", ['"\\ud800"', '{"prompt": "a", "styles": "\\udfff"}',
                                     '{"prompt": "a", "steps": "x\\ud800"}'])
def test_a_lone_surrogate_in_a_refused_value_is_a_422_echoing_it_escaped(client, content):
    """`"\\ud800"` is valid JSON that json.loads turns into a string UTF-8 cannot encode; echoed as it was, the 422
    itself failed to encode and the client got a 500."""
    response = client.post("/sdapi/v1/txt2img", content=content, headers={"content-type": "application/json"})
    assert response.status_code == 422, response.text
    assert "\\ud" in response.json()["detail"][0]["input"]
    assert client.get("/sdapi/v1/options").status_code == 200


@pytest.mark.parametrize("line, key, field", [("CFG scale: 1e400", "CFG scale", "cfg_scale"),
                                              ("Eta: nan", "Eta", "eta"),
                                              ("Refiner switch at: inf", "Refiner switch at", "refiner_switch_at")])
def test_a_non_finite_number_in_a_pasted_infotext_is_a_422_naming_its_key(client, line, key, field):
    response = client.post("/sdapi/v1/txt2img", json={"steps": 1, "infotext": f"a cat\nSteps: 1, Size: 64x64, {line}"})
    assert response.status_code == 422, response.text
    assert response.json()["detail"].startswith(f"infotext: {key}: ")
    assert f"is not a valid {field}" in response.json()["detail"]


@pytest.mark.parametrize("value", [-1, 1.5, "31337"])
def test_override_settings_ensd_is_checked_as_the_options_route_checks_it(client, value):
    """It was int()-ed unchecked: "31337" and 1.5 were taken (as 31337 and 1), -1 made a negative seed offset."""
    response = client.post("/sdapi/v1/txt2img", json={"prompt": "a", "steps": 1,
                                                      "override_settings": {"eta_noise_seed_delta": value}})
    assert response.status_code == 422, response.text
    assert f"eta_noise_seed_delta must be an integer >= 0, got {value!r}" in response.json()["detail"]


def nested_list(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("field", ["steps", "cfg_scale", "prompt"])
def test_a_deeply_nested_value_is_a_422_with_its_echo_cut(client, field):
    """json.loads takes ~990 nested lists; the validation error used to echo all of them and fail with a 500."""
    response = client.post("/sdapi/v1/txt2img", content=f'{{"{field}": {nested_list(900)}}}',
                           headers={"content-type": "application/json"})
    assert response.status_code == 422, response.text
    body = response.json()
    assert set(body) == A1111_ERROR_KEYS and body["detail"][0]["loc"] == ["body", field]
    echoed, levels = body["detail"][0]["input"], 0
    while isinstance(echoed, list):
        echoed, levels = echoed[0], levels + 1
    assert (levels, echoed) == (8, "...")
    assert client.get("/sdapi/v1/options").status_code == 200


@pytest.mark.parametrize("depth", [900, 100_000])
def test_options_body_nested_beyond_the_parser_is_a_422_and_changes_nothing(client, depth):
    before = client.get("/sdapi/v1/options").json()
    response = client.post("/sdapi/v1/options", content=nested_list(depth), headers={"content-type": "application/json"})
    assert response.status_code == 422, response.text
    assert set(response.json()) == A1111_ERROR_KEYS
    assert client.get("/sdapi/v1/options").json() == before


def test_http_errors_have_a1111_shape(client):
    response = client.post("/sdapi/v1/png-info", json={"image": "!!!"})
    assert response.status_code == 422
    body = response.json()
    assert body == {"error": "HTTPException", "detail": body["detail"], "body": "", "errors": f"422: {body['detail']}"}
    assert body["detail"].startswith("image is not valid base64")
    missing = client.get("/sdapi/v1/no-such-route").json()
    assert missing == {"error": "HTTPException", "detail": "Not Found", "body": "", "errors": "404: Not Found"}


def test_typed_body_errors_keep_fastapi_detail_list(client):
    response = client.post("/sdapi/v1/txt2img", json={"prompt": "a", "steps": "many"})
    body = response.json()
    assert response.status_code == 422 and body["error"] == "RequestValidationError"
    assert body["detail"][0]["loc"] == ["body", "steps"] and body["errors"].startswith("422: steps: ")


def test_401_and_413_have_a1111_shape(auth_server):
    response = httpx.get(auth_server.url + "/sdapi/v1/options")
    assert response.status_code == 401 and set(response.json()) == A1111_ERROR_KEYS
    assert response.json()["errors"].startswith("401: Not authenticated")
    with socket.create_connection(("127.0.0.1", auth_server.port), timeout=30) as raw:  # a declared size, no body sent
        raw.sendall(b"POST /sdapi/v1/png-info HTTP/1.1\r\nHost: localhost\r\nAuthorization: Basic " + b64(b"alice:pw1").encode()
                    + b"\r\nContent-Type: application/json\r\nContent-Length: 10000000000\r\n\r\n")
        head, _, body = raw.makefile("rb").read().partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413") and json.loads(body)["errors"].startswith("413: Request body too large")


# 5. line-wrapped (MIME) base64 is accepted; other characters are not

def test_line_wrapped_base64_is_read_like_a1111(client):
    data = png_bytes(text={"parameters": "a cat\nSteps: 20"})
    for wrapped in (base64.encodebytes(data).decode(), base64.encodebytes(data).decode().replace("\n", "\r\n"),
                    "data:image/png;base64," + base64.encodebytes(data).decode()):
        response = client.post("/sdapi/v1/png-info", json={"image": wrapped})
        assert response.status_code == 200, response.text
        assert response.json()["info"] == "a cat\nSteps: 20"


@pytest.mark.parametrize("junk", ["*", "é", "-"])
def test_base64_with_non_alphabet_characters_is_still_refused(client, junk):
    text = b64(png_bytes())
    response = client.post("/sdapi/v1/png-info", json={"image": text[:20] + junk + text[20:]})
    assert response.status_code == 422 and "not valid base64" in response.json()["detail"]


# 6. --auth with A1111's comma-separated users; Basic scheme case-insensitive, any number of blanks

def test_auth_parses_a1111_user_list():
    assert parse_credentials("alice:pw1,bob:pw2") == (("alice", "pw1"), ("bob", "pw2"))
    assert parse_credentials("me:pw:x") == (("me", "pw:x"),)
    assert parse_credentials(" alice:pw1 , bob:pw2 ") == (("alice", "pw1"), ("bob", "pw2"))


@pytest.mark.parametrize("text, fragment", [
    ("alice:pw1,", "entry '' is not user:password"), ("alice:pw1,bob", "entry 'bob'"),
    ("alice:pw1,alice:pw2", "user 'alice' twice"), ("", "--auth must be"),
])
def test_bad_auth_lists_are_refused(text, fragment):
    with pytest.raises(ValueError, match=fragment):
        parse_credentials(text)


def test_each_listed_user_logs_in_and_no_one_else(auth_server):
    for user in USERS:
        assert httpx.get(auth_server.url + "/sdapi/v1/options", auth=user).status_code == 200, user
    for wrong in (("alice", "pw1,bob:pw:2"), ("bob", "pw1"), ("carol", "pw1")):
        assert httpx.get(auth_server.url + "/sdapi/v1/options", auth=wrong).status_code == 401, wrong


@pytest.mark.parametrize("header, token", [
    ("Basic abc=", "abc="), ("basic  abc=", "abc="), ("BASIC\tabc=".replace("\t", " \t"), "abc="), ("Bearer abc", None),
])
def test_basic_scheme_is_case_insensitive_with_any_blanks(header, token):
    from webui.http_guards import basic_auth_token

    assert basic_auth_token(header) == token


def test_two_spaces_after_basic_authorize():
    middleware = BasicAuthMiddleware(None, USERS)
    token = b64(b"bob:pw:2")
    for header in (f"Basic {token}", f"basic  {token}", f"BASIC \t{token}"):
        assert middleware._user({"headers": [(b"authorization", header.encode())]}) == "bob", header
    assert middleware._user({"headers": [(b"authorization", f"Basic {b64(b'bob:pw')}".encode())]}) is None
    assert BasicAuthMiddleware(None, ("alice", "pw1"))._user(
        {"headers": [(b"authorization", f"Basic {b64(b'alice:pw1')}".encode())]}) == "alice"  # one pair, as before


# 7. png-info reads text without decoding pixels or applying the generation pixel cap

def test_png_info_reads_a_25_megapixel_png(client):
    buffer = io.BytesIO()
    info = PngImagePlugin.PngInfo()
    info.add_text("parameters", "big\nSteps: 5")
    Image.new("1", (5000, 5000)).save(buffer, format="PNG", pnginfo=info)
    response = client.post("/sdapi/v1/png-info", json={"image": b64(buffer.getvalue())})
    assert response.status_code == 200, response.text
    assert response.json()["info"] == "big\nSteps: 5"


def test_png_info_reads_text_after_corrupt_pixels():
    """A PNG whose image data cannot be decoded: its text (before and after IDAT) is read all the same."""
    from webui.base64_images import decode_base64_png_info

    data = png_bytes()
    idat = data.index(b"IDAT")
    length = struct.unpack(">I", data[idat - 4:idat])[0]
    broken = data[:idat + 4] + b"\x00" * length + data[idat + 4 + length:]  # garbage zlib stream, CRC left wrong
    broken = insert_chunk(broken, chunk(b"tEXt", b"parameters\x00late text"), before=b"IEND")
    broken = insert_chunk(broken, chunk(b"iTXt", b"Comment\x00\x00\x00\x00\x00caf\xc3\xa9"), before=b"IEND")
    broken = insert_chunk(broken, chunk(b"zTXt", b"early\x00\x00" + zlib.compress(b"zipped")), before=b"IDAT")
    with pytest.raises(OSError):  # PIL must decode the pixels to reach the late chunks, and cannot
        Image.open(io.BytesIO(broken)).load()
    read = decode_base64_png_info("image", b64(broken), max_bytes=10**6)
    assert read["infotext"] == "late text"
    assert read["items"] == {"parameters": "late text", "Comment": "café", "early": "zipped"}


def test_png_info_matches_pil_on_a_complete_png():
    from webui.base64_images import decode_base64_png_info

    data = png_bytes(text={"parameters": "p", "Software": "x"})
    data = insert_chunk(data, chunk(b"tEXt", b"after\x00\xe9t\xe9"), before=b"IEND")
    with Image.open(io.BytesIO(data)) as image:
        image.load()
        expected = {k: v for k, v in image.info.items() if isinstance(v, str)}
    assert decode_base64_png_info("image", b64(data), max_bytes=10**6)["items"] == expected


def test_pixel_cap_message_names_a_possible_remedy():
    from webui.base64_images import decode_base64_image

    with pytest.raises(ValueError) as caught:
        decode_base64_image("init_images[0]", b64(png_bytes((40, 30))), max_pixels=1000, max_bytes=10**6)
    message = str(caught.value)
    assert message == ("init_images[0]: the image is 40x30 = 1,200 pixels, above this server's 1,000-pixel cap for "
                       "input images; downscale it before sending it (the server's operator sets the cap with "
                       "`mixkit webui --max-image-pixels`).")


# 8. an oversized compressed text chunk before the pixels gets a labelled error

def bomb_text_png() -> bytes:
    return insert_chunk(png_bytes(), chunk(b"zTXt", b"parameters\x00\x00" + zlib.compress(b"a" * 5_000_000)),
                        before=b"IDAT")


def test_oversized_text_chunk_before_idat_names_the_field():
    from webui.base64_images import decode_base64_image, decode_base64_png_info

    with pytest.raises(ValueError, match=r"^init_images\[0\]: .*could not be read \(.*MAX_TEXT_CHUNK.*\); it (is|may be) "
                                         r"corrupt or crafted"):
        decode_base64_image("init_images[0]", b64(bomb_text_png()), max_pixels=10**6, max_bytes=10**7)
    with pytest.raises(ValueError, match=r"^image: the image could not be read \(.*MAX_TEXT_CHUNK"):
        decode_base64_png_info("image", b64(bomb_text_png()), max_bytes=10**7)


def test_oversized_text_chunk_after_idat_names_the_field():
    from webui.base64_images import decode_base64_png_info

    data = insert_chunk(png_bytes(), chunk(b"zTXt", b"parameters\x00\x00" + zlib.compress(b"a" * 5_000_000)),
                        before=b"IEND")
    with pytest.raises(ValueError, match=r"^image: the image could not be read \(its compressed text chunk "
                                         r"b'parameters' decompresses to more than 1,048,576 bytes"):
        decode_base64_png_info("image", b64(data), max_bytes=10**7)


def test_png_info_route_labels_the_text_chunk_error(client):
    response = client.post("/sdapi/v1/png-info", json={"image": b64(bomb_text_png())})
    assert response.status_code == 422 and response.json()["detail"].startswith("image: the image could not be read")


def test_header_beyond_pils_guard_is_refused_as_a_decompression_bomb():
    from webui.base64_images import decode_base64_image

    data = png_bytes()
    bomb = data[:16] + struct.pack(">II", 60000, 60000) + data[24:29]  # IHDR size patched, CRC no longer checked here
    bomb = bomb + struct.pack(">I", zlib.crc32(bomb[12:29])) + data[33:]
    with pytest.raises(ValueError, match=r"^image: .*decompression bomb and is refused \(this server's cap for input "
                                         r"images is 1,000 pixels\)"):
        decode_base64_image("image", b64(bomb), max_pixels=1000, max_bytes=10**6)


def test_the_operators_image_cap_reaches_img2img():
    # `mixkit webui --max-image-pixels N` -> RequestLimits.max_image_pixels, the cap every input image is decoded with
    from pipelines.params import GenerationLimits
    from webui.api_convert import RequestLimits, to_img2img_params
    from webui.api_requests import Img2ImgRequest

    request = Img2ImgRequest(prompt="x", init_images=[b64(png_bytes((40, 30)))], steps=1, width=64, height=64)
    with pytest.raises(ValueError, match="1,200 pixels, above this server's 1,000-pixel cap"):
        to_img2img_params(request, limits=GenerationLimits(), request_limits=RequestLimits(max_image_pixels=1000),
                          lora_names=None)
    params = to_img2img_params(request, limits=GenerationLimits(), request_limits=RequestLimits(), lora_names=None)
    assert params.init_images[0].size == (40, 30)
