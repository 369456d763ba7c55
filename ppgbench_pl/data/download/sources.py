"""Where each of the nine raw datasets comes from and which of its files are fetched (PROTOCOL.md 1.1, 9).

Each source is a small record: the public page recorded in ``source.json``, a default base URL (which a
mirror mapping or ``PPGBENCH_MIRROR_<KEY>`` overrides) and a step that lists and fetches the files.
What the base URL means depends on the kind: the archive itself for direct archives, the API root for
Figshare and Mendeley Data, and the versioned ``files/<project>/<version>`` folder for PhysioNet.
"""

from __future__ import annotations

import csv
import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ppgbench_pl.data.download.archives import extract, marker_path
from ppgbench_pl.data.download.http import ChecksumLog, Client, RemoteFile, safe_relpath
from ppgbench_pl.errors import DownloadError

FIGSHARE_API = "https://api.figshare.com/v2"
MENDELEY_API = "https://data.mendeley.com/public-api"
PHYSIONET_FILES = "https://physionet.org/files"
DALIA_ZIP_URL = "https://archive.ics.uci.edu/static/public/495/ppg+dalia.zip"
#: The authors' Sciebo share linked from the WESAD project page; override with PPGBENCH_MIRROR_WESAD.
WESAD_ZIP_URL = "https://uni-siegen.sciebo.de/s/HGdUkoNlW1Ub0Gx/download"
#: The ETH Polybox share linked from the WildPPG project page (whole share as one zip, about 20 GB);
#: override with PPGBENCH_MIRROR_WILDPPG if the authors move it.
WILDPPG_ZIP_URL = "https://polybox.ethz.ch/index.php/s/NWTuyNojU7aya1y/download"


@dataclass
class Job:
    """What one dataset's fetch step works with: the client, its folder, its base URL and checksum log."""

    client: Client
    folder: Path
    base: str
    log: ChecksumLog
    fetched: int = 0
    present: int = 0

    def get(self, item: RemoteFile) -> None:
        """Fetch one file and count whether it was downloaded or already there."""
        if self.client.fetch(item, self.folder, self.log):
            self.fetched += 1
        else:
            self.present += 1


@dataclass(frozen=True)
class Source:
    """One dataset's publisher: page for ``source.json``, default base URL and the fetch step."""

    key: str
    page: str
    base_url: str
    run: Callable[[Job], None]
    credentialed: bool = False


def _fetch_and_extract(job: Job, item: RemoteFile, *, nested: bool = False) -> None:
    """Fetch an archive and extract it into the dataset folder, unless its marker says it is done."""
    archive = job.folder / item.dest
    if marker_path(archive).exists():
        job.present += 1
        return
    job.get(item)
    extract(archive, job.folder, nested=nested)


def _direct_archive(name: str, *, nested: bool = False) -> Callable[[Job], None]:
    """A source that is one archive at the base URL."""

    def run(job: Job) -> None:
        _fetch_and_extract(job, RemoteFile(url=job.base, dest=name), nested=nested)

    return run


def _field(row: Any, *keys: str) -> Any:
    """A nested field of a JSON object, or None when any level is missing."""
    for key in keys:
        if not isinstance(row, dict):
            return None
        row = row.get(key)
    return row


def _int_or_none(value: Any) -> int | None:
    """A size from a listing, tolerating strings and absent values."""
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _figshare(article: int, version: int) -> Callable[[Job], None]:
    """A Figshare article version: the listing names the ``.zip`` file(s), with size and MD5."""

    def run(job: Job) -> None:
        url = f"{job.base}/articles/{article}/versions/{version}"
        files = _field(job.client.get_json(url), "files")
        if not isinstance(files, list):
            raise DownloadError(f"{url}: the Figshare answer has no file list")
        zips = [f for f in files if str(_field(f, "name") or "").lower().endswith(".zip")]
        if not zips:
            raise DownloadError(f"{url}: no .zip file in the Figshare listing")
        for entry in zips:
            download_url = _field(entry, "download_url")
            if not isinstance(download_url, str):
                raise DownloadError(f"{url}: listing entry {entry.get('name')!r} has no download_url")
            md5 = _field(entry, "computed_md5") or _field(entry, "supplied_md5") or None
            item = RemoteFile(
                url=download_url,
                dest=safe_relpath(str(entry["name"])),
                size=_int_or_none(entry.get("size")),
                md5=md5,
            )
            _fetch_and_extract(job, item)

    return run


