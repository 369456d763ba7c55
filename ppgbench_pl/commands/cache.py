"""``ppgbench cache list|clear``: the shared embedding cache (torch-free; see benchmark/cache_store.py)."""

from __future__ import annotations

import argparse
import json
import time

from ppgbench_pl.benchmark.cache_store import cache_root, clear, entries, size_cap_bytes


def add_cache_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``cache``."""
    parser = sub.add_parser("cache")
    parser.add_argument("action", choices=("list", "clear"),
                        help="list the entries, or remove every ppgbench entry (only in a folder carrying ppgbench's "
                        "cache marker; other files are never touched)")
    parser.add_argument("--cache_dir", default=None,
                        help="The cache folder (default $PPGBENCH_CACHE_DIR, else ~/.cache/ppgbench/embeddings).")
    parser.add_argument("--json", action="store_true", help="list as JSON (one object per entry)")
    parser.add_argument("--weights", action="store_true", help="the published models' weights cache instead")
    parser.add_argument("--weights_dir", default=None, help="The weights cache (default $PPGBENCH_WEIGHTS_DIR, "
                        "else ~/.cache/ppgbench/weights).")
    parser.set_defaults(func=run_cache)


def run_cache(ns: argparse.Namespace) -> None:
    """Print the entries (most recently used first) or remove them (``--weights``: the published weights' cache)."""
    if ns.weights or ns.weights_dir:
        from ppgbench_pl.benchmark.weights import cache_command

        print(cache_command(ns.action, ns.weights_dir, as_json=ns.json))
        return
    from ppgbench_pl.benchmark.cache_store import claim, is_marked

    root = cache_root(ns.cache_dir)
    if root.is_dir() and not is_marked(root) and any(root.glob("*.npy")):
        claim(root)  # every file in it is an old-format entry (cache_root refused anything else)
    if ns.action == "clear":
        if not root.exists():
            print(f"no embedding cache at {root}; nothing to remove")
            return
        removed, busy = clear(root)
        print(f"removed {removed} entries from {root}" + (f"; {busy} in use by another process were kept"
                                                            if busy else ""))
        return
    found = list(reversed(entries(root)))
    if ns.json:
        print(json.dumps(found, indent=1))
        return
    total = sum(e["bytes"] for e in found)
    print(f"{root}: {len(found)} entries, {total / 1e9:.3g} GB of {size_cap_bytes() / 1e9:.3g} GB "
          f"(least recently used evicted first)")
    for e in found:
        used = time.strftime("%Y-%m-%d %H:%M", time.localtime(e["last_used"]))
        shape = "x".join(str(n) for n in e.get("shape") or []) or "?"
        print(f"  {e['key'][:12]}  {e.get('encoder', '?')}  {e.get('dataset', '?')}  {e.get('fs', '?')} Hz  "
              f"{shape}  {e['bytes'] / 1e6:.1f} MB  last used {used}")
