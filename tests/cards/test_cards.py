"""Model and dataset cards (issue 21, parts 1-3): complete, in one vocabulary, and giving the known overlaps.

The overlap matrix below is Part 3 of the facts gathered for the cards (``docs/cards.md``); the rule in
``cards/overlap.py`` must reproduce it from the cards alone, so a card edit that changes a flag fails here.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from ppgbench_pl.cards import bibtex
from ppgbench_pl.cards.declaration import parse_declaration
from ppgbench_pl.cards.overlap import (
    card_declaration,
    overlap,
    record_fields,
    record_overlap,
)
from ppgbench_pl.cards.types import OVERLAPS, PretrainingSource
from ppgbench_pl.cards.vocabulary import BENCHMARK_DATASETS, COLLECTIONS, components, names
from ppgbench_pl.commands.listing import run_list
from ppgbench_pl.data.registry import CARDS, REAL_DATASETS
from ppgbench_pl.encoders.cards import MODEL_CARDS
from ppgbench_pl.encoders.catalog import CATALOG
from ppgbench_pl.errors import ConfigError
from tests.cards.bib_parse import pybtex_entries

DATASET_ORDER = ("dalia", "dreamt", "wesad", "ecsmp", "ppgbp", "bidmc", "butppg", "realworldppg", "wildppg")
# P direct, S source, N none, U unknown (SigmaPPG's N*: its pretraining list is partial, so U).
MATRIX = {
    "papagei_p": "NNNNNSNNN",
    "papagei_s": "NNNNNSNNN",
    "pulseppg": "NNNNNNNNN",
    "anyppg": "NNNNNSNNN",
    "sigmappg": "UUUUUSUUU",
    "moment_small": "NNNNNNNNN",
    "prv_published": "NNNNNNNNN",
    "prv_neurokit2": "NNNNNNNNN",
    "small_cnn": "NNNNNNNNN",
    "custom": "UUUUUUUUU",
}
LETTER = {"direct": "P", "source": "S", "none": "N", "unknown": "U"}


def test_every_encoder_entry_has_a_card_that_repeats_the_catalog() -> None:
    assert list(MODEL_CARDS) == list(CATALOG)
    for name, card in MODEL_CARDS.items():
        entry = CATALOG[name]
        assert (card.name, card.parameters, card.native_fs, card.weights_url) == (
            name, entry.parameters, entry.native_fs, entry.weights_url)
        assert card.weights_license_status in ("confirmed", "unconfirmed")


def test_one_vocabulary_for_pretraining_data_and_provenance() -> None:
    assert set(REAL_DATASETS) == set(DATASET_ORDER) == set(BENCHMARK_DATASETS)
    assert {"mimic-ii", "mimic-iii", "vitaldb", "mesa", "pulsedb"} <= set(COLLECTIONS)
    vocabulary = set(names())
    for card in MODEL_CARDS.values():
        if not isinstance(card.pretraining_data, str):
            assert {s.name for s in card.pretraining_data} <= vocabulary, card.name
    assert set(CARDS) == set(DATASET_ORDER)
    for key, card in CARDS.items():
        assert set(card.derived_from) <= vocabulary, key
    for collection in COLLECTIONS.values():
        assert set(collection.parts) <= vocabulary
    assert CARDS["bidmc"].derived_from == ("mimic-ii",)
    assert components("pulsedb") == {"pulsedb", "mimic-iii", "mimic-ii", "vitaldb"}


def test_statuses_are_carried_from_the_facts_never_upgraded() -> None:
    status = {s.name: s.status for s in MODEL_CARDS["papagei_s"].pretraining_data}  # type: ignore[union-attr]
    assert status == {"mesa": "confirmed", "mimic-iii": "confirmed", "vitaldb": "unconfirmed"}
    assert all(s.status == "unconfirmed" for s in MODEL_CARDS["sigmappg"].pretraining_data)  # type: ignore[union-attr]
    assert not MODEL_CARDS["sigmappg"].pretraining_complete
    assert MODEL_CARDS["custom"].pretraining_data == "unknown"
    assert MODEL_CARDS["papagei_p"].weights_license_status == "unconfirmed"
    assert all(card.license_status == "unconfirmed" for card in CARDS.values())  # none was read on its page


@pytest.mark.parametrize("model", MATRIX)
def test_the_cards_give_the_known_overlap_matrix(model: str) -> None:
    data, complete = card_declaration(model)
    row = "".join(LETTER[overlap(data, complete, d).value] for d in DATASET_ORDER)
    assert row == MATRIX[model]


def test_the_flag_says_what_it_rests_on() -> None:
    data, complete = card_declaration("sigmappg")
    flag = overlap(data, complete, "bidmc")
    assert (flag.value, flag.via, flag.status) == ("source", ("mimic-iii",), "unconfirmed")
    data, complete = card_declaration("anyppg")
    assert overlap(data, complete, "bidmc").via == ("pulsedb",)
    assert overlap(data, complete, "synthetic").value == "none"  # generated here: nobody saw it
    assert card_declaration("papagei_p (random init)") == ((), True)


def test_all_four_values_reach_the_job_record() -> None:
    direct = SimpleNamespace(pretraining_declaration=(PretrainingSource("bidmc"),))
    custom_unknown = SimpleNamespace(pretraining_declaration="unknown")
    papagei = type("PaPaGei", (), {"name": "papagei_p"})()
    untrained = type("PaPaGei", (), {"name": "papagei_p", "random_init": True})()
    got = {key: record_fields(enc, "bidmc-resp") for key, enc in
           (("direct", direct), ("source", papagei), ("none", untrained), ("unknown", custom_unknown))}
    assert {k: v["pretraining_overlap"] for k, v in got.items()} == {k: k for k in got}
    assert set(got) == set(OVERLAPS)
    assert got["source"]["pretraining_overlap_via"] == ["mimic-iii"]
    assert got["direct"]["pretraining_data"] == [{"name": "bidmc", "status": "confirmed"}]
    json.dumps(got)  # records are JSON


def test_records_without_the_field_get_the_cards_flag() -> None:
    assert record_overlap({"model": "anyppg", "task": "bidmc-resp"}) == "source"
    assert record_overlap({"model": "mynet", "task": "bidmc-resp"}) == "unknown"
    assert record_overlap({"model": "anyppg", "task": "bidmc-resp", "pretraining_overlap": "none"}) == "none"


def test_a_users_declaration() -> None:
    assert parse_declaration(None, "m") == parse_declaration("unknown", "m") == "unknown"
    assert parse_declaration([], "m") == ()
    parsed = parse_declaration(["mesa", "VitalDB (unconfirmed)", {"name": "bidmc", "status": "confirmed"}], "m")
    assert [s.text() for s in parsed] == ["mesa", "vitaldb (unconfirmed)", "bidmc"]  # type: ignore[union-attr]
    with pytest.raises(ConfigError, match=r"^mynet: pretraining_data: unknown source database 'mimic3'; "
                                          r"did you mean .*mimic-iii"):
        parse_declaration(["mimic3"], "mynet: pretraining_data")
    with pytest.raises(ConfigError, match="status confirmed or unconfirmed"):
        parse_declaration([{"name": "mesa", "status": "likely"}], "m")


def test_custom_encoder_declares_its_own_or_unknown() -> None:
    from ppgbench_pl.encoders.custom import CustomEncoder
    from tests.encoders.test_custom import TinyConvNet

    plain = CustomEncoder(TinyConvNet(), sampling_rate=64, name="mynet", pooling="mean", weights_in_module=True)
    assert plain.pretraining_declaration == "unknown"
    assert record_fields(plain, "dalia-hr")["pretraining_overlap"] == "unknown"
    declared = CustomEncoder(TinyConvNet(), sampling_rate=64, name="mynet", pooling="mean",
                             weights_in_module=True, pretraining_data=["dalia", "mesa"])
    assert record_fields(declared, "dalia-hr")["pretraining_overlap"] == "direct"
    assert record_fields(declared, "wesad-stress")["pretraining_overlap"] == "none"
    from ppgbench_pl.benchmark.cache import encoder_identity

    assert encoder_identity(plain)["settings"] == encoder_identity(declared)["settings"]  # no number changes


def test_list_encoders_shows_every_cards_pretraining_data() -> None:
    text = run_list("encoders")
    block = text.split("pretraining data", 1)[1]
    assert "papagei_s      mesa, mimic-iii, vitaldb (unconfirmed)" in block
    assert "custom         unknown" in block
    rows = {r["name"]: r for r in json.loads(run_list("encoders", as_json=True))}
    assert rows["papagei_p"]["pretraining_data"][0] == {"name": "vitaldb", "status": "confirmed"}
    assert rows["custom"]["pretraining_data"] == "unknown"
    datasets = {r["key"]: r for r in json.loads(run_list("datasets", as_json=True))}
    assert datasets["bidmc"]["derived_from"] == ["mimic-ii"] and datasets["bidmc"]["paper"] == "pimentel2017bidmc"


def test_every_card_citation_renders_as_bibtex_that_parses() -> None:
    citations = [c.paper for c in CARDS.values()] + [c.paper for c in MODEL_CARDS.values() if c.paper]
    parsed = pybtex_entries(bibtex.render_all([bibtex.BENCHMARK, *citations]))
    assert set(parsed) == {"ppgbench"} | {c.key for c in citations}
    assert parsed["pimentel2017bidmc"].fields["doi"] == "10.1109/TBME.2016.2613124"
    assert parsed["pillai2025papagei"].type == "inproceedings"
    for entry in parsed.values():
        assert entry.fields["title"] and entry.fields["year"]
