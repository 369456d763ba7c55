"""The raw-data downloader against a local HTTP server: resume, verification, safe extraction, sources."""

from __future__ import annotations

import hashlib
import io
import json
import stat
import sys
import tarfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ppgbench_pl.data.download import FAILED, SOURCES, download
from ppgbench_pl.data.download.archives import extract, marker_path
from ppgbench_pl.data.download.files import ChecksumLog, RemoteFile
from ppgbench_pl.data.download.http import Client
from ppgbench_pl.errors import ConfigError, DownloadError
from tests.data.http_fixture import FixtureServer, write_tar, zip_bytes

DATA = bytes(range(256)) * 1200  # 300 KiB, several read chunks


@pytest.fixture
def server() -> Iterator[FixtureServer]:
    with FixtureServer() as srv:
        yield srv


@pytest.fixture(autouse=True)
def _no_mirror_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in SOURCES:
        monkeypatch.delenv(f"PPGBENCH_MIRROR_{key.upper()}", raising=False)
    monkeypatch.delenv("PHYSIONET_PASSWORD", raising=False)


def _fetch(srv: FixtureServer, folder: Path, path: str, client: Client | None = None, **kw: object) -> bool:
    """One fetch; by default without retries, so a cut shows as a failure that the next run resumes."""
    log = ChecksumLog(folder)
    try:
        item = RemoteFile(url=srv.url(path), dest=path.lstrip("/"), **kw)  # type: ignore[arg-type]
        return (client or Client(progress=False, retries=0)).fetch(item, folder, log)
    finally:
        log.save()


def _run(srv: FixtureServer, key: str, root: Path, path: str, **kw: object) -> str:
    """Download one dataset with its base URL pointed at the local server; return its status."""
    mirrors = {key: srv.url(path)}
    return download([key], root, progress=False, mirrors=mirrors, **kw)[key]  # type: ignore[arg-type]


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


# --- one file: resume and verification ------------------------------------------------------------


def test_resume_after_cut_connection(server: FixtureServer, tmp_path: Path) -> None:
    server.files["/f.bin"] = DATA
    server.cut_once["/f.bin"] = 100_000
    with pytest.raises(DownloadError, match="run again to resume"):
        _fetch(server, tmp_path, "/f.bin", sha256=_sha(DATA))
    assert (tmp_path / "f.bin.part").stat().st_size == 100_000
    assert not (tmp_path / "f.bin").exists()
    assert _fetch(server, tmp_path, "/f.bin", sha256=_sha(DATA)) is True
    assert server.seen[-1].range == "bytes=100000-"
    assert (tmp_path / "f.bin").read_bytes() == DATA
    assert not (tmp_path / "f.bin.part").exists()


def test_cut_without_known_length_is_not_taken_as_complete(server: FixtureServer, tmp_path: Path) -> None:
    server.files["/f.bin"] = DATA
    server.cut_chunked_once["/f.bin"] = 50_000
    with pytest.raises(DownloadError, match="connection lost after 50000 bytes.*run again to resume"):
        _fetch(server, tmp_path, "/f.bin")
    assert not (tmp_path / "f.bin").exists()
    assert _fetch(server, tmp_path, "/f.bin") is True
    assert server.seen[-1].range == "bytes=50000-"
    assert (tmp_path / "f.bin").read_bytes() == DATA


def test_server_ignoring_range_restarts_cleanly(server: FixtureServer, tmp_path: Path) -> None:
    server.files["/f.bin"] = DATA
    server.ignore_range.add("/f.bin")
    (tmp_path / "f.bin.part").write_bytes(b"X" * 5000)  # stale bytes that must not survive
    assert _fetch(server, tmp_path, "/f.bin") is True
    assert server.seen[-1].range == "bytes=5000-"
    assert (tmp_path / "f.bin").read_bytes() == DATA
    recorded = json.loads((tmp_path / "checksums.json").read_text())
    assert recorded["f.bin"] == {"size": len(DATA), "sha256": _sha(DATA), "publisher_checksum": None}


def test_mismatching_content_range_restarts(server: FixtureServer, tmp_path: Path) -> None:
    server.files["/f.bin"] = DATA
    server.wrong_range.add("/f.bin")
    (tmp_path / "f.bin.part").write_bytes(DATA[:7000])
    assert _fetch(server, tmp_path, "/f.bin") is True
    assert [s.range for s in server.seen] == ["bytes=7000-", None]
    assert (tmp_path / "f.bin").read_bytes() == DATA


