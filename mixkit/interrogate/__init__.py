"""CLIP interrogation (A1111's "Interrogate CLIP"): a caption followed by the best lines of word lists.

`categories` reads the word lists (an A1111 `interrogate/` folder, or the built-in shapes-world lists),
`ranking` ranks a list's lines against an image with a CLIP model, and `interrogator` puts a caption
and the ranked terms together.
"""

from mixkit.interrogate.categories import (BUILTIN_CATEGORIES, DEFAULT_DICT_LIMIT, Category, builtin_categories,
                                           read_categories)
from mixkit.interrogate.interrogator import ClipInterrogator, InterrogateSettings, join_terms
from mixkit.interrogate.ranking import TextEmbeddingCache, rank_lines

__all__ = ["BUILTIN_CATEGORIES", "DEFAULT_DICT_LIMIT", "Category", "ClipInterrogator", "InterrogateSettings",
           "TextEmbeddingCache", "builtin_categories", "join_terms", "rank_lines", "read_categories"]
