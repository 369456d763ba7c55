"""Published weights by name, fetched, verified and pinned into ``<root>/<model>/<revision>/`` (described last)."""

from __future__ import annotations

import difflib
import json
import re
import shutil
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ppgbench_pl.atomic_io import write_json_atomic
from ppgbench_pl.benchmark.cache_store import cache_folder, mark, read_description, require_marker
from ppgbench_pl.data.download import hosts
from ppgbench_pl.data.download.archives import extract, marker_path
from ppgbench_pl.data.download.files import file_hashes
from ppgbench_pl.data.download.http import Client
from ppgbench_pl.encoders.catalog import CATALOG, PublishedWeights
from ppgbench_pl.errors import ConfigError, DownloadError, PPGBenchError
from ppgbench_pl.locks import LockBusy, file_lock

#: The marker file of the weights root (``cache clear`` needs it), and what it says the folder is.
MARKER = "PPGBENCH_WEIGHTS_CACHE"
KIND = "weights cache"
#: The description of one entry, written when its files are verified.
DESCRIPTION = "ppgbench-weights.json"
HOSTS = {"zenodo": "Zenodo record", "github": "GitHub", "huggingface": "Hugging Face"}
#: The models with published weights, in catalog order.
PUBLISHED: dict[str, PublishedWeights] = {n: e.published for n, e in CATALOG.items() if e.published is not None}


def weights_root(explicit: str | Path | None = None) -> Path:
    """The weights folder (absolute): ``explicit``, ``$PPGBENCH_WEIGHTS_DIR``, or the user cache directory."""
    return cache_folder(explicit, "--weights_dir", "PPGBENCH_WEIGHTS_DIR", "weights", KIND)[0]


def model_names(names: Sequence[str]) -> list[str]:
    """The models named (``all``: every published one); an unknown name is refused with a suggestion."""
    if list(names) == ["all"]:
        return list(PUBLISHED)
    for name in names:
        if name not in PUBLISHED:
            close = difflib.get_close_matches(name, list(PUBLISHED), n=3)
            hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(PUBLISHED)} or 'all'"
            raise ConfigError(f"--weights {name}: no published weights by that name; {hint}")
    return list(dict.fromkeys(names))


def revisions(pairs: Sequence[str] | None) -> dict[str, str]:
    """``--weights_revision model=REV`` values as a mapping."""
    out: dict[str, str] = {}
    for pair in pairs or []:
        name, sep, rev = pair.partition("=")
        if not sep or not rev.strip():
            raise ConfigError(f"--weights_revision {pair!r}: write MODEL=REVISION (e.g. sigmappg=<commit>)")
        out[model_names([name.strip()])[0]] = rev.strip()
    return out


def _verified(folder: Path) -> Path | None:
    """The checkpoint of a complete entry whose loaded files still have their recorded SHA-256, else None."""
    found = read_description(folder / DESCRIPTION) or {}
    intact = all((folder / rel).is_file() and file_hashes(folder / rel, ("sha256",))["sha256"] == digest
                 for rel, digest in (found.get("loaded_sha256") or {}).items())  # none yet while incomplete
    return (folder / str(found["checkpoint"])).resolve() if found.get("complete") and intact else None


def local_checkpoint(name: str, root: Path, revision: str | None = None) -> Path | None:
    """The verified local checkpoint of ``name`` at ``revision`` (default: pinned, else the latest fetched), or None."""
    revision = revision or PUBLISHED[name].revision
    model_dir = root / name
    if revision is not None:
        return _verified(model_dir / revision)
    folders = sorted(d for d in model_dir.iterdir() if d.is_dir()) if model_dir.is_dir() else []
    complete = [(str(found.get("fetched_utc")), d) for d in folders
                if (found := read_description(d / DESCRIPTION) or {}).get("complete")]
    return next((path for _, folder in sorted(complete, reverse=True) if (path := _verified(folder)) is not None), None)


def fetch_weights(name: str, root: Path, client: Client, revision: str | None = None) -> tuple[Path, str]:
    """Make the verified weights of ``name`` available under ``root``; return the checkpoint and a status.

    Raises:
        DownloadError: Another version than expected, no answer, or a file failing its check (one line).
    """
    pub = PUBLISHED[name]
    wanted = revision or pub.revision
    root.mkdir(parents=True, exist_ok=True)
    mark(root, KIND, MARKER)
    with file_lock(root / ".locks" / f"{name}.lock"):  # a second fetch waits, then finds it done
        found = None if client.force else local_checkpoint(name, root, wanted)
        if found is not None:
            return found, f"ok: already present, verified ({found})"
        plan = hosts.resolve(client, pub.host, pub.repo, wanted, pub.files)
        named_ref = revision is not None and pub.host != "zenodo" and re.fullmatch(r"[0-9a-f]{40}", str(wanted)) is None
        if wanted not in (None, plan.revision) and not named_ref:  # a branch or tag the user named becomes a commit
            named = "you named" if revision else "ppgbench pins"
            raise DownloadError(
                f"{name}: {HOSTS[pub.host]} {pub.repo} answers with revision {plan.revision}, but {named} {wanted}; "
                f"nothing was downloaded (to use it: --weights_revision {name}={plan.revision})")
        folder = root / name / plan.revision
        folder.mkdir(parents=True, exist_ok=True)
        record: dict[str, Any] = {
            "model": name, "host": pub.host, "repo": pub.repo, "revision": plan.revision,
            "pinned_revision": pub.revision, "source": CATALOG[name].weights_url, "complete": False}
        write_json_atomic(folder / DESCRIPTION, record)
        fetched, files = hosts.fetch(plan, folder, client)
        checkpoint = _unpack(folder, pub)
        loaded = [checkpoint.relative_to(folder).as_posix()] if checkpoint.is_file() else list(files)
        digests = {rel: files[rel]["sha256"] if rel in files else file_hashes(folder / rel, ("sha256",))["sha256"]
                   for rel in loaded}
        record.update(complete=True, files=files, checkpoint=pub.checkpoint, loaded_sha256=digests,
                      fetched_utc=datetime.now(UTC).isoformat(timespec="seconds"))
        write_json_atomic(folder / DESCRIPTION, record)
    note = ("; unpinned by ppgbench: this commit is recorded" if pub.revision is None and revision is None else
            "" if wanted == pub.revision else f"; not the pinned revision {pub.revision}")
    return checkpoint.resolve(), f"ok: {fetched} file(s) fetched, revision {plan.revision}{note} ({checkpoint})"


