"""The torch-free encoder catalog (``ppgbench list encoders``) agrees with the real classes, stays light."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

from ppgbench_pl.encoders import ENCODERS, FOUNDATION_MODELS
from ppgbench_pl.encoders.catalog import CATALOG, REGISTERED, ROLES, WINDOW_SECONDS
from ppgbench_pl.encoders.custom import CustomEncoder
from tests.encoders.test_custom import TinyConvNet
from tests.encoders.test_registry import build_encoder


def test_catalog_covers_the_registry_and_the_custom_wrapper() -> None:
    from ppgbench_pl.encoders.base import PPGEncoder

    assert set(CATALOG) == set(REGISTERED) | {"custom"}
    for name in ENCODERS:  # every torch-free entry names the class the registry really imports
        cls = ENCODERS[name]
        assert issubclass(cls, PPGEncoder) and f"{cls.__module__}.{cls.__qualname__}" == CATALOG[name].class_path
    assert all(entry.name == name and entry.role in ROLES for name, entry in CATALOG.items())
    assert all(e.published.host in ("zenodo", "huggingface", "github") for e in CATALOG.values() if e.published)
    assert {n for n, e in CATALOG.items() if e.role == "control"} == {"prv_neurokit2", "prv_published", "moment_small"}
    assert {n for n, e in CATALOG.items() if e.role == "test"} == {"small_cnn"}


@pytest.mark.parametrize("name", REGISTERED)
def test_entry_matches_the_class(name: str) -> None:
    entry = CATALOG[name]
    module, _, attr = entry.class_path.rpartition(".")
    cls = getattr(importlib.import_module(module), attr)
    assert cls is ENCODERS[name] and cls.name == name
    encoder = build_encoder(name)  # published ones with random_init=True
    unique = {id(p): p.numel() for p in encoder.parameters()}
    assert entry.parameters == sum(unique.values())
    assert (entry.native_fs, entry.embedding_dim, entry.min_samples) == (
        encoder.sampling_rate, encoder.embed_dim, encoder.min_samples)
    lengths = tuple(round(s * encoder.sampling_rate) for s in WINDOW_SECONDS)
    if name == "sigmappg":  # cropped to whole 100-sample patches
        lengths = tuple(n - n % 100 for n in lengths)
    assert entry.window_samples == lengths and min(lengths) >= encoder.min_samples
    assert entry.checkpoint_required == (cls.weights_source is not None) == (name in FOUNDATION_MODELS)
    if entry.checkpoint_required:
        assert entry.weights_url is not None and entry.weights_url in cls.weights_source
    else:
        assert entry.weights_url is None


def test_custom_entry_matches_the_wrapper() -> None:
    entry = CATALOG["custom"]
    assert entry.class_path == f"{CustomEncoder.__module__}.{CustomEncoder.__qualname__}"
    assert entry.checkpoint_required and entry.role == "model"
    assert (entry.native_fs, entry.embedding_dim, entry.parameters) == (None, None, None)
    CustomEncoder(TinyConvNet(), sampling_rate=32.0, pooling="mean", random_init=True)  # it builds


def test_importing_the_catalog_imports_no_torch() -> None:
    """``ppgbench list`` starts fast because the catalog (and the package) stay torch-free (the time itself is
    measured by tools/bench_startup.py, not here)."""
    code = ("import json, sys; import ppgbench_pl.encoders.catalog as c; "
            "import ppgbench_pl.encoders as e; names = list(e.ENCODERS); "
            "heavy = [m for m in ('torch', 'numpy', 'transformers', 'lightning', "
            "'ppgbench_pl.encoders.base') if m in sys.modules]; "
            "print(json.dumps({'heavy': heavy, 'n': len(c.CATALOG)}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    result = json.loads(out.stdout)
    assert result["heavy"] == [] and result["n"] == len(CATALOG)


def test_a_catalog_class_that_sets_another_rate_is_refused_not_overwritten():
    """The catalog holds a published encoder's name, rate and sizes; a class body that disagrees is an error."""
    import pytest

    from ppgbench_pl.encoders.base import PPGEncoder
    from ppgbench_pl.encoders.catalog import CATALOG

    entry = next(e for e in CATALOG.values() if e.native_fs is not None)
    module, qualname = entry.class_path.rsplit(".", 1)
    with pytest.raises(TypeError, match=r"sampling_rate differ from its catalog entry"):
        type(qualname, (PPGEncoder,), {"__module__": module, "__qualname__": qualname,
                                       "sampling_rate": entry.native_fs + 1})
    agreeing = type(qualname, (PPGEncoder,), {"__module__": module, "__qualname__": qualname,
                                              "sampling_rate": entry.native_fs})
    assert (agreeing.name, agreeing.embed_dim) == (entry.name, entry.embedding_dim)
