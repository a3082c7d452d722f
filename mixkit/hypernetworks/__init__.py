"""A1111 hypernetworks: `.pt` files of small residual MLPs that transform the attention's key/value context.

Read one with `load_hypernetwork(path)`, list a folder with `HypernetworkLibrary(folder)`, apply several for one
call with `apply_hypernetworks(unet, [HypernetworkApplication(hn, 0.8)])` (undone by `.remove()` or `with`); the
pipelines apply `<hypernet:name:strength>` prompt tags from their `hypernetwork_dir`.
"""

from mixkit.hypernetworks.apply import (MAX_HYPERNETWORK_STRENGTH, AppliedHypernetworks, HypernetworkApplication,
                                        apply_hypernetworks)
from mixkit.hypernetworks.library import DEFAULT_HYPERNETWORK_DIR, HypernetworkEntry, HypernetworkLibrary
from mixkit.hypernetworks.network import Hypernetwork, HypernetworkMLP, load_hypernetwork
from mixkit.hypernetworks.requests import HypernetworkRequest, parse_hypernetwork_tags, resolve_hypernetwork_requests

__all__ = [
    "DEFAULT_HYPERNETWORK_DIR", "MAX_HYPERNETWORK_STRENGTH", "AppliedHypernetworks", "Hypernetwork",
    "HypernetworkApplication", "HypernetworkEntry", "HypernetworkLibrary", "HypernetworkMLP", "HypernetworkRequest",
    "apply_hypernetworks", "load_hypernetwork", "parse_hypernetwork_tags", "resolve_hypernetwork_requests",
]
