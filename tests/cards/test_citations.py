"""The cards' citations (issue 21, part 4): what they state is what the sources say, and what none says is marked.

``FACTS`` is the bibliographic part of ``../shared/MODEL_CARDS.md`` plus the titles confirmed later
(``docs/cards.md`` [S36]-[S51]); an edit that changes a title, a year or a DOI fails here. Every entry
must also parse with pybtex, a BibTeX-compatible processor.
"""

from __future__ import annotations

import pytest

from ppgbench_pl.cards.types import Citation
from ppgbench_pl.commands.listing import cite_text, run_list
from ppgbench_pl.data.registry import CARDS
from ppgbench_pl.encoders.cards import MODEL_CARDS
from tests.cards.bib_parse import pybtex_entries

# key -> (title without braces, first author's family name, year, doi or arXiv id)
FACTS = {
    "pillai2025papagei": ("PaPaGei: Open Foundation Models for Optical Physiological Signals", "Pillai", "2025",
                          "2410.20542"),
    "saha2025pulseppg": ("Pulse-PPG: An Open-Source Field-Trained PPG Foundation Model for Wearable Applications "
                         "Across Lab and Field Settings", "Saha", "2025", "10.1145/3749494"),
    "nie2025anyppg": ("AnyPPG: An ECG-Guided PPG Foundation Model Trained on Over 100,000 Hours of Recordings for "
                      "Holistic Health Profiling", "Nie", "2025", "2511.01747"),
    "guo2026sigmappg": ("SIGMA-PPG: Statistical-prior Informed Generative Masking Architecture for PPG Foundation "
                        "Model", "Guo", "2026", "2601.21031"),
    "goswami2024moment": ("MOMENT: A Family of Open Time-series Foundation Models", "Goswami", "2024", "2402.03885"),
    "makowski2021neurokit2": ("NeuroKit2: A Python toolbox for neurophysiological signal processing", "Makowski",
                              "2021", "10.3758/s13428-020-01516-y"),
    "reiss2019deepppg": ("Deep PPG: Large-Scale Heart Rate Estimation with Convolutional Neural Networks", "Reiss",
                         "2019", "10.3390/s19143079"),
    "wang2024dreamt": ("DREAMT: Dataset for Real-time sleep stage EstimAtion using Multisensor wearable Technology",
                       "Wang", "2024", "10.13026/62an-cb28"),
    "schmidt2018wesad": ("Introducing WESAD, a Multimodal Dataset for Wearable Stress and Affect Detection",
                         "Schmidt", "2018", "10.1145/3242969.3242985"),
    "gao2021ecsmp": ("A dataset on emotion, cognition, sleep and multi-modal physiological signals", "Gao", "2021",
                     "10.1016/j.dib.2021.107660"),
    "liang2018ppgbp": ("A new, short-recorded photoplethysmogram dataset for blood pressure monitoring in China",
                       "Liang", "2018", "10.1038/sdata.2018.20"),
    "pimentel2017bidmc": ("Toward a Robust Estimation of Respiratory Rate From Pulse Oximeters", "Pimentel", "2017",
                          "10.1109/TBME.2016.2613124"),
    "nemcova2021butppg": ("Brno University of Technology Smartphone PPG Database (BUT PPG): Annotated Dataset for "
                          "PPG Quality Assessment and Heart Rate Estimation", "Nemcova", "2021", "10.1155/2021/3453007"),
    "siam2019realworldppg": ("Real-World PPG dataset", "Siam", "2019", "10.17632/yynb8t9x3d.1"),
    "meier2024wildppg": ("WildPPG: A Real-World PPG Dataset of Long Continuous Recordings", "Meier", "2024",
                         "2412.17540"),
}
#: Fields no source confirmed (docs/cards.md), by key.
UNCONFIRMED = {"liang2018ppgbp": ("title",), "gao2021ecsmp": ("doi",),
               "makowski2021neurokit2": ("volume", "number", "pages")}


def card_citations() -> dict[str, Citation]:
    papers = [c.paper for c in CARDS.values()] + [c.paper for c in MODEL_CARDS.values() if c.paper]
    return {c.key: c for c in papers}


def test_every_entry_states_the_gathered_facts_and_marks_the_rest():
    citations = card_citations()
    assert set(citations) == set(FACTS)
    for key, (title, author, year, ident) in FACTS.items():
        c = citations[key]
        assert c.field("title").replace("{", "").replace("}", "") == title, key
        assert c.field("author").startswith(f"{author}, "), key
        assert c.field("year") == year and ident in (c.field("doi"), c.field("eprint")), key
        assert c.unconfirmed == UNCONFIRMED.get(key, ()), key


def test_every_entry_parses_with_a_real_bibtex_parser_and_keeps_its_fields():
    text = cite_text(["all"], ["all"])
    entries = pybtex_entries(text)
    assert set(entries) == {"ppgbench", *FACTS}
    for key, (title, author, year, _) in FACTS.items():
        entry = entries[key]
        assert entry.fields["title"].replace("{", "").replace("}", "") == title
        assert entry.fields["year"] == year and entry.persons["author"][0].last_names == [author]
        assert entry.fields.get("unconfirmed", "") == ", ".join(UNCONFIRMED.get(key, ()))


def test_listings_show_what_is_unconfirmed_beside_the_key():
    datasets = run_list("datasets")
    assert "liang2018ppgbp (title unconfirmed)" in datasets and "gao2021ecsmp (doi unconfirmed)" in datasets
    encoders = run_list("encoders")
    assert "cite makowski2021neurokit2 (volume, number, pages unconfirmed)" in encoders
    assert "cite pillai2025papagei\n" in encoders  # confirmed: the key alone


def test_an_unconfirmed_name_must_be_a_field_of_the_entry():
    with pytest.raises(ValueError, match="unconfirmed field.s. pages not in the entry"):
        Citation("k", "misc", (("title", "t"),), unconfirmed=("pages",))
