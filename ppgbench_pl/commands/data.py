"""``ppgbench download``, ``preprocess`` and ``cache``: raw files in, processed trees out, caches kept."""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

from ppgbench_pl.data.datasets import REAL_DATASETS, preprocessor
from ppgbench_pl.errors import ConfigError
from ppgbench_pl.limits import MAX_SAMPLING_RATE as HIGH
from ppgbench_pl.limits import MIN_SAMPLING_RATE as LOW


def _keys(names: list[str]) -> list[str]:
    if names == ["all"]:
        return list(REAL_DATASETS)
    unknown = [n for n in names if n not in REAL_DATASETS]
    if unknown:
        raise ConfigError(f"unknown dataset(s) {', '.join(unknown)}; known: {', '.join(REAL_DATASETS)} or 'all'")
    return names


def add_data_parsers(sub: argparse._SubParsersAction) -> None:
    """Register ``download`` and ``preprocess``."""
    dl = sub.add_parser("download")
    dl.add_argument("datasets", nargs="*", help=f"dataset keys or 'all' ({', '.join(REAL_DATASETS)})")
    dl.add_argument("--weights", nargs="+", default=[], metavar="MODEL",
                    help="published models whose weights to fetch into the weights cache, or 'all' "
                    "(papagei_p papagei_s pulseppg anyppg sigmappg moment_small)")
    dl.add_argument("--weights_dir", "--weights-dir", default=None,
                    help="the weights cache (default $PPGBENCH_WEIGHTS_DIR, else ~/.cache/ppgbench/weights)")
    dl.add_argument("--weights_revision", "--weights-revision", action="append", default=[], metavar="MODEL=REV",
                    help="accept this version instead of the one ppgbench pins (a Zenodo record id or a commit)")
    dl.add_argument("--raw-root", type=Path, default=Path("data/raw"))
    dl.add_argument("--physionet-user", default=None, help="PhysioNet account for DREAMT (password from "
                    "PHYSIONET_PASSWORD or a prompt; never stored)")
    dl.add_argument("--no-progress", action="store_true")
    dl.add_argument("--force", action="store_true",
                    help="fetch and extract every file afresh, even those already downloaded and verified")
    dl.add_argument("--stall-timeout", type=float, default=None, metavar="SECONDS",
                    help="a transfer with under 1 KiB in this many seconds is stalled, then retried "
                    "(default 120)")
    dl.add_argument("--retries", type=int, default=None,
                    help="retries of a stalled or cut transfer (default 2)")
    dl.set_defaults(func=run_download)

    pp = sub.add_parser("preprocess")
    pp.add_argument("datasets", nargs="+", help="dataset keys or 'all'")
    pp.add_argument("--raw-root", type=Path, default=Path("data/raw"),
                    help="folder holding <dataset>/ sub-folders, or one dataset's raw folder")
    pp.add_argument("--fs", type=float, nargs="+", required=True, help="target sampling rate(s) in Hz")
    pp.add_argument("--output", type=Path, default=Path("data/processed"))
    pp.set_defaults(func=run_preprocess)


def run_download(ns: argparse.Namespace) -> None:
    """Download each dataset; exit 1 when any failed."""
    from ppgbench_pl.data.download import FAILED, download
    from ppgbench_pl.data.download.http import RETRIES, STALL_S

    stall = STALL_S if ns.stall_timeout is None else ns.stall_timeout
    retries = RETRIES if ns.retries is None else ns.retries
    if not (math.isfinite(stall) and stall > 0):
        raise ConfigError(f"--stall-timeout must be a positive number of seconds, got {ns.stall_timeout}")
    if retries < 0:
        raise ConfigError(f"--retries must be 0 or more, got {ns.retries}")
    if not ns.datasets and not ns.weights:
        raise ConfigError("download: name dataset keys, or models after --weights (see ppgbench download --help)")
    status: dict[str, str] = {}
    if ns.weights:
        from ppgbench_pl.benchmark.weights import download_weights, model_names, revisions, weights_root
        from ppgbench_pl.data.download.http import Client

        names, wanted = model_names(ns.weights), revisions(ns.weights_revision)
        client = Client(progress=not ns.no_progress, force=ns.force, stall_s=stall, retries=retries)
        status.update(download_weights(names, weights_root(ns.weights_dir), client, wanted))
    if ns.datasets:
        status.update(download(_keys(ns.datasets), ns.raw_root, physionet_user=ns.physionet_user,
                               progress=not ns.no_progress, force=ns.force, stall_s=stall, retries=retries))
    for key, line in status.items():  # failures on stderr, where scripts and users look for errors
        print(f"{key}: {line}", file=sys.stderr if line.startswith(FAILED) else sys.stdout)
    if any(line.startswith(FAILED) for line in status.values()):
        raise SystemExit(1)


def run_preprocess(ns: argparse.Namespace) -> None:
    """Build the processed tree of each dataset at each rate; a rerun with the same inputs is a no-op."""
    for fs in ns.fs:  # the encoders' range of rates
        if not (math.isfinite(fs) and LOW <= fs <= HIGH):
            raise ConfigError(f"--fs {fs:g}: a target rate must lie within {LOW:g}-{HIGH:g} Hz")
    for key in _keys(ns.datasets):
        raw = ns.raw_root / key if (ns.raw_root / key).is_dir() else ns.raw_root
        dataset = preprocessor(key)(raw)
        for fs in ns.fs:
            path = dataset.build(ns.output, fs)
            print(f"{key} @ {fs:g} Hz -> {path}")


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
    from ppgbench_pl.benchmark.cache_store import cache_root, claim, clear, entries, is_marked, size_cap_bytes

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