def _mendeley_folder_paths(folders: Any, url: str) -> dict[str, str]:
    """Folder id -> path from the flat folder list (each folder names its parent by id)."""
    if not isinstance(folders, list):
        raise DownloadError(f"{url}: the Mendeley answer is not a folder list")
    by_id = {str(f["id"]): f for f in folders if isinstance(f, dict) and "id" in f and "name" in f}
    paths: dict[str, str] = {}
    for fid in by_id:
        parts: list[str] = []
        cur: str | None = fid
        while cur in by_id and len(parts) <= len(by_id):
            parts.append(str(by_id[cur]["name"]))
            parent = by_id[cur].get("parent_id")
            cur = str(parent) if parent else None
        paths[fid] = safe_relpath("/".join(reversed(parts)))
    return paths


def _mendeley(
    dataset: str, version: int, *, want_folder: Callable[[str], bool], want_file: Callable[[str], bool]
) -> Callable[[Job], None]:
    """A Mendeley Data version: walk the folder tree, list each wanted folder, check size and SHA-256."""

    def run(job: Job) -> None:
        api = f"{job.base}/datasets/{dataset}"
        folders_url = f"{api}/folders/{version}"
        folders = job.client.get_json(folders_url, missing_ok=True)  # a flat dataset may have no folders
        paths = _mendeley_folder_paths([] if folders is None else folders, folders_url)
        wanted = sorted((p, fid) for fid, p in paths.items() if want_folder(p))
        walk = [("root", "")] + [(fid, p) for p, fid in wanted]
        items: list[RemoteFile] = []
        for fid, prefix in walk:
            query = urllib.parse.urlencode({"folder_id": fid, "version": version})
            rows = job.client.get_json(f"{api}/files?{query}")
            if not isinstance(rows, list):
                raise DownloadError(f"{api}/files?{query}: the Mendeley answer is not a file list")
            for row in rows:
                name = _field(row, "filename")
                url = _field(row, "content_details", "download_url")
                if not isinstance(name, str) or not isinstance(url, str):
                    raise DownloadError(f"{api}/files?{query}: an entry has no filename or download_url")
                rel = f"{prefix}/{name}" if prefix else name
                if want_file(rel):
                    size = _int_or_none(_field(row, "content_details", "size") or _field(row, "size"))
                    sha = _field(row, "content_details", "sha256_hash") or None
                    items.append(RemoteFile(url=url, dest=safe_relpath(rel), size=size, sha256=sha))
        if not items:
            raise DownloadError(f"{api}: the Mendeley listing holds none of the files this benchmark needs")
        for item in items:
            job.get(item)

    return run


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder + "/")


def _ecsmp_folder(path: str) -> bool:
    """ECSMP folders worth listing: ``E4/`` and ``EEG_downsample/`` with their subfolders."""
    return _under(path, "E4") or _under(path, "EEG_downsample")


def _ecsmp_file(rel: str) -> bool:
    """ECSMP needs only ``scale.xlsx`` (root), ``E4/**/BVP.csv`` and everything under ``EEG_downsample/``."""
    if rel == "scale.xlsx" or _under(rel, "EEG_downsample"):
        return True
    return _under(rel, "E4") and rel.endswith("/BVP.csv")


def _physionet_sums(job: Job) -> dict[str, str]:
    """The project's ``SHA256SUMS.txt`` (relative path -> SHA-256), or empty when it is not published."""
    text = job.client.get_text(f"{job.base}/SHA256SUMS.txt", missing_ok=True) or ""
    sums: dict[str, str] = {}
    for line in text.splitlines():
        digest, _, name = line.strip().partition(" ")
        if re.fullmatch(r"[0-9a-fA-F]{64}", digest) and name.strip():
            sums[name.strip().lstrip("*")] = digest.lower()
    return sums


def _physionet_file(job: Job, rel: str, sums: dict[str, str]) -> RemoteFile:
    return RemoteFile(url=f"{job.base}/{urllib.parse.quote(rel)}", dest=rel, sha256=sums.get(rel))


def _bidmc(job: Job) -> None:
    """The 106 CSVs ``bidmc_csv/bidmc_NN_{Signals,Numerics}.csv`` for NN = 01..53."""
    sums = _physionet_sums(job)
    for n in range(1, 54):
        for kind in ("Signals", "Numerics"):
            job.get(_physionet_file(job, f"bidmc_csv/bidmc_{n:02d}_{kind}.csv", sums))