def test_unsatisfiable_range_restarts(server: FixtureServer, tmp_path: Path) -> None:
    server.files["/f.bin"] = DATA
    (tmp_path / "f.bin.part").write_bytes(DATA + b"extra")  # longer than the file: the server answers 416
    assert _fetch(server, tmp_path, "/f.bin") is True
    assert [s.range for s in server.seen] == [f"bytes={len(DATA) + 5}-", None]
    assert (tmp_path / "f.bin").read_bytes() == DATA


@pytest.mark.parametrize("kind", ["sha256", "md5"])
def test_checksum_mismatch_refused_and_file_deleted(server: FixtureServer, tmp_path: Path, kind: str) -> None:
    server.files["/f.bin"] = DATA
    with pytest.raises(DownloadError, match=f"{kind} checksum mismatch.*deleted"):
        _fetch(server, tmp_path, "/f.bin", **{kind: "0" * (64 if kind == "sha256" else 32)})
    assert list(tmp_path.iterdir()) == []


def test_md5_from_publisher_accepted(server: FixtureServer, tmp_path: Path) -> None:
    server.files["/f.bin"] = DATA
    assert _fetch(server, tmp_path, "/f.bin", md5=hashlib.md5(DATA).hexdigest(), size=len(DATA))
    assert json.loads((tmp_path / "checksums.json").read_text())["f.bin"]["publisher_checksum"] == "md5"


def test_size_mismatch_says_run_again(server: FixtureServer, tmp_path: Path) -> None:
    server.files["/f.bin"] = DATA
    expected = f"received {len(DATA)} of {len(DATA) + 10} bytes; run again to resume"
    with pytest.raises(DownloadError, match=expected):
        _fetch(server, tmp_path, "/f.bin", size=len(DATA) + 10)
    assert (tmp_path / "f.bin.part").exists() and not (tmp_path / "f.bin").exists()


def test_html_page_refused(server: FixtureServer, tmp_path: Path) -> None:
    server.html.add("/f.bin")
    with pytest.raises(DownloadError, match="HTML page, not data"):
        _fetch(server, tmp_path, "/f.bin")
    assert not (tmp_path / "f.bin").exists()


def test_rerun_skips_complete_file_without_request(server: FixtureServer, tmp_path: Path) -> None:
    server.files["/f.bin"] = DATA
    assert _fetch(server, tmp_path, "/f.bin") is True
    n = len(server.seen)
    assert _fetch(server, tmp_path, "/f.bin") is False
    assert _fetch(server, tmp_path, "/f.bin", sha256=_sha(DATA), size=len(DATA)) is False
    assert len(server.seen) == n
    (tmp_path / "f.bin").write_bytes(b"tampered")  # differs from the recorded SHA-256: fetched again
    assert _fetch(server, tmp_path, "/f.bin") is True
    assert (tmp_path / "f.bin").read_bytes() == DATA


def test_unsafe_destination_from_listing_refused() -> None:
    for bad in ("../x", "/etc/x", "a/../../x", "a\\b", ""):
        with pytest.raises(DownloadError, match="unsafe file name"):
            RemoteFile(url="http://127.0.0.1/x", dest=bad)


# --- archives ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["../evil.txt", "/abs_evil.txt", "ok/../../evil.txt"])
def test_archive_member_outside_target_refused(tmp_path: Path, name: str) -> None:
    target = tmp_path / "ds"
    zpath = tmp_path / "a.zip"
    zpath.write_bytes(zip_bytes({"good.txt": b"ok", name: b"evil"}))
    with pytest.raises(DownloadError, match="outside"):
        extract(zpath, target)
    tpath = tmp_path / "a.tar"
    write_tar(tpath, [(tarfile.TarInfo("good.txt"), b"ok"), (tarfile.TarInfo(name), b"evil")])
    with pytest.raises(DownloadError, match="outside"):
        extract(tpath, target)
    assert not (tmp_path / "evil.txt").exists() and not Path("/abs_evil.txt").exists()
    assert list(target.iterdir()) == []  # checked before anything is written
    assert not marker_path(zpath).exists()


