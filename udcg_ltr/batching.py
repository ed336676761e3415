"""Length-sorted batches under a row and a token budget: the one batching rule of every model we run.

Sorting by length keeps padding small; a *token* budget on top of a row cap (rows x the batch's longest
sequence <= ``max_tokens``) lets one setting fill an accelerator with many short sequences or few long ones:
with a fixed row count, a GPU either runs out of memory on the longest batch or idles on the shortest.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from tqdm.auto import tqdm


def length_batches(lengths: Sequence[int], max_rows: int, max_tokens: int | None = None) -> Iterator[list[int]]:
    """Indices sorted by length (longest first, ties in input order), cut into batches of at most ``max_rows``
    rows and, when ``max_tokens`` is set, at most ``max_tokens`` padded tokens (a sequence longer than the
    budget gets a batch of its own)."""
    if max_rows < 1:
        raise ValueError(f"max_rows must be >= 1, got {max_rows}")
    if max_tokens is not None and max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1 or None, got {max_tokens}")
    order = sorted(range(len(lengths)), key=lambda i: (-int(lengths[i]), i))
    start = 0
    while start < len(order):
        rows = max_rows
        if max_tokens is not None:  # the first row of a batch is its longest
            rows = min(rows, max(1, int(max_tokens) // max(1, int(lengths[order[start]]))))
        yield order[start:start + rows]
        start += rows


def progress_bar(total: int, desc: str, enabled: bool, unit: str = "prompt") -> tqdm:
    """A tqdm bar over ``total`` items of batched work (a context manager), silent when disabled or empty."""
    return tqdm(total=total, desc=desc, unit=unit, dynamic_ncols=True, mininterval=1.0,
                disable=not enabled or total <= 0)
