"""Server paths out of error messages sent to HTTP clients: names relative to the configured folders instead.

The loaders' messages name the file they failed on by its absolute path (`'/home/me/models/x.safetensors' is not a
recognised checkpoint`), which is what a CLI or Python user needs, but an HTTP client learns the operator's folder
layout and user name from it. Every error body the API sends goes through `PathRedactor`, so one place covers the
messages of today and of code written later: a path inside a configured folder becomes its path relative to that
folder (the name a client uses in a request, `x.safetensors`), the folder itself its option name (`<models_dir>`),
and what remains under the server user's home directory `~/...`. A1111's listings that report paths by design
(`/sdapi/v1/sd-models` `filename`, `/sdapi/v1/cmd-flags`) are answers, not errors, and are left as A1111 has them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Callable


# what may follow a path's last character in a message (after any trailing slash): its end, a blank, a quote,
# punctuation, a sentence's full stop
_PATH_END = r"(?=[/\\]*(?:$|[\s'\",;:)\]]|\.(?:$|\s)))"


class PathRedactor:
    """`redactor(text)`: `text` with the server's folders and files replaced (see the module docstring)."""

    def __init__(self, replacements: dict[str | os.PathLike, str], home: str | os.PathLike | None = None) -> None:
        """`replacements`: a configured folder or file -> what it becomes alone (`<models_dir>`, `styles.csv`); paths
        inside a folder become relative to it. `home`: the server user's home directory (default: this process's)."""
        spellings: dict[str, str] = {}
        for path, replacement in replacements.items():
            for spelling in _spellings(path):
                spellings.setdefault(spelling, replacement)
        # longest first: a folder inside another (a model folder inside models_dir) is named by the inner one
        self._paths = sorted(spellings.items(), key=lambda item: -len(item[0]))
        home = os.fspath(home) if home is not None else os.path.expanduser("~")
        self._homes = sorted(_spellings(home), key=len, reverse=True) if home not in ("", "/", "~") else []

    def __call__(self, text):
        if not isinstance(text, str):
            return text
        for path, replacement in self._paths:
            inside = re.escape(path) + r"[/\\]+(?=[^\s/\\'\"])"  # "<path>/rest" -> "rest"
            text = re.sub(inside, "", text)
            text = re.sub(re.escape(path) + _PATH_END, lambda _, replacement=replacement: replacement, text)
        for home in self._homes:
            text = re.sub(re.escape(home) + r"(?=[/\\])", "~", text)
            text = re.sub(re.escape(home) + _PATH_END, "~", text)
        return text


def _spellings(path: str | os.PathLike) -> set[str]:
    """The ways a message may spell `path`: as configured, absolute, and with symlinks resolved; no trailing slash."""
    raw = os.path.expanduser(os.fspath(path))
    spellings = {raw, os.path.abspath(raw)}
    try:
        spellings.add(str(Path(raw).resolve()))
    except OSError:
        pass
    # only absolute spellings: a relative one ("outputs") would rewrite ordinary words of a message
    return {spelling.rstrip("/\\") for spelling in spellings if os.path.isabs(spelling) and len(spelling) > 1}


def server_path_redactor(state) -> PathRedactor:
    """The redactor for a `ServerState`: its configured folders and files, its model sources and AppFlow models."""
    config = state.config
    folders = {"models_dir": config.models_dir, "lora_dir": config.lora_dir, "embeddings_dir": config.embeddings_dir,
               "hypernetwork_dir": config.hypernetwork_dir,
               "vae_dir": config.vae_dir, "controlnet_dir": config.controlnet_dir,
               "esrgan_models_path": config.esrgan_models_path, "realesrgan_models_path": config.realesrgan_models_path,
               "swinir_models_path": config.swinir_models_path, "dat_models_path": config.dat_models_path,
               "scunet_models_path": config.scunet_models_path,
               "gfpgan_models_path": config.gfpgan_models_path, "codeformer_models_path": config.codeformer_models_path,
               "training_data_dir": config.training_data_dir,
               "interrogate_categories_dir": config.interrogate_categories_dir,
               "deepdanbooru_models_path": config.deepdanbooru_models_path, "output_dir": state.output_dir}
    replacements: dict[str | os.PathLike, str] = {path: f"<{label}>" for label, path in folders.items() if path}
    files = [config.styles_file, config.settings_file, *config.models, config.interrogate_clip_model,
             *(source for roles in config.appflow_models.values() for source in roles.values())]
    for path in files:  # a file, or a model folder the operator named: a client knows it by its name
        if path and isinstance(path, (str, os.PathLike)):
            replacements.setdefault(path, Path(os.fspath(path)).name)
    return PathRedactor(replacements)


def server_error_response(error: Exception, what: str, redact: Callable[[Any], Any]):
    """A 500 in A1111's shape for a failure the server did not expect (`what` failed), its message redacted."""
    from fastapi.responses import JSONResponse

    # a lone surrogate (from a JSON "\\ud800" escape) in the message would make the 500's own encoding fail
    message = redact(str(error)).encode("utf-8", "backslashreplace").decode("utf-8")
    return JSONResponse(status_code=500, content={"error": type(error).__name__, "detail": message, "body": "",
                                                  "errors": f"{what} failed: {message}"})