def test_symlink_members_refused(tmp_path: Path) -> None:
    zpath = tmp_path / "l.zip"
    info = zipfile.ZipInfo("link")
    info.create_system = 3
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    with zipfile.ZipFile(zpath, "w") as zf:
        zf.writestr(info, "/etc/passwd")
    with pytest.raises(DownloadError, match="symbolic link"):
        extract(zpath, tmp_path / "z")
    for kind in (tarfile.SYMTYPE, tarfile.LNKTYPE):
        link = tarfile.TarInfo("link")
        link.type, link.linkname = kind, "good.txt"
        tpath = tmp_path / f"l{kind!r}.tar"
        write_tar(tpath, [(tarfile.TarInfo("good.txt"), b"ok"), (link, None)])
        with pytest.raises(DownloadError, match="link member"):
            extract(tpath, tmp_path / "t")
        assert not (tmp_path / "t" / "good.txt").exists()


def test_tar_extracts_with_marker(tmp_path: Path) -> None:
    tpath = tmp_path / "a.tar"
    write_tar(tpath, [(tarfile.TarInfo("d/x.txt"), b"x")])
    assert extract(tpath, tmp_path / "out") is True
    assert (tmp_path / "out" / "d" / "x.txt").read_bytes() == b"x"
    assert extract(tpath, tmp_path / "out") is False


def test_nested_zip_extraction_and_marker(tmp_path: Path) -> None:
    e4 = zip_bytes({"BVP.csv": b"1\n64\n0.5\n"})
    inner = zip_bytes({"PPG_FieldStudy/S1/S1.pkl": b"pkl", "PPG_FieldStudy/S1/S1_E4.zip": e4})
    outer = tmp_path / "ppg+dalia.zip"
    outer.write_bytes(zip_bytes({"data.zip": inner, "readme.pdf": b"pdf"}))
    target = tmp_path / "dalia"
    assert extract(outer, target, nested=True) is True
    assert (target / "data" / "PPG_FieldStudy" / "S1" / "S1.pkl").read_bytes() == b"pkl"
    assert (target / "data" / "PPG_FieldStudy" / "S1" / "S1_E4" / "BVP.csv").exists()
    assert marker_path(target / "data.zip").exists() and marker_path(outer).exists()
    (target / "readme.pdf").unlink()
    assert extract(outer, target, nested=True) is False  # the marker makes a rerun skip
    assert not (target / "readme.pdf").exists()


# --- sources end to end ------------------------------------------------------------------------------


def test_direct_archive_dataset_and_rerun_makes_no_request(server: FixtureServer, tmp_path: Path) -> None:
    server.files["/WESAD.zip"] = zip_bytes({"WESAD/S2/S2.pkl": b"pkl"})
    assert _run(server, "wesad", tmp_path, "/WESAD.zip") == "ok: 1 fetched, 0 already present"
    assert (tmp_path / "wesad" / "WESAD" / "S2" / "S2.pkl").read_bytes() == b"pkl"
    src = json.loads((tmp_path / "wesad" / "source.json").read_text())
    assert src["key"] == "wesad" and src["source"] == SOURCES["wesad"].page
    n = len(server.seen)
    assert _run(server, "wesad", tmp_path, "/WESAD.zip") == "ok: 0 fetched, 1 already present"
    assert len(server.seen) == n


