"""A1111's switches for what an infotext tells about the models, the program and the user.

Settings > Infotext (`modules/shared_options.py`) has "Add model name / model hash / VAE name / VAE hash to
infotext", "Add user name to infotext when authenticated" and "Add program version to infotext"; its built-in
Lora extension adds "Add Lora hashes to infotext" and "Add Lora name as TI hashes for bundled Textual Inversion",
and Settings > Textual Inversion "Add Textual Inversion hashes to infotext". The names and defaults here are
A1111's, so an `/sdapi/v1/options` body or an `override_settings` written for A1111 means the same here.

Someone sharing images may not want to publish which checkpoint, VAE, LoRA files or program made them; these
switches leave those keys out of every infotext a pipeline writes (PNG text chunk, API `info`, CLI files). The
image itself does not change, and a paste of such an infotext simply lacks the keys (no model switch, no relink).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

# The keys each switch governs, in A1111's create_infotext / extension terms.
MODEL_KEYS = {"add_model_name_to_info": "Model", "add_model_hash_to_info": "Model hash",
              "add_vae_name_to_info": "VAE", "add_vae_hash_to_info": "VAE hash"}
MAX_USER_CHARS = 256  # a login name; longer is no name a server's --auth would hold


@dataclass(frozen=True)
class InfotextOptions:
    """Which optional keys a pipeline writes to each image's infotext (A1111's option names and defaults)."""

    add_model_name_to_info: bool = True
    add_model_hash_to_info: bool = True
    add_vae_name_to_info: bool = True
    add_vae_hash_to_info: bool = True
    # "User": the name the request was authenticated as (`Txt2ImgParams.user`); off by default, as in A1111
    add_user_name_to_info: bool = False
    add_version_to_infotext: bool = True
    lora_add_hashes_to_infotext: bool = True
    textual_inversion_add_hashes_to_infotext: bool = True
    # A trigger word whose vectors come bundled in a LoRA file is listed in `TI hashes` as "word: <LoRA name>". Off,
    # the word is left out of `TI hashes`. (A1111's `BundledTIHash` prints as "" when off, so it writes "word: " with
    # no hash; leaving the entry out says the same without an entry no reader can use.) It needs
    # `textual_inversion_add_hashes_to_infotext`, as in A1111.
    lora_bundled_ti_to_infotext: bool = True

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if not isinstance(value, bool):
                raise TypeError(f"InfotextOptions.{item.name} must be True or False, got {value!r}.")

    def model_values(self, values: dict[str, Any]) -> dict[str, Any]:
        """`values` ("Model", "Model hash", "VAE", "VAE hash" ...) with the keys a switch turns off set to None."""
        return {**values, **{key: None for name, key in MODEL_KEYS.items() if not getattr(self, name)}}


INFOTEXT_OPTION_DEFAULTS = asdict(InfotextOptions())


def infotext_options_from(values: dict[str, Any]) -> InfotextOptions:
    """The `InfotextOptions` of option values (Settings, then override_settings): A1111's keys, others ignored,
    checked (a TypeError names the key) since an override has not been through `/sdapi/v1/options`."""
    return InfotextOptions(**{key: values[key] for key in INFOTEXT_OPTION_DEFAULTS if key in values})


def check_user(user: Any) -> None:
    """`Txt2ImgParams.user`: None, or the name a request was authenticated as, one printable line."""
    if user is None:
        return
    if not isinstance(user, str):
        raise TypeError(f"user must be a string (the authenticated user name) or None, got {type(user).__name__}.")
    if not user or len(user) > MAX_USER_CHARS or not user.isprintable():
        raise ValueError(f"user must be 1 to {MAX_USER_CHARS} printable characters (the authenticated user name), "
                         f"got {user[:40]!r}.")
