"""IP-Adapter reference pictures encoded once and reused by many generations: an img2img batch over a folder, the
cells of an X/Y/Z plot.

A1111's batch and X/Y/Z run one generation per input or cell, and sd-webui-controlnet encodes a unit's reference
picture again for each (it encodes when the unit is hooked, once per generation). The picture is the same, so its
embeddings are too: `ReferenceEmbeddings.params_with_embeds` swaps each adapter's pictures for
`ip_adapter_image_embeds` computed once per (adapter, pictures) and kept for the run. The embeddings come from the
same encoder call a generation makes (`IPAdapterMixin.encode_ip_adapter_image`), so the images are exactly those the
pictures give, and the generations neither run nor even load the image encoder.

Pictures are told apart by their pixels (a digest of size, mode and bytes), not by object identity: an img2img unit
without its own picture takes each input's init image, read from its file for every input, and two inputs with the
same pixels share one encoding.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import replace
from typing import Any

# A1111 scripts whose init image changes from one generation to the next (Loopback feeds each result back, SD upscale
# redraws tile after tile): an IP-Adapter unit without a picture of its own would have to follow it, and a reference
# encoded once for the run would be stale, so the CLI and the server refuse image prompts with them. X/Y/Z plot,
# Prompt matrix and Prompts from file keep the init image.
SCRIPTS_REFUSING_IMAGE_PROMPTS = ("Loopback", "SD upscale")
STALE_REFERENCE_REASON = ("its init image changes at every generation, so an image prompt made from it once would be "
                          "stale")
# Encodings kept, least recently used dropped first. A batch whose units take each input's picture makes one per
# input (a Plus adapter's is 2 x 257 x 1280 floats, 2.6 MB), used once; the run's shared references are used by every
# generation, so they stay.
MAX_KEPT_ENCODINGS = 32


class ReferenceEmbeddings:
    """The embeddings of the reference pictures a run has encoded, keyed by adapter and pictures' pixels.

    `store` (`pipelines.ip_adapter_store.IPAdapterStore`, e.g. a server's) is where adapters and encoders are read
    through when the pipeline handed in has no IP-Adapter support of its own (a plain or hires-fix pipeline)."""

    def __init__(self, store: Any = None):
        self._store = store
        self._embeds: OrderedDict[tuple, Any] = OrderedDict()
        self._encoder_pipe = None  # an IPAdapterTextToImage on the model last encoded with, for plain pipelines
        self.encoder_runs = 0  # how many (adapter, pictures) were encoded: once each per run

    def params_with_embeds(self, pipe, params):
        """`params` with every adapter's pictures replaced by their embeddings (encoded now if this run has not
        yet), or `params` itself when they have no adapter, only adapters at scale 0 (never encoded, as a call
        skips them) or embeddings already. Raises as the pipeline's check would for bad IP-Adapter fields, and for an
        adapter that does not fit the model, before any generation."""
        call = params.ip_adapter_call() if hasattr(params, "ip_adapter_call") else None
        if call is None or not any(scale > 0 for scale in call.scales) or not any(call.encodes_images):
            return params
        embeds = []
        for source, images, given in zip(call.sources, call.images, call.embeds):
            if images is None:  # fed precomputed embeddings already
                embeds.append(given)
                continue
            key = (source, tuple(picture_digest(image) for image in images))
            if key in self._embeds:
                self._embeds.move_to_end(key)
            else:
                encoder = self._encoding_pipeline(pipe)
                self._embeds[key] = encoder.encode_ip_adapter_image([list(images)], ip_adapter=[source])[0]
                self.encoder_runs += 1
                if len(self._embeds) > MAX_KEPT_ENCODINGS:
                    self._embeds.popitem(last=False)
            embeds.append(self._embeds[key])
        return replace(params, ip_adapter=list(call.sources), ip_adapter_image=None, ip_adapter_image_embeds=embeds)

    def _encoding_pipeline(self, pipe):
        """An IP-Adapter pipeline on `pipe`'s model: `pipe` itself when it is one, else one made once per model
        (a hires-fix pipeline wraps its txt2img pipeline as `.pipe`)."""
        from pipelines.ip_adapter import IPAdapterMixin, IPAdapterTextToImage

        if isinstance(pipe, IPAdapterMixin):
            return pipe
        base = getattr(pipe, "pipe", pipe)
        if isinstance(base, IPAdapterMixin):
            return base
        if self._encoder_pipe is None or self._encoder_pipe.model is not base.model:
            self._encoder_pipe = IPAdapterTextToImage.from_pipeline(base)
            if self._store is not None:
                self._encoder_pipe.use_ip_adapter_store(self._store)
        return self._encoder_pipe


def picture_digest(image) -> tuple:
    """What tells two reference pictures apart: size, mode and a digest of the pixels."""
    return image.size, image.mode, hashlib.blake2b(image.tobytes(), digest_size=16).digest()
