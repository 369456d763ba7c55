"""A model card for every encoder of the catalog, from the sources in ``docs/cards.md`` (else ``unconfirmed``)."""

from __future__ import annotations

from ppgbench_pl.cards.types import UNKNOWN, Citation, ModelCard, PretrainingSource, Status
from ppgbench_pl.encoders.catalog import CATALOG


def _src(*names: str, status: Status = "confirmed") -> tuple[PretrainingSource, ...]:
    return tuple(PretrainingSource(n, status) for n in names)


def _arxiv(key: str, entry_type: str, title: str, author: str, year: str, eprint: str,
           *extra: tuple[str, str]) -> Citation:
    return Citation(key, entry_type, (("title", title), ("author", author), *extra, ("year", year),
                                      ("eprint", eprint), ("archiveprefix", "arXiv")))


_PAPAGEI = _arxiv("pillai2025papagei", "inproceedings",
                  "{PaPaGei}: Open Foundation Models for Optical Physiological Signals",
                  "Pillai, Arvind and others", "2025", "2410.20542",
                  ("booktitle", "International Conference on Learning Representations (ICLR)"))
_PAPERS = {
    "papagei_p": _PAPAGEI,
    "papagei_s": _PAPAGEI,
    "pulseppg": _arxiv("saha2025pulseppg", "article",
                       "{Pulse-PPG}: An Open-Source Field-Trained {PPG} Foundation Model for Wearable "
                       "Applications Across Lab and Field Settings",
                       "Saha, Mithun and Xu, Maxwell A. and others", "2025", "2502.01108",
                       ("journal", "Proceedings of the ACM on Interactive, Mobile, Wearable and Ubiquitous "
                                   "Technologies"), ("volume", "9"), ("number", "3"), ("doi", "10.1145/3749494")),
    "anyppg": _arxiv("nie2025anyppg", "misc",
                     "{AnyPPG}: An {ECG}-Guided {PPG} Foundation Model Trained on Over 100,000 Hours of "
                     "Recordings for Holistic Health Profiling",
                     "Nie, Guangkun and others", "2025", "2511.01747",
                     ("note", "preprint; the author list changes between versions")),
    "sigmappg": _arxiv("guo2026sigmappg", "misc",
                       "{SIGMA-PPG}: Statistical-prior Informed Generative Masking Architecture for {PPG} "
                       "Foundation Model", "Guo, Zongheng and others", "2026", "2601.21031",
                       ("note", "preprint")),
    "moment_small": _arxiv("goswami2024moment", "inproceedings",
                           "{MOMENT}: A Family of Open Time-series Foundation Models",
                           "Goswami, Mononito and others", "2024", "2402.03885",
                           ("booktitle", "International Conference on Machine Learning (ICML)")),
    # Not in the gathered facts: title, first author, journal, year and DOI confirmed on the publisher's
    # page (docs/cards.md [S48]); volume, issue and pages were not, so the entry says so.
    "prv_neurokit2": Citation("makowski2021neurokit2", "article", (
        ("title", "{NeuroKit2}: A {Python} toolbox for neurophysiological signal processing"),
        ("author", "Makowski, Dominique and others"), ("journal", "Behavior Research Methods"),
        ("volume", "53"), ("number", "4"), ("pages", "1689--1696"), ("year", "2021"),
        ("doi", "10.3758/s13428-020-01516-y")), unconfirmed=("volume", "number", "pages")),
}

# name: (display name, weights licence, its status, code licence, pretraining data, complete, notes)
_FACTS: dict[str, tuple[str, str, Status, str, tuple[PretrainingSource, ...] | str, bool, str]] = {
    "papagei_p": ("PaPaGei-P", "", "unconfirmed", "BSD-3-Clause", _src("vitaldb", "mimic-iii", "mesa"), True,
                  "the released training_pospair.py loads all three by default; BIDMC (from MIMIC-II) shares "
                  "a source through MIMIC-III; weights licence unconfirmed (the Zenodo page was not found)"),
    "papagei_s": ("PaPaGei-S", "", "unconfirmed", "BSD-3-Clause",
                  (*_src("mesa", "mimic-iii"), *_src("vitaldb", status="unconfirmed")), True,
                  "the paper lists VitalDB, MIMIC-III and MESA, the released training_mt.py hard-codes "
                  "mesa_mimic: whether papagei_s.pt saw VitalDB is unconfirmed"),
    "pulseppg": ("Pulse-PPG", "", "unconfirmed", "MIT", _src("pulseppg-field-study"), True,
                 "pretrained only on the authors' unreleased field study; weights licence not stated "
                 "separately"),
    "anyppg": ("AnyPPG", "none stated", "confirmed", "none stated",
               _src("cfs", "hsp", "mc-med", "mesa", "pulsedb"), True,
               "sources from the repository's preprocessing folders; the paper says six sources (PulseDB "
               "counted as two is an assumption, unconfirmed); patient-level overlap with BIDMC unverified"),
    "sigmappg": ("SIGMA-PPG", "none stated", "confirmed", "none stated",
                 _src("mimic-iii", "mimic-iv", "vitaldb", status="unconfirmed"), False,
                 "the code has preprocessors only for MIMIC-III/IV and VitalDB; the paper's full list is "
                 "unconfirmed, so datasets it does not name are unknown, not none"),
    "moment_small": ("MOMENT-1-small", "MIT", "confirmed", "MIT", _src("timeseries-pile"), True,
                     "no PPG set in the Time-series Pile as documented; its TSB-UAD 'BIDMC1' series is ECG "
                     "(its exact PhysioNet origin unconfirmed); not every UCR file was opened"),
    "prv_published": ("published PRV control", "n/a (no weights)", "confirmed", "ppgbench's", (), True,
                      "hand-crafted features"),
    "prv_neurokit2": ("PRV (NeuroKit2)", "n/a (no weights)", "confirmed", "ppgbench's", (), True,
                      "hand-crafted features"),
    "small_cnn": ("small CNN (test stand-in)", "n/a (no published weights)", "confirmed", "ppgbench's", (), True,
                  "a seeded random init"),
    "custom": ("your model", "yours", "confirmed", "yours", UNKNOWN, True,
               "declare it: CustomEncoder(pretraining_data=[mesa, vitaldb]), [] when not pretrained"),
}


def _card(name: str) -> ModelCard:
    entry = CATALOG[name]
    display, weights_license, license_status, code_license, data, complete, notes = _FACTS[name]
    return ModelCard(name=name, display_name=display, paper=_PAPERS.get(name), weights_source=entry.weights,
                     weights_url=entry.weights_url, weights_license=weights_license,
                     weights_license_status=license_status, code_license=code_license,
                     parameters=entry.parameters, native_fs=entry.native_fs, pretraining_data=data,
                     pretraining_complete=complete, notes=notes)


#: Catalog name -> card, in catalog order.
MODEL_CARDS: dict[str, ModelCard] = {name: _card(name) for name in CATALOG}