def _quality_one_records(path: Path) -> list[str]:
    """Record IDs with ``Quality == 1`` in BUT-PPG's ``quality-hr-ann.csv`` (UTF-8, maybe with a BOM)."""
    with path.open(encoding="utf-8-sig", newline="") as fh:
        reader = csv.DictReader(fh)
        fields = {(name or "").strip(): name for name in reader.fieldnames or []}
        if "ID" not in fields or "Quality" not in fields:
            raise DownloadError(f"{path}: expected columns ID and Quality")
        records: set[str] = set()
        for row in reader:
            rec = (row.get(fields["ID"]) or "").strip()
            try:
                good = float((row.get(fields["Quality"]) or "").strip()) == 1.0
            except ValueError:
                good = False
            if good:
                if not re.fullmatch(r"\d+", rec):
                    raise DownloadError(f"{path}: unexpected record ID {rec!r}")
                records.add(rec)
    return sorted(records)


def _butppg(job: Job) -> None:
    """The two CSVs, then ``<rec>/<rec>_PPG.dat`` and ``.hea`` for the records with Quality == 1."""
    sums = _physionet_sums(job)
    for name in ("subject-info.csv", "quality-hr-ann.csv"):
        job.get(_physionet_file(job, name, sums))
    records = _quality_one_records(job.folder / "quality-hr-ann.csv")
    if not records:
        raise DownloadError(f"{job.folder / 'quality-hr-ann.csv'}: no record has Quality == 1")
    for rec in records:
        for ext in (".hea", ".dat"):
            job.get(_physionet_file(job, f"{rec}/{rec}_PPG{ext}", sums))


_HREF = re.compile(r"""href\s*=\s*["']([^"']+)["']""", re.IGNORECASE)
_DREAMT_FILE = re.compile(r"S\d{3}_whole_df\.csv")


def _dreamt(job: Job) -> None:
    """Scrape the ``data_64Hz/`` listing for ``S###_whole_df.csv`` and fetch each file."""
    listing_url = f"{job.base}/data_64Hz/"
    html = job.client.get_text(listing_url) or ""
    names = sorted(
        {
            name
            for href in _HREF.findall(html)
            if _DREAMT_FILE.fullmatch(name := urllib.parse.unquote(href.split("?")[0]).rsplit("/", 1)[-1])
        }
    )
    if not names:
        raise DownloadError(f"{listing_url}: no S###_whole_df.csv files in the listing")
    sums = _physionet_sums(job)
    for name in names:
        job.get(_physionet_file(job, f"data_64Hz/{name}", sums))


def _physionet(key: str, project: str, version: str, run: Callable[[Job], None], **kw: bool) -> Source:
    """A PhysioNet source: the project page and its versioned file tree."""
    page = f"https://physionet.org/content/{project}/{version}/"
    return Source(key, page, f"{PHYSIONET_FILES}/{project}/{version}", run, **kw)


def _mendeley_page(dataset: str, version: int) -> str:
    return f"https://data.mendeley.com/datasets/{dataset}/{version}"


SOURCES: dict[str, Source] = {
    s.key: s
    for s in (
        Source(
            "dalia",
            "https://archive.ics.uci.edu/dataset/495/ppg+dalia",
            DALIA_ZIP_URL,
            _direct_archive("ppg+dalia.zip", nested=True),
        ),
        _physionet("dreamt", "dreamt", "2.1.0", _dreamt, credentialed=True),
        Source("wesad", "https://ubi29.informatik.uni-siegen.de/usi/data_wesad.html", WESAD_ZIP_URL,
               _direct_archive("WESAD.zip")),
        Source(
            "ecsmp",
            _mendeley_page("vn5nknh3mn", 2),
            MENDELEY_API,
            _mendeley("vn5nknh3mn", 2, want_folder=_ecsmp_folder, want_file=_ecsmp_file),
        ),
        Source("ppgbp", "https://doi.org/10.6084/m9.figshare.5459299.v5", FIGSHARE_API,
               _figshare(5459299, 5)),
        _physionet("bidmc", "bidmc", "1.0.0", _bidmc),
        _physionet("butppg", "butppg", "2.0.0", _butppg),
        Source(
            "realworldppg",
            _mendeley_page("yynb8t9x3d", 1),
            MENDELEY_API,
            _mendeley("yynb8t9x3d", 1, want_folder=lambda p: True, want_file=lambda p: True),
        ),
        Source("wildppg", "https://siplab.org/projects/WildPPG", WILDPPG_ZIP_URL,
               _direct_archive("WildPPG.zip")),
    )
}
