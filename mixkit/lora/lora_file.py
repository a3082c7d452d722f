"""A LoRA file parsed into modules: format, algorithm family per module, metadata and hash."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from mixkit.lora.algorithms import LORA_ALGORITHMS
from mixkit.lora.module_weights import ModuleWeights, build_module
from mixkit.lora.bundled_embeddings import split_bundled_embeddings
from mixkit.lora.diffusers_format import parse_adapter_metadata, peft_alpha
from mixkit.lora.formats import LORA_FORMATS, LoraFormat, detect_format
from mixkit.lora.metadata import LoraMetadata, read_metadata
from mixkit.lora.reading import read_lora_file


@dataclass
class LoraModule:
    """One module of a LoRA file: which component it targets, under which name, with which tensors."""

    component: str
    name: str
    weights: ModuleWeights


@dataclass
class LoraFile:
    """Everything `apply_loras`, `inspect` and `convert` need from one file."""

    path: Path
    format: LoraFormat
    modules: list[LoraModule]
    metadata: LoraMetadata
    unclaimed_keys: list[str] = field(default_factory=list)
    # A1111's bundled textual-inversion vectors (`bundle_emb.<word>.*`), by word: see bundled_embeddings.
    embeddings: dict = field(default_factory=dict)
    _hash: str | None = None

    @property
    def name(self) -> str:
        return self.path.stem

    def family_counts(self) -> dict[str, int]:
        counts = Counter(LORA_ALGORITHMS.get(m.weights.family).label + (" + DoRA" if m.weights.is_dora else "")
                         for m in self.modules)
        return dict(sorted(counts.items()))

    def ranks(self) -> list[int]:
        return sorted({r for m in self.modules if (r := m.weights.rank()) is not None})

    def alphas(self) -> list[float]:
        return sorted({m.weights.alpha for m in self.modules if m.weights.alpha is not None})

    def components(self) -> list[str]:
        return sorted({m.component for m in self.modules})

    def short_hash(self) -> str:
        """A1111/kohya short hash: `sshs_model_hash` if the trainer wrote it, else sha256 of the bytes after the header."""
        if self._hash is None:
            stored = self.metadata.raw.get("sshs_model_hash")
            self._hash = (stored or addnet_hash(self.path))[:12]
        return self._hash


def addnet_hash(path: Path) -> str:
    """A1111's LoRA hash: sha256 of a safetensors file's tensor bytes; of the whole file otherwise.

    (A1111 reads any file as if it were safetensors here; for pickles that hashes arbitrary bytes,
    so mixkit uses the plain file sha256 for them instead.)
    """
    from mixkit.io.hashing import addnet_sha256_safetensors, sha256_file

    if path.suffix.lower() == ".safetensors":
        return addnet_sha256_safetensors(path)
    return sha256_file(path)


def load_lora(path: str | Path) -> LoraFile:
    """Read and parse a LoRA file; unclaimed keys are kept for the caller to report, never dropped."""
    contents = read_lora_file(path)
    source = str(contents.path)
    embeddings, tensors = split_bundled_embeddings(contents.tensors, contents.path)
    if embeddings and not tensors:  # only a trigger word's vectors, no modules: still a valid (kohya) file
        fmt, splits = LORA_FORMATS.get("kohya"), {}
    else:
        fmt, splits = detect_format(list(tensors), source)
    adapter_metadata = parse_adapter_metadata(contents.metadata, source) if fmt.name == "diffusers" else {}
    groups: dict[tuple[str, str], dict[str, object]] = {}
    group_keys: dict[tuple[str, str], list[str]] = {}
    unclaimed: list[str] = []
    for key, tensor in tensors.items():
        parts = splits.get(key)
        if parts is None:
            unclaimed.append(key)
            continue
        component, name, suffix = parts
        groups.setdefault((component, name), {})[suffix] = tensor
        group_keys.setdefault((component, name), []).append(key)
    modules: list[LoraModule] = []
    for (component, name), tensors in groups.items():
        weights, leftovers = build_module(tensors, group_keys[(component, name)])
        if weights is None:
            unclaimed.extend(f"{key} (incomplete or unknown module: {', '.join(leftovers)})" for key in group_keys[(component, name)][:1])
            unclaimed.extend(group_keys[(component, name)][1:])
            continue
        for suffix in leftovers:
            unclaimed.append(next(k for k in group_keys[(component, name)] if k.endswith(suffix)) + " (unsupported tensor)")
        if fmt.name == "diffusers" and weights.alpha is None and weights.family == "lora":
            weights.alpha = peft_alpha(adapter_metadata, component, name, weights.rank())
        modules.append(LoraModule(component, name, weights))
    return LoraFile(path=contents.path, format=fmt, modules=modules,
                    metadata=read_metadata(contents.metadata), unclaimed_keys=sorted(unclaimed), embeddings=embeddings)
