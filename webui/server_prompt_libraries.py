"""The prompt's libraries of a running server: LoRA names, hypernetworks, textual-inversion embeddings, prompt styles.

A mixin of `ServerState` (which sets the attributes declared below); each library is None when
its folder or file is not configured, so callers can tell "none configured" from "none found".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from webui.prompt_guard import extra_network_names

if TYPE_CHECKING:
    from mixkit.hypernetworks import HypernetworkLibrary
    from mixkit.lora import LoraLibrary
    from mixkit.prompts import EmbeddingLibrary
    from webui.config import ServerConfig


class PromptLibraries:
    config: ServerConfig
    _lora_library: LoraLibrary | None
    _hypernetwork_library: HypernetworkLibrary | None
    _embedding_library: EmbeddingLibrary | None

    # -- LoRA --------------------------------------------------------------------------------
    @property
    def lora_library(self):
        return self._lora_library

    def lora_names(self, prompts: tuple[str, ...] = ()) -> set[str] | None:
        """Every name a prompt tag may use (relative names, stems, aliases), or None without a folder.

        When a tag in `prompts` names none of them, the folder is scanned again first, as A1111 rescans
        before refusing: a LoRA copied in while the server runs works without a refresh call."""
        if self._lora_library is None:
            return None
        names = self._scanned_lora_names()
        wanted = {name for prompt in prompts for kind, name in extra_network_names(prompt) if kind != "hypernet"}
        if wanted - names:
            self._lora_library.refresh()
            names = self._scanned_lora_names()
        return names

    def _scanned_lora_names(self) -> set[str]:
        names: set[str] = set()
        for entry in self._lora_library.entries():
            names.update(n for n in (entry.relative_name, entry.name, entry.alias) if n)
        return names

    # -- hypernetworks -----------------------------------------------------------------------
    @property
    def hypernetwork_library(self):
        """The `--hypernetwork-dir` files as a `HypernetworkLibrary`, or None without a folder."""
        return self._hypernetwork_library

    def hypernetwork_listing(self) -> list[dict]:
        """A1111's `/sdapi/v1/hypernetworks`: `{name, path}` per file, scanned now ([] without a folder)."""
        if self._hypernetwork_library is None:
            return []
        return [{"name": entry.name, "path": str(entry.path)} for entry in self._hypernetwork_library.entries()]

    # -- textual inversion -------------------------------------------------------------------
    @property
    def embedding_library(self):
        """The `--embeddings-dir` files as an `EmbeddingLibrary` (browser and API), or None without a folder."""
        return self._embedding_library

    def refresh_embeddings(self) -> None:
        """Re-scan `--embeddings-dir` (new or removed files); a missing folder raises ModelNotFoundError naming it."""
        if self.config.embeddings_dir:
            from mixkit.prompts import EmbeddingLibrary

            current = self._embedding_library
            self._embedding_library = (current.refreshed() if current is not None
                                       else EmbeddingLibrary(self.config.embeddings_dir))

    # -- prompt styles -----------------------------------------------------------------------
    def styles(self):
        """`--styles-file` read now (A1111 rereads it on refresh; a read is one small CSV), or None without one."""
        if not self.config.styles_file:
            return None
        from mixkit.prompts.styles import StyleLibrary

        return StyleLibrary(self.config.styles_file)