def test_mirror_from_environment(
    server: FixtureServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.files["/w.zip"] = zip_bytes({"WildPPG_Part_an0.mat": b"mat"})
    monkeypatch.setenv("PPGBENCH_MIRROR_WILDPPG", server.url("/w.zip"))
    assert download(["wildppg"], tmp_path, progress=False)["wildppg"].startswith("ok")
    assert (tmp_path / "wildppg" / "WildPPG_Part_an0.mat").exists()


def test_figshare_listing_drives_the_zip_fetch(server: FixtureServer, tmp_path: Path) -> None:
    body = zip_bytes({"Data File/PPG-BP dataset.xlsx": b"xlsx", "Data File/0_subject/2_1.txt": b"1\t2"})
    server.files["/dl/1"] = body
    server.files["/dl/2"] = b"not wanted"
    listing = {
        "files": [
            {"name": "notes.txt", "size": 10, "download_url": server.url("/dl/2"), "computed_md5": "x"},
            {"name": "PPG-BP Database.zip", "size": len(body), "download_url": server.url("/dl/1"),
             "computed_md5": hashlib.md5(body).hexdigest(), "supplied_md5": ""},
        ]
    }
    server.files["/fs/articles/5459299/versions/5"] = json.dumps(listing).encode()
    status = _run(server, "ppgbp", tmp_path, "/fs")
    assert status.startswith("ok"), status
    assert server.paths_seen() == ["/fs/articles/5459299/versions/5", "/dl/1"]
    assert (tmp_path / "ppgbp" / "Data File" / "PPG-BP dataset.xlsx").exists()
    listing["files"][1]["computed_md5"] = "0" * 32  # a wrong publisher MD5 fails the dataset
    server.files["/fs/articles/5459299/versions/5"] = json.dumps(listing).encode()
    status = _run(server, "ppgbp", tmp_path / "again", "/fs")
    assert status.startswith(FAILED) and "md5 checksum mismatch" in status


def _mendeley_row(
    server: FixtureServer, name: str, body: bytes, *, sha: str | None = None
) -> dict[str, object]:
    path = f"/files/{len(server.files)}"
    server.files[path] = body
    details = {"download_url": server.url(path), "size": len(body), "sha256_hash": sha or _sha(body)}
    return {"filename": name, "size": len(body), "content_details": details}


def test_mendeley_listing_selects_ecsmp_files(server: FixtureServer, tmp_path: Path) -> None:
    api = "/md/datasets/vn5nknh3mn"
    folders = [
        {"id": "f1", "name": "E4"},
        {"id": "f2", "name": "001", "parent_id": "f1"},
        {"id": "f3", "name": "EEG_downsample", "parent_id": None},
        {"id": "f4", "name": "Video"},
    ]
    server.files[f"{api}/folders/2"] = json.dumps(folders).encode()
    rows = {
        "root": [_mendeley_row(server, "scale.xlsx", b"xl"), _mendeley_row(server, "readme.pdf", b"pdf")],
        "f1": [],
        "f2": [_mendeley_row(server, "BVP.csv", b"bvp"), _mendeley_row(server, "ACC.csv", b"acc")],
        "f3": [_mendeley_row(server, "EEG_001.mat", b"eeg")],
        "f4": [_mendeley_row(server, "clip.mp4", b"mp4")],
    }
    for fid, listing in rows.items():
        server.files[f"{api}/files?folder_id={fid}&version=2"] = json.dumps(listing).encode()
    status = _run(server, "ecsmp", tmp_path, "/md")
    assert status == "ok: 3 fetched, 0 already present", status
    folder = tmp_path / "ecsmp"
    got = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    assert got == [
        ".download.lock", "E4/001/BVP.csv", "EEG_downsample/EEG_001.mat", "checksums.json", "scale.xlsx", "source.json"
    ]
    assert not any("folder_id=f4" in p for p in server.paths_seen())  # unwanted folders are not listed


def test_mendeley_all_files_and_sha256_checked(server: FixtureServer, tmp_path: Path) -> None:
    api = "/md/datasets/yynb8t9x3d"
    # no folders endpoint at all: a flat dataset
    listing = [
        _mendeley_row(server, "train8.xlsx", b"tr"),
        _mendeley_row(server, "test8.xlsx", b"te", sha="ab" * 32),  # the publisher's hash does not match
    ]
    server.files[f"{api}/files?folder_id=root&version=1"] = json.dumps(listing).encode()
    status = _run(server, "realworldppg", tmp_path, "/md")
    assert status.startswith(FAILED) and "sha256 checksum mismatch" in status
    assert (tmp_path / "realworldppg" / "train8.xlsx").exists()
    assert not (tmp_path / "realworldppg" / "test8.xlsx").exists()
    assert not (tmp_path / "realworldppg" / "source.json").exists()


def test_butppg_fetches_only_quality_one_records(server: FixtureServer, tmp_path: Path) -> None:
    base = "/pn/butppg/2.0.0"
    server.files[f"{base}/subject-info.csv"] = b"ID,Blood pressure [mmHg]\n100001,120/80\n"
    quality = "\ufeffID,Quality,HR\n100001,1,70\n100002,0,80\n100003,1,90\n".encode()
    server.files[f"{base}/quality-hr-ann.csv"] = quality
    for rec in ("100001", "100002", "100003"):
        for ext in (".dat", ".hea"):
            server.files[f"{base}/{rec}/{rec}_PPG{ext}"] = f"{rec}{ext}".encode()
    server.files[f"{base}/SHA256SUMS.txt"] = f"{_sha(quality)} quality-hr-ann.csv\n".encode()
    status = _run(server, "butppg", tmp_path, base)
    assert status == "ok: 6 fetched, 0 already present", status
    assert not any("100002" in p for p in server.paths_seen())
    assert (tmp_path / "butppg" / "100003" / "100003_PPG.dat").read_bytes() == b"100003.dat"
    assert json.loads((tmp_path / "butppg" / "checksums.json").read_text())["quality-hr-ann.csv"][
        "publisher_checksum"
    ] == "sha256"


def test_bidmc_fetches_the_106_csvs(server: FixtureServer, tmp_path: Path) -> None:
    base = "/pn/bidmc/1.0.0"
    for n in range(1, 54):
        for kind in ("Signals", "Numerics"):
            server.files[f"{base}/bidmc_csv/bidmc_{n:02d}_{kind}.csv"] = f"{n},{kind}".encode()
    status = _run(server, "bidmc", tmp_path, base)
    assert status == "ok: 106 fetched, 0 already present"
    status = _run(server, "bidmc", tmp_path, base)
    assert status == "ok: 0 fetched, 106 already present"


_LISTING = """<html><body><h1>Index of data_64Hz</h1><ul>
<li><a href="../">Parent</a></li>
<li><a href="S002_whole_df.csv">S002_whole_df.csv</a></li>
<li><a href='S010_whole_df.csv'>S010_whole_df.csv</a></li>
<li><a href="S002_whole_df.csv.bak">backup</a></li><li><a href="info.txt">info</a></li>
</ul></body></html>"""


def _dreamt_server(server: FixtureServer, password: str) -> str:
    base = "/pn/dreamt/2.1.0"
    server.auth[base] = ("alice", password)
    server.files[f"{base}/data_64Hz/"] = _LISTING.encode()
    server.content_types[f"{base}/data_64Hz/"] = "text/html"
    for sid in ("S002", "S010"):
        server.files[f"{base}/data_64Hz/{sid}_whole_df.csv"] = f"BVP,Sleep_Stage\n1.0,W\n{sid}\n".encode()
    return base


def test_dreamt_listing_scrape_with_basic_auth(
    server: FixtureServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "s3cr3t-Passw0rd"
    base = _dreamt_server(server, secret)
    monkeypatch.setenv("PHYSIONET_PASSWORD", secret)
    status = _run(server, "dreamt", tmp_path, base, physionet_user="alice")
    assert status == "ok: 2 fetched, 0 already present", status
    fetched = [p for p in server.paths_seen() if p.endswith(".csv")]
    assert fetched == [f"{base}/data_64Hz/S002_whole_df.csv", f"{base}/data_64Hz/S010_whole_df.csv"]
    assert all(s.authorization for s in server.seen)
    for path in tmp_path.rglob("*"):  # the password never reaches the disk
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def test_dreamt_prompts_for_the_password_on_a_terminal(
    server: FixtureServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = _dreamt_server(server, "typed-secret")
    monkeypatch.setattr("ppgbench_pl.data.download._stdin_is_tty", lambda: True)
    monkeypatch.setattr("getpass.getpass", lambda prompt="": "typed-secret")
    assert _run(server, "dreamt", tmp_path, base, physionet_user="alice").startswith("ok")
    assert not any(b"typed-secret" in p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())


def test_dreamt_wrong_password_fails_without_leaking(
    server: FixtureServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = _dreamt_server(server, "right")
    monkeypatch.setenv("PHYSIONET_PASSWORD", "wrong-guess")
    status = _run(server, "dreamt", tmp_path, base, physionet_user="alice")
    assert status.startswith(FAILED) and "401" in status
    assert "wrong-guess" not in status


def test_dreamt_without_password_or_tty_refused(
    server: FixtureServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = _dreamt_server(server, "right")
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))

    def no_prompt(prompt: str = "") -> str:
        raise AssertionError("must not prompt without a terminal")

    monkeypatch.setattr("getpass.getpass", no_prompt)
    status = _run(server, "dreamt", tmp_path, base, physionet_user="alice")
    assert status.startswith(FAILED) and "PHYSIONET_PASSWORD" in status
    assert "user name" in _run(server, "dreamt", tmp_path, base)
    assert server.seen == []


def test_one_failure_does_not_stop_the_others(server: FixtureServer, tmp_path: Path) -> None:
    server.files["/d.zip"] = zip_bytes({"S1/S1.pkl": b"pkl"})
    mirrors = {"wesad": server.url("/missing.zip"), "dalia": server.url("/d.zip")}
    status = download(["wesad", "dalia"], tmp_path, progress=False, mirrors=mirrors)
    assert list(status) == ["wesad", "dalia"]
    assert status["wesad"].startswith(FAILED) and "HTTP 404" in status["wesad"]
    assert status["dalia"].startswith("ok")
    assert not (tmp_path / "wesad" / "source.json").exists() and (tmp_path / "dalia" / "source.json").exists()


def test_unknown_dataset_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="did you mean wesad"):
        download(["wesd"], tmp_path)


def test_every_source_has_a_public_https_default() -> None:
    assert sorted(SOURCES) == sorted(
        ["dalia", "dreamt", "wesad", "ecsmp", "ppgbp", "bidmc", "butppg", "realworldppg", "wildppg"]
    )
    for source in SOURCES.values():
        assert source.base_url.startswith("https://") and source.page.startswith("https://")
    assert [k for k, s in SOURCES.items() if s.credentialed] == ["dreamt"]


# --- stalls, retries, unknown lengths and --force -------------------------------------------------


def test_trickling_server_is_a_stall_that_fails_in_one_line(server: FixtureServer, tmp_path: Path) -> None:
    server.files["/f.bin"] = DATA
    server.trickle["/f.bin"] = 0.1  # one byte every 0.1 s: the socket never times out
    server.trickle_for = 3.0
    client = Client(progress=False, stall_s=0.5, retries=1, retry_wait_s=0)
    start = time.monotonic()
    with pytest.raises(DownloadError) as err:
        _fetch(server, tmp_path, "/f.bin", client)
    message = str(err.value)
    assert time.monotonic() - start < 4
    assert "\n" not in message and "stalled at" in message and f"of {len(DATA)} bytes" in message
    assert message.endswith("(tried 2 times); run again to resume")
    assert [s.range for s in server.seen][0] is None and server.seen[1].range.startswith("bytes=")
    assert not (tmp_path / "f.bin").exists() and (tmp_path / "f.bin.part").stat().st_size > 0


def test_silent_server_times_out_after_the_stall_limit(server: FixtureServer, tmp_path: Path) -> None:
    server.files["/f.bin"] = DATA
    server.silent.add("/f.bin")
    server.trickle_for = 3.0
    start = time.monotonic()
    with pytest.raises(DownloadError, match=r"connection lost after 0 of 307200 bytes \(no data for 0.4 s\)"):
        _fetch(server, tmp_path, "/f.bin", Client(progress=False, stall_s=0.4, retries=0))
    assert time.monotonic() - start < 3


def test_a_cut_is_retried_within_the_same_run(server: FixtureServer, tmp_path: Path) -> None:
    server.files["/f.bin"] = DATA
    server.cut_once["/f.bin"] = 100_000
    assert _fetch(server, tmp_path, "/f.bin", Client(progress=False, retries=1, retry_wait_s=0)) is True
    assert [s.range for s in server.seen] == [None, "bytes=100000-"]
    assert (tmp_path / "f.bin").read_bytes() == DATA


def test_cut_body_of_unknown_length_is_completed_not_recorded(server: FixtureServer, tmp_path: Path) -> None:
    server.files["/f.bin"] = DATA
    server.cut_unsized_once["/f.bin"] = 50_000  # no Content-Length, no checksum: the cut looks like an end
    assert _fetch(server, tmp_path, "/f.bin") is True
    assert (tmp_path / "f.bin").read_bytes() == DATA  # before: the 50000 bytes were kept as the file
    assert server.seen[1].range == "bytes=50000-"
    recorded = json.loads((tmp_path / "checksums.json").read_text())["f.bin"]
    assert recorded["size"] == len(DATA) and recorded["sha256"] == _sha(DATA)


def test_whole_body_of_unknown_length_is_confirmed_by_the_server(server: FixtureServer, tmp_path: Path) -> None:
    server.files["/f.bin"] = DATA
    server.cut_unsized_once["/f.bin"] = len(DATA)
    assert _fetch(server, tmp_path, "/f.bin") is True
    assert [s.range for s in server.seen] == [None, f"bytes={len(DATA)}-"]  # answered 416: that was all
    assert (tmp_path / "f.bin").read_bytes() == DATA


def test_unknown_length_checked_against_a_full_answer(server: FixtureServer, tmp_path: Path) -> None:
    server.files["/f.bin"] = DATA
    server.cut_unsized_once["/f.bin"] = 60_000
    server.ignore_range.add("/f.bin")  # the probe gets the whole file with its Content-Length
    with pytest.raises(DownloadError, match=f"received 60000 of {len(DATA)} bytes; run again"):
        _fetch(server, tmp_path, "/f.bin")
    assert not (tmp_path / "f.bin").exists()


def test_force_fetches_and_extracts_again(server: FixtureServer, tmp_path: Path) -> None:
    server.files["/WESAD.zip"] = zip_bytes({"WESAD/S2/S2.pkl": b"pkl"})
    assert _run(server, "wesad", tmp_path, "/WESAD.zip") == "ok: 1 fetched, 0 already present"
    pkl = tmp_path / "wesad" / "WESAD" / "S2" / "S2.pkl"
    pkl.write_bytes(b"damaged")
    server.files["/WESAD.zip"] = zip_bytes({"WESAD/S2/S2.pkl": b"new"})
    assert _run(server, "wesad", tmp_path, "/WESAD.zip") == "ok: 0 fetched, 1 already present"
    assert pkl.read_bytes() == b"damaged"
    assert _run(server, "wesad", tmp_path, "/WESAD.zip", force=True) == "ok: 1 fetched, 0 already present"
    assert pkl.read_bytes() == b"new"
    recorded = json.loads((tmp_path / "wesad" / "checksums.json").read_text())
    assert recorded["WESAD.zip"]["sha256"] == _sha(server.files["/WESAD.zip"])


def test_force_on_a_single_file(server: FixtureServer, tmp_path: Path) -> None:
    server.files["/f.bin"] = DATA
    assert _fetch(server, tmp_path, "/f.bin") is True
    assert _fetch(server, tmp_path, "/f.bin") is False
    (tmp_path / "f.bin.part").write_bytes(b"junk")
    assert _fetch(server, tmp_path, "/f.bin", Client(progress=False, force=True)) is True
    assert [s.range for s in server.seen] == [None, None]
    assert (tmp_path / "f.bin").read_bytes() == DATA


def test_download_passes_stall_settings(server: FixtureServer, tmp_path: Path) -> None:
    server.files["/WESAD.zip"] = zip_bytes({"WESAD/S2/S2.pkl": b"pkl"})
    server.silent.add("/WESAD.zip")
    server.trickle_for = 2.0
    status = _run(server, "wesad", tmp_path, "/WESAD.zip", stall_s=0.3, retries=0)
    assert status.startswith(FAILED) and "no data for 0.3 s" in status and "\n" not in status


@pytest.mark.parametrize("kw", [{"stall_s": 0}, {"retries": -1}])
def test_bad_client_settings_are_refused(kw: dict[str, float]) -> None:
    with pytest.raises(DownloadError):
        Client(progress=False, **kw)  # type: ignore[arg-type]


def test_second_download_into_the_same_folder_is_refused(server: FixtureServer, tmp_path: Path) -> None:
    import os

    from ppgbench_pl.locks import file_lock

    server.files["/WESAD.zip"] = zip_bytes({"WESAD/S2/S2.pkl": b"pkl"})
    (tmp_path / "wesad").mkdir()
    with file_lock(tmp_path / "wesad" / ".download.lock"):  # another download mid-way (its own open file)
        status = _run(server, "wesad", tmp_path, "/WESAD.zip")
        assert status.startswith(FAILED) and f"another download of wesad is running (pid {os.getpid()} on " in status
        assert server.seen == []
    assert _run(server, "wesad", tmp_path, "/WESAD.zip").startswith("ok")  # released: free again
    assert (tmp_path / "wesad" / ".download.lock").read_text() == ""
    assert os.path.exists(tmp_path / "wesad" / "WESAD" / "S2" / "S2.pkl")