def _unpack(folder: Path, pub: PublishedWeights) -> Path:
    """Extract fetched archives with the safe unpacker (then drop them) and return the checkpoint path."""
    for name in pub.files:
        archive = folder / name
        if name.lower().endswith((".zip", ".tar", ".tar.gz", ".tgz")) and archive.is_file():
            extract(archive, folder)
            archive.unlink()  # the description, written next, vouches for what came out of it
            marker_path(archive).unlink(missing_ok=True)
    checkpoint = folder / pub.checkpoint
    if not checkpoint.exists():
        raise DownloadError(f"{folder}: the published files hold no {pub.checkpoint}; run with --force to fetch "
                            "them afresh, or report the moved file")
    return checkpoint


def download_weights(names: Sequence[str], root: Path, client: Client,
                     wanted: Mapping[str, str] | None = None) -> dict[str, str]:
    """Fetch each model's weights; return ``{name: "ok: ..." | "failed: <reason>"}`` (a failure stops no other)."""
    statuses: dict[str, str] = {}
    for name in model_names(names):
        try:
            statuses[name] = fetch_weights(name, root, client, (wanted or {}).get(name))[1]
        except PPGBenchError as exc:
            statuses[name] = f"failed: {exc}"
    return statuses


def fill_checkpoints(entries: Sequence[Any], weights_dir: str | None, *, fetch: bool, dry_run: bool,
                     client: Client | None = None) -> None:
    """Point published-model entries lacking ``checkpoint``/``random_init`` at cached weights (fetched if ``fetch``)."""
    by_class = {CATALOG[n].class_path: n for n in PUBLISHED}
    root = weights_root(weights_dir)
    for entry in entries:
        name = by_class.get(str(entry.get("class_path")))
        args = entry.get("init_args") or {}
        if name is None or args.get("checkpoint") is not None or args.get("random_init"):
            continue
        path = local_checkpoint(name, root)
        if path is None and fetch and dry_run:
            raise ConfigError(f"{name}: its published weights are not in {root} and a dry run fetches nothing; "
                              f"run `ppgbench download --weights {name}` first")
        if path is None and fetch:
            path, status = fetch_weights(name, root, client or Client(progress=sys.stderr.isatty()))
            print(f"{name}: {status}", file=sys.stderr)
        if path is not None:  # otherwise the encoder refuses to build without weights, as it always did
            entry["init_args.checkpoint"] = str(path)


def entries(root: Path) -> list[dict[str, Any]]:
    """Every entry ppgbench described under ``root``: its description plus folder and bytes on disk."""
    out = []
    for desc in sorted(root.glob(f"*/*/{DESCRIPTION}")) if root.is_dir() else []:
        folder = desc.parent
        size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
        out.append({**(read_description(folder / DESCRIPTION) or {}), "folder": str(folder), "bytes": size})
    return out


def clear(root: Path) -> tuple[int, int]:
    """Remove every described entry not being fetched (in a marked root only); return (removed, kept in use)."""
    if not root.is_dir():
        return 0, 0
    require_marker(root, KIND, MARKER)
    removed = busy = 0
    for entry in entries(root):
        folder = Path(entry["folder"])
        try:
            with file_lock(root / ".locks" / f"{folder.parent.name}.lock", blocking=False):
                if folder.is_dir() and not folder.is_symlink():
                    shutil.rmtree(folder)
                    removed += 1
                if folder.parent.is_dir() and not any(folder.parent.iterdir()):
                    folder.parent.rmdir()
        except LockBusy:
            busy += 1
    return removed, busy


def cache_command(action: str, weights_dir: str | None, *, as_json: bool = False) -> str:
    """What ``ppgbench cache list|clear --weights`` prints (clearing removes only described entries)."""
    root = weights_root(weights_dir)
    if action == "clear":
        removed, busy = clear(root)
        return f"removed {removed} weights entries from {root}" + (f"; {busy} being fetched were kept" if busy else "")
    found = entries(root)
    if as_json:
        return json.dumps(found, indent=1)
    lines = [f"{root}: {len(found)} entries, {sum(e['bytes'] for e in found) / 1e6:.1f} MB"]
    for e in found:
        state = "verified" if e.get("complete") else "incomplete (run the download again)"
        lines.append(f"  {e.get('model', '?')}  revision {e.get('revision', '?')}  {e['bytes'] / 1e6:.1f} MB  "
                     f"{state}  {e['folder']}")
    return "\n".join(lines)
