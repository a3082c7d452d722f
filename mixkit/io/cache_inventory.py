"""What mixkit's disk cache holds, and removing parts of it (`mixkit cache list|clear`).

Why: every OpenVINO conversion keyed by new weights (a merged LoRA set, another checkpoint) or an
int8 calibration adds a graph of up to a few GB (SD 1.5 UNet: 1.7 GB bf16, 0.9 GB int8), and
nothing else ever deletes them. Everything here is a cache: removing an entry only means it is
rebuilt (converted, calibrated, compiled, rendered or hashed again) the next time it is needed.
An OpenVINO graph is one entry of its `.xml`, `.bin` and `.json`, removed together.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from mixkit.io.cache_root import LATENTS_DESCRIPTION, LATENTS_FOLDER, WORLD_TENSORS_FOLDER, cache_root

KINDS = ("openvino", "compile", "world", "latents", "hashes")


@dataclass(frozen=True)
class CacheEntry:
    kind: str  # one of KINDS
    path: Path  # the entry's main file or folder
    files: tuple[Path, ...]  # everything removed with it
    size: int  # bytes
    modified: float  # newest modification time (seconds since the epoch)
    detail: str  # what it was made from, for people

    def age_days(self, now: float | None = None) -> float:
        return ((now if now is not None else time.time()) - self.modified) / 86400


def cache_entries(root: Path | None = None) -> list[CacheEntry]:
    """Every entry under the cache root (`mixkit.io.cache_root`), largest first."""
    root = Path(root) if root is not None else cache_root()
    entries = _openvino_entries(root / "openvino")
    for kind, folder, detail in (("compile", root / "compile", "torch.compile (inductor) kernels"),
                                 ("openvino", root / "openvino" / "blobs", "OpenVINO compiled blobs (per shape)")):
        if folder.is_dir():
            entries.append(_entry(kind, folder, (folder,), detail))
    world = root / WORLD_TENSORS_FOLDER
    if world.is_dir():
        entries += [_entry("world", f, (f,), f"rendered shapes-world images ({f.name})") for f in sorted(world.iterdir())]
    latents = root / LATENTS_FOLDER
    if latents.is_dir():
        entries += [_entry("latents", f, (f,), _describe_latents(f))
                    for f in sorted(latents.iterdir()) if f.is_dir()]
    hashes = root / "hashes.json"
    if hashes.is_file():
        entries.append(_entry("hashes", hashes, (hashes,), "model file hashes"))
    return sorted(entries, key=lambda e: -e.size)


def select_entries(entries: list[CacheEntry], kinds: tuple[str, ...], older_than_days: float | None = None,
                   now: float | None = None) -> list[CacheEntry]:
    """The entries of these kinds ("all" for every kind), optionally only those not modified for a while."""
    unknown = [k for k in kinds if k not in (*KINDS, "all")]
    if unknown or not kinds:
        raise ValueError(f"unknown cache kind(s) {unknown or list(kinds)}; choose from {[*KINDS, 'all']}")
    if older_than_days is not None and older_than_days < 0:
        raise ValueError(f"older_than_days must be >= 0, got {older_than_days}")
    wanted = set(KINDS) if "all" in kinds else set(kinds)
    return [e for e in entries if e.kind in wanted
            and (older_than_days is None or e.age_days(now) >= older_than_days)]


def oldest_until_under(entries: list[CacheEntry], candidates: list[CacheEntry], limit_bytes: int) -> list[CacheEntry]:
    """The candidates to remove, least recently modified first, until the whole cache (`entries`) holds at
    most `limit_bytes`; every candidate when even that is not enough, none when the cache already fits.

    Modification time, not last use: OpenVINO maps its graphs without touching them, so the time a
    graph was written (converted or calibrated) is the only age the files carry.
    """
    if isinstance(limit_bytes, bool) or not isinstance(limit_bytes, int) or limit_bytes < 0:
        raise ValueError(f"the size limit must be a number of bytes >= 0, got {limit_bytes!r}")
    total = sum(e.size for e in entries)
    chosen = []
    for entry in sorted(candidates, key=lambda e: e.modified):
        if total <= limit_bytes:
            break
        chosen.append(entry)
        total -= entry.size
    return chosen


_SIZE_UNITS = {"": 1, "B": 1, "K": 1024, "KB": 1024, "M": 1024 ** 2, "MB": 1024 ** 2, "G": 1024 ** 3, "GB": 1024 ** 3,
               "T": 1024 ** 4, "TB": 1024 ** 4}


def parse_size(text: str) -> int:
    """Bytes in "10G", "1.5 GB", "500M", "800KB" or "4096" (binary units, as `mixkit cache list` prints them)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", str(text))
    unit = match.group(2).upper() if match else None
    if match is None or unit not in _SIZE_UNITS:
        raise ValueError(f"cannot read the size {text!r}: give a number with an optional unit K, M, G or T "
                         "(e.g. 10G, 1.5GB, 500M)")
    return int(float(match.group(1)) * _SIZE_UNITS[unit])


