"""A 127.0.0.1 stand-in for where the six models' weights are published, and their checkpoints.

One server answers like Zenodo's records API (``/zenodo/api/records/<id>``, content under
``/files/<key>/content``), like the Hugging Face hub for ``model_info(files_metadata=True)`` and
``hf_hub_download`` at a revision (``/hf/api/models/<repo>/revision/<rev>``, ``HEAD``/``GET``
``/hf/<repo>/resolve/<rev>/<file>`` with ``X-Repo-Commit``, ``ETag``/``X-Linked-Etag`` and sizes), and like
GitHub (a Git LFS pointer under ``/gh-raw``, the content under ``/gh-media``). ``point_at`` sets the
environment variables that send ppgbench there. Checkpoints are written in each model's real container
format from random weights by the writers of the encoder tests.
"""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch
from safetensors.torch import save

from tests.data.http_fixture import FixtureServer, Seen, zip_bytes

#: Where each host's stand-in lives on the server.
PREFIX = {"zenodo": "/zenodo", "huggingface": "/hf", "github_raw": "/gh-raw", "github_media": "/gh-media"}


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class WeightsHub(FixtureServer):
    """The dataset fixture server plus ``HEAD`` with per-path headers and query strings ignored."""

    head_headers: dict[str, dict[str, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        base = self._server.RequestHandlerClass
        hub = self

        class Handler(base):  # type: ignore[valid-type,misc]
            def do_GET(self) -> None:
                self.path = self.path.split("?", 1)[0]
                super().do_GET()

            def do_HEAD(self) -> None:
                path = self.path.split("?", 1)[0]
                with hub._lock:
                    hub.seen.append(Seen(f"HEAD {path}", None, None))
                body = hub.files.get(path)
                self.send_response(404 if body is None else 200)
                for key, value in hub.head_headers.get(path, {}).items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body or b"")))
                self.end_headers()

        self._server.RequestHandlerClass = Handler

    def point_at(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Send ppgbench's weights downloads here (and let huggingface_hub go online, to 127.0.0.1 only)."""
        from huggingface_hub import constants

        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        for host, prefix in PREFIX.items():
            env = "HF_ENDPOINT" if host == "huggingface" else f"PPGBENCH_MIRROR_{host.upper()}"
            monkeypatch.setenv(env, self.base + prefix)

    # -- publishing -------------------------------------------------------------------------------------
    def zenodo(self, record: str, files: dict[str, bytes], *, answered: str | None = None,
               checksums: dict[str, str] | None = None) -> None:
        """A record version; ``answered``: the id the API says (a concept record redirected elsewhere)."""
        rec = answered or record
        listing = [{"key": key, "size": len(body), "checksum": (checksums or {}).get(key, f"md5:{md5(body)}"),
                    "links": {"self": f"{self.base}/zenodo/api/records/{rec}/files/{key}/content"}}
                   for key, body in files.items()]
        self.files[f"/zenodo/api/records/{record}"] = json.dumps({"id": int(rec), "files": listing}).encode()
        self.content_types[f"/zenodo/api/records/{record}"] = "application/json"
        for key, body in files.items():
            self.files[f"/zenodo/api/records/{rec}/files/{key}/content"] = body

    def hub(self, repo: str, revision: str, files: dict[str, bytes], *, commit: str | None = None,
            lfs: tuple[str, ...] = (), published: dict[str, bytes] | None = None) -> None:
        """A hub repository at ``revision`` (resolving to ``commit``); ``lfs`` files carry size and SHA-256.

        ``published``: what the API says a file holds, when it differs from what is served (a tampered file).
        """
        commit = commit or revision
        siblings = []
        for name, body in files.items():
            said = (published or {}).get(name, body)
            row: dict[str, Any] = {"rfilename": name, "size": len(said), "blobId": git_blob_id(said)}
            if name in lfs:
                row["lfs"] = {"size": len(said), "sha256": sha256(said), "pointerSize": 134}
            siblings.append(row)
            for rev in {revision, commit}:
                path = f"/hf/{repo}/resolve/{rev}/{name}"
                self.files[path] = body
                etag = sha256(said) if name in lfs else git_blob_id(said)
                self.head_headers[path] = {"X-Repo-Commit": commit, "ETag": f'"{etag}"'}
        api = f"/hf/api/models/{repo}/revision/{revision}"
        self.files[api] = json.dumps({"id": repo, "sha": commit, "siblings": siblings}).encode()
        self.content_types[api] = "application/json"

    def github(self, repo: str, commit: str, path: str, body: bytes) -> None:
        """A Git LFS file: the pointer in the repository, the content on the media host."""
        pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256(body)}\nsize {len(body)}\n"
        self.files[f"/gh-raw/{repo}/{commit}/{path}"] = pointer.encode()
        self.files[f"/gh-media/{repo}/{commit}/{path}"] = body


# -- each model's checkpoint in its authors' container format, from random weights --------------------
def _torch_bytes(obj: object) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def checkpoint_files(name: str) -> dict[str, bytes]:
    """The published files of ``name`` (file name -> bytes), holding the seeded random init of its class."""
    from ppgbench_pl.encoders import ENCODERS

    model = ENCODERS[name](random_init=True)  # type: ignore[call-arg]
    if name in ("papagei_p", "papagei_s"):  # a bare state dict saved from DataParallel
        return {f"{name}.pt": _torch_bytes({f"module.{k}": v for k, v in model.state_dict().items()})}
    if name == "anyppg":
        return {"load_anyppg/anyppg_ckpt.pth": _torch_bytes(model.state_dict())}
    if name == "sigmappg":
        from tests.encoders.test_sigmappg import sigma_checkpoint

        return {"sigma.pth": _torch_bytes(sigma_checkpoint(model))}  # type: ignore[arg-type]
    if name == "moment_small":
        from tests.encoders.test_moment import MANIFEST, full_state

        config = json.dumps(MANIFEST["constructor_kwargs"]["config"]).encode()
        return {"config.json": config, "model.safetensors": save(full_state(model))}  # type: ignore[arg-type]
    assert name == "pulseppg"
    from tests.encoders.test_pulseppg import _write_checkpoint

    buffer = io.BytesIO()
    _write_checkpoint(model, buffer)  # type: ignore[arg-type]
    return {"pulseppg_model_weights.zip": zip_bytes({
        "pulseppg/experiments/out/pulseppg/checkpoint_best.pkl": buffer.getvalue(),
        "pulseppg/experiments/out/motifdist/checkpoint_best.pkl": b"another network's weights"})}


def publish(hub: WeightsHub, name: str, files: dict[str, bytes]) -> None:
    """Publish ``files`` where the catalog says ``name``'s weights are, at the pinned version."""
    from ppgbench_pl.encoders.catalog import CATALOG

    pub = CATALOG[name].published
    assert pub is not None
    if pub.host == "zenodo":
        hub.zenodo(pub.revision or pub.repo, files)
    elif pub.host == "github":
        for path, body in files.items():
            hub.github(pub.repo, pub.revision or "HEAD", path, body)
    else:
        lfs = tuple(f for f in files if not f.endswith(".json"))
        hub.hub(pub.repo, pub.revision or "main", files, commit=pub.revision or "c0ffee" * 6 + "c0ff", lfs=lfs)
