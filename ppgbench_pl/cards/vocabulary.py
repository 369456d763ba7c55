"""One vocabulary for pretraining data and provenance: the nine benchmark datasets plus the source collections."""

from __future__ import annotations

from dataclasses import dataclass

from ppgbench_pl.errors import ConfigError


@dataclass(frozen=True)
class Collection:
    """A source database that is not a benchmark dataset; ``parts``: what it draws from (so BIDMC shares PulseDB's)."""

    name: str
    display_name: str
    parts: tuple[str, ...] = ()
    description: str = ""


#: Name -> collection.
COLLECTIONS: dict[str, Collection] = {c.name: c for c in (
    Collection("mimic-ii", "MIMIC-II Waveform Database", (), "ICU waveforms (PhysioNet); BIDMC is taken "
               "from its matched subset"),
    Collection("mimic-iii", "MIMIC-III Waveform Database", ("mimic-ii",),
               "ICU waveforms (PhysioNet); adds over 44,000 recordings to the MIMIC-II waveform database"),
    Collection("mimic-iv", "MIMIC-IV Waveform Database", (), "waveforms (pleth) that SigmaPPG's code preprocesses"),
    Collection("vitaldb", "VitalDB", (), "its SNUADC/PLETH signal is what SigmaPPG's code preprocesses; in PulseDB "
               "and in PaPaGei's pretraining data (read at 500 Hz)"),
    Collection("mesa", "MESA", (), "in PaPaGei's (read at 256 Hz) and AnyPPG's pretraining data"),
    Collection("pulsedb", "PulseDB", ("mimic-iii", "vitaldb"),
               "10-s segments from the MIMIC-III matched subset and VitalDB"),
    Collection("cfs", "CFS", (), "a preprocessing folder of AnyPPG's repository (10-s segments)"),
    Collection("hsp", "HSP", (), "a preprocessing folder of AnyPPG's repository (60-s segments)"),
    Collection("mc-med", "MC-MED", (), "a preprocessing folder of AnyPPG's repository (10-s segments)"),
    Collection("pulseppg-field-study", "Pulse-PPG field study", (),
               "the Pulse-PPG authors' private 100-day wrist-PPG study of 120 participants (not released)"),
    Collection("timeseries-pile", "Time-series Pile", ("informer-long-horizon", "monash-forecasting", "ucr-uea",
                                                        "tsb-uad", "fred"),
               "MOMENT's pretraining corpus (13 domains, about 13M series)"),
    Collection("informer-long-horizon", "Informer long-horizon sets", (),
               "ETT, Electricity, Traffic, Weather, ILI, Exchange"),
    Collection("monash-forecasting", "Monash forecasting archive", (),
               "forecasting series (not the Monash regression archive, which holds PPG-DaLiA and BIDMC32)"),
    Collection("ucr-uea", "UCR/UEA classification archive", (), "time-series classification sets"),
    Collection("tsb-uad", "TSB-UAD anomaly benchmark", (),
               "anomaly series; its 'BIDMC1' series is ECG, not the BIDMC PPG dataset"),
    Collection("fred", "FRED", (), "loaded by get_all_datasets() of MOMENT's research code"),
)}


#: The nine benchmark datasets as plain names (this layer is below data's registry; a test holds them equal).
BENCHMARK_DATASETS = ("dalia", "dreamt", "wesad", "ecsmp", "ppgbp", "bidmc", "butppg", "realworldppg", "wildppg")


def names() -> tuple[str, ...]:
    """Every name a ``pretraining_data`` list or a ``derived_from`` may use."""
    return (*BENCHMARK_DATASETS, *COLLECTIONS)


def check_name(name: str, where: str) -> str:
    """Return ``name`` if it is in the vocabulary; otherwise a one-line error (ConfigError) with the closest."""
    known = names()
    if name in known:
        return name
    import difflib

    close = difflib.get_close_matches(name, known, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(known)}"
    raise ConfigError(f"{where}: unknown source database '{name}'{hint}")


def components(name: str) -> frozenset[str]:
    """``name`` and everything it is built from, transitively (``pulsedb`` -> mimic-iii, mimic-ii, vitaldb)."""
    parts = COLLECTIONS[name].parts if name in COLLECTIONS else ()
    return frozenset({name}.union(*map(components, parts)))
