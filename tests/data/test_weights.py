"""Published weights by name (issue 34): fetched from a 127.0.0.1 stand-in of Zenodo, the Hugging Face hub and
GitHub, verified, pinned, cached and used by ``fit``; and every way a download can go wrong, in one line."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from ppgbench_pl.benchmark.weights import DESCRIPTION, MARKER, PUBLISHED, entries
from tests.cli_helpers import run_cli
from tests.data.http_fixture import zip_bytes
from tests.data.weights_hub import WeightsHub, checkpoint_files, md5, publish, sha256

ROOT = Path(__file__).resolve().parents[2]
PAPAGEI = "/zenodo/api/records/13983110"
BODY = bytes(range(256)) * 800  # stands for a checkpoint where only the transfer is under test


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[WeightsHub]:
    with WeightsHub() as srv:
        srv.point_at(monkeypatch)
        yield srv


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("weights_fit_data")


def fit(name: str, out: Path, data: Path, weights: Path, *extra: str) -> list[str]:
    """The smallest run: one task, one seed, one fold, the linear regime, no controls."""
    return ["fit", "--config", str(ROOT / "configs/quickstart.yaml"), "--config",
            str(ROOT / f"configs/encoders/{name}.yaml"), "--output_dir", str(out), "--data.init_args.root", str(data),
            "--data.init_args.synthetic_subjects", "5", "--data.init_args.synthetic_windows", "2",
            "--data.init_args.seeds", "[42]", "--data.init_args.folds", "[0]", "--data.init_args.tasks",
            "[synthetic-hr]", "--controls", "[]", "--progress", "false", "--weights_dir", str(weights), *extra]


def download(weights: Path, *names: str, extra: tuple[str, ...] = ()) -> list[str]:
    return ["download", "--weights", *names, "--weights_dir", str(weights), "--no-progress", *extra]


def loaded_bytes(name: str, files: dict[str, bytes]) -> bytes:
    """What the encoder reads: the file itself, the archive member, or MOMENT's safetensors."""
    if name == "pulseppg":
        import io
        import zipfile

        with zipfile.ZipFile(io.BytesIO(files["pulseppg_model_weights.zip"])) as zf:
            return zf.read(PUBLISHED[name].checkpoint)
    return files["model.safetensors" if name == "moment_small" else PUBLISHED[name].checkpoint]


