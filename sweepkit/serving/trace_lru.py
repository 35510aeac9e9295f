"""A trace's prefix reuse under a finite least-recently-used cache, counted block by block in arrival order.

Each row walks its prefix blocks (``hash_ids``, each a node of the trace's prefix tree) from the root; its
hit is the leading blocks already cached, in tokens min(d x block_tokens, prompt - 1). Then every block of
the row is cached, its path stamped used, and the least recently used blocks leave until at most
``capacity_tokens / block_tokens`` remain. A row stamps its path leaf first, so a block is never older than
its descendants and eviction takes leaves first, as RadixAttention's LRU of leaves does. With an unbounded
capacity the hit share is the trace's own reuse (:attr:`sweepkit.serving.traces.Reuse.trace_share`); a
finite one gets less. It is a bound for a simulated instance with that much KV: the engine's cache also
holds the running rows' KV, and it caches by session segments, not by blocks.

References:
  Mattson et al., "Evaluation techniques for storage hierarchies", IBM Systems Journal 9(2), 1970 (LRU stack
  distances); Zheng et al., SGLang (RadixAttention, LRU of leaves), arXiv:2312.07104, sec. 3.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

from sweepkit.serving.trace_read import MOONCAKE_BLOCK_TOKENS, read_rows


def lru_reuse(path: str | Path, capacity_tokens: float, block_tokens: int | None = None,
              fmt: str | None = None) -> tuple[int, int]:
    """(hit tokens, prompt tokens) of a trace under an LRU cache of ``capacity_tokens`` (inf: unbounded).

    Args:
      path: the trace (rows without ``hash_ids`` hit nothing).  capacity_tokens: cache size, tokens.
      block_tokens: tokens per block (default 512).  fmt: the trace's format (None: detected).

    Example:
      >>> import json, tempfile, os
      >>> rows = [dict(timestamp=0, input_length=1500, output_length=1, hash_ids=[0, 1, 2]),
      ...         dict(timestamp=1, input_length=1500, output_length=1, hash_ids=[0, 3, 4]),
      ...         dict(timestamp=2, input_length=1500, output_length=1, hash_ids=[0, 1, 2])]
      >>> with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
      ...     f.write("\\n".join(json.dumps(r) for r in rows)) and None
      >>> lru_reuse(f.name, float("inf")), lru_reuse(f.name, 3 * 512); os.unlink(f.name)
      ((2011, 4500), (1024, 4500))
    """
    bt = int(block_tokens or MOONCAKE_BLOCK_TOKENS)
    room = capacity_tokens / bt
    trie: dict = {}
    cache: OrderedDict = OrderedDict()
    hit = total = 0
    for row in read_rows(path, fmt):
        total += row.input_tokens
        node, d, path_nodes, leading = -1, 0, [], True
        for h in row.hash_ids or ():
            key = (node, h)
            node = trie.get(key)
            if node is None:
                node = trie[key] = len(trie)
            leading = leading and node in cache
            d += leading
            path_nodes.append(node)
        hit += max(min(d * bt, row.input_tokens - 1), 0)
        for n in reversed(path_nodes):             # leaf first: ancestors end up the most recent
            cache[n] = True
            cache.move_to_end(n)
        while len(cache) > room:
            cache.popitem(last=False)
    return hit, total
