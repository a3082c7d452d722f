"""Encode one IP-Adapter's image prompt once, for `mixkit generate/img2img --ip-adapter-embeds FILE`.

`mixkit ip-adapter-embeds --ip-adapter X --ip-adapter-image ref.png -o ref.safetensors`, then
`mixkit generate "a cat" --ip-adapter X --ip-adapter-embeds ref.safetensors`.

The embeddings are what the adapter's image encoder and projection make of the pictures (the Python API's
`encode_ip_adapter_image`), so later generations skip the CLIP vision encoder: it is neither loaded nor needs to be
present. The model is loaded because the adapter is checked against its UNet and the encoder runs in its dtype and on
its device, as in a generation; the same model and adapter give the same picture from the file as from the images.
"""

from __future__ import annotations

import argparse
import os
import sys


def add_parser(subparsers) -> None:
    from mixkit.tiny.shipped import DEFAULT_TEXT_TO_IMAGE as BUILT_IN_MODEL
    from webui.cli.generate import DEFAULT_MODEL_ENV

    p = subparsers.add_parser("ip-adapter-embeds", help="encode IP-Adapter image prompts once, to a .safetensors file",
                              description=__doc__.splitlines()[0])
    p.add_argument("--model", default=os.environ.get(DEFAULT_MODEL_ENV) or BUILT_IN_MODEL,
                   help="the model the embeddings will be used with (its UNet checks the adapter; default: "
                        f"${DEFAULT_MODEL_ENV}, else the built-in {BUILT_IN_MODEL})")
    p.add_argument("--ip-adapter", required=True, metavar="PATH",
                   help="the IP-Adapter weights, as `mixkit generate --ip-adapter` takes them (one adapter)")
    p.add_argument("--ip-adapter-image", action="append", required=True, metavar="IMG",
                   help="a reference picture; repeat for several (one embedding row per picture, in order)")
    p.add_argument("--ip-adapter-image-encoder", default=None, metavar="PATH",
                   help="the CLIP vision encoder folder or hub id (default: image_encoder/ beside the weights)")
    p.add_argument("-o", "--output", required=True, metavar="FILE.safetensors", help="the file to write")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:1 ... (default: cpu)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from webui.cli.generate_checks import check_device
    from webui.cli.ip_adapter_embeds_file import check_output_path, write_embeds_file
    from webui.cli.ip_adapter_flags import ip_adapter_fields

    output = check_output_path(args.output)
    check_device(args.device)
    flags = argparse.Namespace(ip_adapter=[args.ip_adapter], ip_adapter_image=args.ip_adapter_image,
                               ip_adapter_image_encoder=[args.ip_adapter_image_encoder]
                               if args.ip_adapter_image_encoder else None)
    fields = ip_adapter_fields(flags)  # images read, weights and encoder found: before the model loads
    from pipelines.ip_adapter import IPAdapterTextToImage

    pipe = IPAdapterTextToImage.from_pretrained(args.model, device=args.device)
    print(f"Loaded {pipe.model.description} from {args.model}", file=sys.stderr)
    (embeds,) = pipe.encode_ip_adapter_image(fields["ip_adapter_image"], ip_adapter=fields["ip_adapter"])
    write_embeds_file(output, embeds, fields["ip_adapter"][0].name)
    print(output)
    return 0
