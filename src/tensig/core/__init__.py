"""The core every other layer asks: the notation, symbolic dimensions, shapes, the solver and
shape inference. It imports nothing from the layers above it.
"""

from typing import Any


def kept(cache: dict[Any, Any], key: Any, value: Any, limit: int) -> Any:
    """``value``, stored under ``key`` in ``cache``, which starts over at ``limit`` entries: a
    cache keyed by what callers pass stays bounded, and a hit costs nothing (as in no LRU)."""
    if len(cache) >= limit:
        cache.clear()
    cache[key] = value
    return value
