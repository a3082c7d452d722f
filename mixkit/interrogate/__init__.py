"""Image interrogation (A1111's "Interrogate CLIP" and "Interrogate DeepBooru").

CLIP: `categories` reads the word lists (an A1111 `interrogate/` folder, or the built-in shapes-world lists),
`ranking` ranks a list's lines against an image with a CLIP model, and `interrogator` puts a caption
and the ranked terms together. DeepBooru: `deepbooru_network` is DeepDanbooru's tagger, `deepbooru` reads A1111's
file into it, `deepbooru_tags` writes A1111's tag text (the image side is `pipelines.deepbooru`).
"""

from mixkit.interrogate.categories import (BUILTIN_CATEGORIES, DEFAULT_DICT_LIMIT, Category, builtin_categories,
                                           read_categories)
from mixkit.interrogate.deepbooru import DeepbooruModel, find_deepbooru_file, load_deepbooru, shared_deepbooru_model
from mixkit.interrogate.deepbooru_network import DeepDanbooruNetwork, DeepDanbooruSizes
from mixkit.interrogate.deepbooru_tags import DeepbooruSettings, format_tags
from mixkit.interrogate.interrogator import ClipInterrogator, InterrogateSettings, join_terms
from mixkit.interrogate.ranking import TextEmbeddingCache, rank_lines

__all__ = ["BUILTIN_CATEGORIES", "DEFAULT_DICT_LIMIT", "Category", "ClipInterrogator", "DeepDanbooruNetwork",
           "DeepDanbooruSizes", "DeepbooruModel", "DeepbooruSettings", "InterrogateSettings", "TextEmbeddingCache",
           "builtin_categories", "find_deepbooru_file", "format_tags", "join_terms", "load_deepbooru", "rank_lines",
           "read_categories", "shared_deepbooru_model"]