@pytest.mark.parametrize("name", list(PUBLISHED))
def test_fit_fetches_the_published_weights_by_name_then_downloads_nothing(
        name: str, hub: WeightsHub, data_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = checkpoint_files(name)
    publish(hub, name, files)
    weights, out = tmp_path / "weights", tmp_path / "run"
    code, _, err = run_cli(fit(name, out, data_root, weights, "--fetch_weights"), capsys)
    assert code == 0, err
    assert f"{name}: ok: " in err and "fetched" in err
    assert ("unpinned" in err) == (PUBLISHED[name].revision is None)
    records = [json.loads(p.read_text()) for p in out.glob("jobs/*/results.json")]
    assert [r["status"] for r in records] == ["ok"]
    identity = json.loads((out / "run.json").read_text())["identity"]
    assert identity["encoders"][name]["weights"] == sha256(loaded_bytes(name, files))  # what was loaded
    [entry] = entries(weights)
    assert entry["complete"] and entry["model"] == name
    asked = len(hub.seen)
    code, out_text, err = run_cli(fit(name, out, data_root, weights), capsys)  # no --fetch_weights needed now
    assert code == 0 and "0 jobs run, 1 already done" in out_text, err
    code, out_text, _ = run_cli(download(weights, name), capsys)
    assert code == 0 and f"{name}: ok: already present, verified" in out_text
    assert len(hub.seen) == asked  # the second run and the download asked the network for nothing


def test_wrong_checksum_is_refused_in_one_line_and_the_file_deleted(hub: WeightsHub, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    hub.zenodo("13983110", {"papagei_p.pt": BODY}, checksums={"papagei_p.pt": f"md5:{md5(b'the real one')}"})
    weights = tmp_path / "w"
    code, out, err = run_cli(download(weights, "papagei_p"), capsys)
    assert code == 1 and out == "" and err.count("\n") == 1
    assert err.startswith("papagei_p: failed: ") and "md5 checksum mismatch" in err and "deleted" in err
    folder = weights / "papagei_p" / "13983110"
    assert not (folder / "papagei_p.pt").exists() and not (folder / "papagei_p.pt.part").exists()
    assert [e["complete"] for e in entries(weights)] == [False]
    code, out, _ = run_cli(["cache", "list", "--weights", "--weights_dir", str(weights)], capsys)
    assert code == 0 and "incomplete" in out
    hub.zenodo("13983110", {"papagei_p.pt": BODY})  # the publisher fixed it: the next run succeeds
    code, out, _ = run_cli(download(weights, "papagei_p"), capsys)
    assert code == 0 and "1 file(s) fetched" in out and (folder / "papagei_p.pt").read_bytes() == BODY


def test_a_hub_file_that_differs_from_the_published_sha256_is_refused(hub: WeightsHub, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    pub = PUBLISHED["moment_small"]
    files = {"config.json": b"{}", "model.safetensors": BODY}
    hub.hub(pub.repo, str(pub.revision), files, lfs=("model.safetensors",),
            published={"model.safetensors": BODY[:-1] + b"X"})
    weights = tmp_path / "w"
    code, _, err = run_cli(download(weights, "moment_small"), capsys)
    assert code == 1 and err.count("\n") == 1 and "checksum mismatch (sha256 " in err
    assert not (weights / "moment_small" / str(pub.revision) / "model.safetensors").exists()


def test_a_truncated_download_is_resumed_by_the_next_run(hub: WeightsHub, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    hub.zenodo("13983110", {"papagei_p.pt": BODY})
    content = f"{PAPAGEI}/files/papagei_p.pt/content"
    hub.cut_once[content] = 50_000
    weights = tmp_path / "w"
    code, _, err = run_cli(download(weights, "papagei_p", extra=("--retries", "0")), capsys)
    assert code == 1 and err.count("\n") == 1 and "run again to resume" in err
    part = weights / "papagei_p" / "13983110" / "papagei_p.pt.part"
    assert part.stat().st_size == 50_000
    code, out, _ = run_cli(download(weights, "papagei_p"), capsys)
    assert code == 0 and "1 file(s) fetched" in out
    assert hub.seen[-1].path == content and hub.seen[-1].range == "bytes=50000-"
    assert (weights / "papagei_p" / "13983110" / "papagei_p.pt").read_bytes() == BODY and not part.exists()


def test_a_cut_hub_transfer_is_resumed_with_a_range_request(hub: WeightsHub, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    pub = PUBLISHED["moment_small"]
    big = BODY * 60  # 12 MB: huggingface_hub keeps what arrived in 10 MiB blocks, so the cut falls after one
    hub.hub(pub.repo, str(pub.revision), {"config.json": b"{}", "model.safetensors": big}, lfs=("model.safetensors",))
    path = f"/hf/{pub.repo}/resolve/{pub.revision}/model.safetensors"
    hub.cut_once[path] = 11_000_000
    weights = tmp_path / "w"
    code, out, err = run_cli(download(weights, "moment_small"), capsys)
    assert code == 0, err
    assert [s.range for s in hub.seen if s.path == path] == [None, f"bytes={10 * 1024 * 1024}-"]
    assert (weights / "moment_small" / str(pub.revision) / "model.safetensors").read_bytes() == big


def test_a_moved_revision_is_refused_unless_named(hub: WeightsHub, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    hub.zenodo("13983110", {"papagei_p.pt": BODY}, answered="14000001")  # a newer version answers now
    weights = tmp_path / "w"
    code, _, err = run_cli(download(weights, "papagei_p"), capsys)
    assert code == 1 and err.count("\n") == 1
    assert ("papagei_p: Zenodo record 13983110 answers with revision 14000001, but ppgbench pins 13983110; nothing "
            "was downloaded (to use it: --weights_revision papagei_p=14000001)") in err
    assert not (weights / "papagei_p").exists()
    hub.zenodo("14000001", {"papagei_p.pt": BODY})
    code, out, _ = run_cli(download(weights, "papagei_p", extra=("--weights_revision", "papagei_p=14000001")), capsys)
    assert code == 0 and "revision 14000001; not the pinned revision 13983110" in out
    pub = PUBLISHED["moment_small"]  # a hub asked for the pinned commit that answers with another is refused too
    hub.hub(pub.repo, str(pub.revision), {"config.json": b"{}", "model.safetensors": BODY}, commit="ab" * 20)
    code, _, err = run_cli(download(weights, "moment_small"), capsys)
    assert code == 1 and f"answers with revision {'ab' * 20}, but ppgbench pins {pub.revision}" in err
    assert not (weights / "moment_small").exists()


def test_an_archive_member_outside_its_folder_is_refused(hub: WeightsHub, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    hub.zenodo("17345536", {"pulseppg_model_weights.zip": zip_bytes({"../../escaped.pkl": b"x",
                                                                     PUBLISHED["pulseppg"].checkpoint: b"y"})})
    weights = tmp_path / "cache" / "w"
    code, _, err = run_cli(download(weights, "pulseppg"), capsys)
    assert code == 1 and err.count("\n") == 1 and "refusing member '../../escaped.pkl'" in err
    assert not list(tmp_path.rglob("escaped.pkl")) and not list(tmp_path.rglob("checkpoint_best.pkl"))
    assert [e["complete"] for e in entries(weights)] == [False]


def test_no_network_fails_in_one_line_per_model_and_writes_nothing(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    for env in ("PPGBENCH_MIRROR_ZENODO", "PPGBENCH_MIRROR_GITHUB_RAW", "PPGBENCH_MIRROR_GITHUB_MEDIA", "HF_ENDPOINT"):
        monkeypatch.setenv(env, dead)
    weights = tmp_path / "w"
    code, out, err = run_cli(download(weights, "papagei_p", "anyppg", "moment_small"), capsys)
    assert code == 1 and out == ""
    lines = err.splitlines()
    assert [line.split(":")[0] for line in lines] == ["papagei_p", "anyppg", "moment_small"]
    assert all(": failed: " in line for line in lines)
    assert "could not reach" in lines[0] and "could not reach" in lines[1] and "ConnectError" in lines[2]
    assert sorted(p.name for p in weights.iterdir()) == [".locks", MARKER]  # no model folder, nothing half-written


def test_fit_without_weights_refuses_as_before_and_a_dry_run_fetches_nothing(
        hub: WeightsHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hub.zenodo("13983110", {"papagei_p.pt": BODY})
    weights, out = tmp_path / "w", tmp_path / "run"
    code, _, err = run_cli(fit("papagei_p", out, tmp_path / "data", weights), capsys)
    assert code == 2 and err.count("\n") == 1  # fetching stays opt-in: the refusal of a run without weights
    assert err.startswith("ppgbench: error: papagei_p: no checkpoint given, so its weights would be random")
    code, _, err = run_cli(fit("papagei_p", out, tmp_path / "data", weights, "--fetch_weights", "--dry_run"), capsys)
    assert code == 2 and err.count("\n") == 1
    assert ("papagei_p: its published weights are not in " f"{weights} and a dry run fetches nothing; run `ppgbench "
            "download --weights papagei_p` first") in err
    assert hub.seen == [] and not out.exists() and not weights.exists()


def test_a_tampered_cached_file_is_not_used_and_is_fetched_again(hub: WeightsHub, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    hub.zenodo("13983110", {"papagei_p.pt": BODY})
    weights = tmp_path / "w"
    assert run_cli(download(weights, "papagei_p"), capsys)[0] == 0
    cached = weights / "papagei_p" / "13983110" / "papagei_p.pt"
    cached.write_bytes(BODY[:-1] + b"X")
    code, _, err = run_cli(fit("papagei_p", tmp_path / "run", tmp_path / "data", weights), capsys)
    assert code == 2 and "papagei_p: no checkpoint given" in err  # the tampered file is never loaded
    code, out, _ = run_cli(download(weights, "papagei_p"), capsys)
    assert code == 0 and "1 file(s) fetched" in out and cached.read_bytes() == BODY


def test_cache_lists_and_clears_only_what_ppgbench_described(hub: WeightsHub, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    hub.zenodo("13983110", {"papagei_p.pt": BODY, "papagei_s.pt": BODY[::-1]})
    weights = tmp_path / "w"
    assert run_cli(download(weights, "papagei_p", "papagei_s"), capsys)[0] == 0
    (weights / "my_notes.txt").write_text("mine")
    (weights / "papagei_p" / "my_own_copy").mkdir()  # no description: not ppgbench's
    code, out, _ = run_cli(["cache", "list", "--weights", "--weights_dir", str(weights)], capsys)
    assert code == 0 and out.startswith(f"{weights}: 2 entries") and out.count("verified") == 2
    code, out, _ = run_cli(["cache", "list", "--weights_dir", str(weights), "--json"], capsys)
    assert {e["model"]: e["files"][f"{e['model']}.pt"]["publisher_checksum"] for e in json.loads(out)} == {
        "papagei_p": "md5", "papagei_s": "md5"}
    code, out, _ = run_cli(["cache", "clear", "--weights", "--weights_dir", str(weights)], capsys)
    assert code == 0 and out.startswith("removed 2 weights entries")
    assert sorted(str(p.relative_to(weights)) for p in weights.rglob("*") if ".locks" not in p.parts) == [
        MARKER, "my_notes.txt", "papagei_p", "papagei_p/my_own_copy"]
    foreign = tmp_path / "not_ours"
    (foreign / "x" / "y").mkdir(parents=True)
    (foreign / "x" / "y" / DESCRIPTION).write_text("{}")
    code, _, err = run_cli(["cache", "clear", "--weights", "--weights_dir", str(foreign)], capsys)
    assert code == 2 and f"not a ppgbench weights cache (no {MARKER}); nothing was removed" in err and (foreign / "x" / "y").exists()


def test_unknown_model_and_missing_names_are_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run_cli(download(tmp_path, "papagei"), capsys)
    assert code == 2 and "--weights papagei: no published weights by that name; did you mean papagei_" in err
    assert "papagei_p" in err and err.count("\n") == 1
    code, _, err = run_cli(["download"], capsys)
    assert code == 2 and "name dataset keys, or models after --weights" in err
    code, _, err = run_cli(download(tmp_path, "papagei_p", extra=("--weights_revision", "papagei_p")), capsys)
    assert code == 2 and "write MODEL=REVISION" in err


def test_a_plain_git_file_is_fetched_without_a_publisher_checksum(hub: WeightsHub, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Not every repository keeps its checkpoint in Git LFS: then the raw file is the checkpoint."""
    pub = PUBLISHED["anyppg"]
    hub.files[f"/gh-raw/{pub.repo}/{pub.revision}/{pub.checkpoint}"] = BODY
    weights = tmp_path / "w"
    code, out, err = run_cli(download(weights, "anyppg"), capsys)
    assert code == 0, err
    [entry] = entries(weights)
    assert entry["files"][pub.checkpoint] == {"size": len(BODY), "sha256": sha256(BODY), "publisher_checksum": None}
    assert entry["loaded_sha256"] == {pub.checkpoint: sha256(BODY)}
    assert not any(s.path.startswith("/gh-media") for s in hub.seen)