def remove_entries(entries: list[CacheEntry], root: Path | None = None) -> int:
    """Delete the entries' files, a graph's `.xml` before its `.bin` (a reader then finds no graph rather
    than one without weights). Refuses anything outside the cache root, before deleting anything.
    Returns the bytes freed."""
    root = (Path(root) if root is not None else cache_root()).resolve()
    for entry in entries:
        for path in entry.files:
            if root not in path.resolve().parents:
                raise ValueError(f"{path} is not inside the mixkit cache {root}; refusing to delete it")
    freed = 0
    for entry in entries:
        for path in entry.files:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        freed += entry.size
    return freed


def _openvino_entries(folder: Path) -> list[CacheEntry]:
    if not folder.is_dir():
        return []
    entries = []
    for xml in sorted(folder.glob("*.xml")):
        if xml.name.endswith(".tmp.xml"):
            continue  # a conversion in progress (or one that crashed: listed with its leftovers below)
        files = (xml, *(p for p in (xml.with_suffix(".bin"), xml.with_suffix(".json")) if p.exists()))
        entries.append(_entry("openvino", xml, files, _describe_graph(xml)))
    leftovers = tuple(sorted(folder.glob("*.tmp.*")))
    if leftovers:
        entries.append(_entry("openvino", leftovers[0], leftovers, "unfinished conversion (temporary files)"))
    return entries


def _describe_graph(xml: Path) -> str:
    """Part, model hash, LoRAs and shapes from the readable `.json` written beside every graph."""
    try:
        key = json.loads(xml.with_suffix(".json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return xml.stem.rsplit("-", 1)[0]  # a graph saved before graphs had a .json beside them
    parts = [str(key.get("part", xml.stem))]
    if key.get("model_hash"):
        parts.append(f"model {key['model_hash']}")
    if key.get("loras"):
        parts.append("LoRAs " + ", ".join(key["loras"]))
    if key.get("shapes"):
        parts.append("shape " + " ".join("x".join(map(str, s)) for s in key["shapes"]))
    settings = key.get("settings")
    if isinstance(settings, dict) and settings.get("width"):
        parts.append(f"int8 calibrated at {settings['width']}x{settings.get('height')}, {settings.get('steps')} steps")
    return "; ".join(parts)


def _describe_latents(folder: Path) -> str:
    """One VAE encoder's cached training latents (`cache_latents_to_disk`): the VAE class, dtype and image count."""
    images = sum(1 for _ in folder.glob("*.safetensors"))
    try:
        about = json.loads((folder / LATENTS_DESCRIPTION).read_text(encoding="utf-8"))
        made_by = f"{about.get('vae', 'VAE')} encoder in {about.get('dtype', '?')}"
    except (OSError, ValueError):
        made_by = "VAE encoder"
    return f"training latents of {images} images ({made_by}, fingerprint {folder.name[:10]})"


def _entry(kind: str, path: Path, files: tuple[Path, ...], detail: str) -> CacheEntry:
    """One entry's size and age. The age is the newest modification time of the files it holds; an entry that
    holds no file (an empty `compile/` folder) takes its own folder's time, when something was last added to or
    removed from it, not the epoch, so `--older-than` does not see it as decades old."""
    size, modified = 0, None
    for item in files:
        for file in (item.rglob("*") if item.is_dir() else (item,)):
            try:
                stat = file.stat()
            except OSError:
                continue
            if file.is_file():
                size += stat.st_size
            modified = stat.st_mtime if modified is None else max(modified, stat.st_mtime)
    if modified is None:
        modified = _own_mtime(files)
    return CacheEntry(kind, path, files, size, modified, detail)


def _own_mtime(files: tuple[Path, ...]) -> float:
    """The newest modification time of the entry's own paths; now when none can be read (an age unknown counts as
    new: `--older-than` never removes an entry for want of a time)."""
    times = []
    for item in files:
        try:
            times.append(item.stat().st_mtime)
        except OSError:
            continue
    return max(times) if times else time.time()
