"""Every encoder as a static, torch-free table (``ppgbench list`` stays fast); test_catalog.py checks it."""

from __future__ import annotations

from dataclasses import dataclass, field

#: Window lengths the benchmark cuts (seconds): 8 s for DaLiA and WildPPG, 10 s for every other dataset.
WINDOW_SECONDS = (8.0, 10.0)
ROLES = ("model", "control", "test")


@dataclass(frozen=True)
class PublishedWeights:
    """Where the authors publish a model's weights, and the version ``download --weights`` expects.

    Attributes:
        host: ``zenodo`` (a record), ``huggingface`` (a model repository) or ``github`` (plain or Git LFS).
        repo: The Zenodo record id, or the repository (``owner/name``).
        revision: The Zenodo record id of the version, or the repository commit (None: unpinned, the commit
            fetched is recorded).
        files: What to fetch: Zenodo file keys or repository paths.
        checkpoint: What ``checkpoint:`` points at in the fetched folder (a file, an archive member, or ``.``).
    """

    host: str
    repo: str
    revision: str | None
    files: tuple[str, ...]
    checkpoint: str


@dataclass(frozen=True)
class EncoderEntry:
    """One encoder: what it is, what it takes and gives, and where its weights come from.

    Attributes:
        name: Registry name, and the model name in records and tables (``custom``: the user's ``name``).
        native_fs: Rate (Hz) every dataset is resampled to for this model (None: the user's setting).
        window_samples: The 8 s and 10 s windows in samples at ``native_fs``, after the model's own cropping.
        parameters: Parameter count, each shared tensor once (None: the user's module).
        checkpoint_required: True when building without ``checkpoint`` is refused (unless ``random_init``).
        role: ``model`` (evaluated), ``control`` (a reference point) or ``test`` (a stand-in for the code paths).
        published: How ``ppgbench download --weights`` fetches the weights (None: nothing to fetch).
    """

    name: str
    class_path: str
    native_fs: float | None
    window_samples: tuple[int, ...] | None
    min_samples: int | None
    embedding_dim: int | None
    parameters: int | None
    weights: str
    weights_url: str | None
    checkpoint_required: bool
    role: str
    description: str
    published: PublishedWeights | None = None
    #: True for the controls (PRV variants, MOMENT); derived from ``role``.
    control: bool = field(init=False)

    def __post_init__(self) -> None:  # the table's roles and hosts: test_catalog.py
        object.__setattr__(self, "control", self.role == "control")


def _zenodo(record: str, key: str, member: str | None = None) -> PublishedWeights:
    """A file of one Zenodo record version (``member``: the checkpoint inside that file, an archive)."""
    return PublishedWeights("zenodo", record, record, (key,), member or key)


def _windows(fs: float, multiple: int = 1) -> tuple[int, ...]:
    return tuple(int(round(s * fs)) // multiple * multiple for s in WINDOW_SECONDS)


_ENTRIES = (
    EncoderEntry(
        "papagei_p", "ppgbench_pl.encoders.papagei.PaPaGeiPEncoder", 125.0, _windows(125.0), 2, 512,
        4_993_024,
        "papagei_p.pt (a bare state dict) from the PaPaGei authors' Zenodo record 13983110",
        "https://zenodo.org/records/13983110", True, "model",
        "PaPaGei-P (Nokia Bell Labs): pre-activation ResNet1D, 18 blocks, time mean then dense",
        _zenodo("13983110", "papagei_p.pt")),
    EncoderEntry(
        "papagei_s", "ppgbench_pl.encoders.papagei.PaPaGeiSEncoder", 125.0, _windows(125.0), 2, 512,
        5_785_612,
        "papagei_s.pt (a bare state dict) from the PaPaGei authors' Zenodo record 13983110",
        "https://zenodo.org/records/13983110", True, "model",
        "PaPaGei-S: the PaPaGei-P backbone plus mixture-of-experts heads (unused for the embedding)",
        _zenodo("13983110", "papagei_s.pt")),
    EncoderEntry(
        "pulseppg", "ppgbench_pl.encoders.pulseppg.PulsePPGEncoder", 50.0, _windows(50.0), 2, 512, 28_497_920,
        "checkpoint_best.pkl (weights under 'net') inside the Pulse-PPG authors' Zenodo archive",
        "https://doi.org/10.5281/zenodo.17270930", True, "model",
        "Pulse-PPG: wide ResNet1D (12 blocks, kernel 11) with global max pooling; subject-level z-score",
        _zenodo("17345536", "pulseppg_model_weights.zip", "pulseppg/experiments/out/pulseppg/checkpoint_best.pkl")),
    EncoderEntry(
        "anyppg", "ppgbench_pl.encoders.anyppg.AnyPPGEncoder", 125.0, _windows(125.0), 1, 512, 4_044_272,
        "load_anyppg/anyppg_ckpt.pth (a bare state dict) in the AnyPPG authors' GitHub repository; no "
        "licence, so download it yourself",
        "https://github.com/PKUDigitalHealth/AnyPPG", True, "model",
        "AnyPPG: squeeze-excitation Net1D (six stages, x128 downsampling), time mean",
        PublishedWeights("github", "PKUDigitalHealth/AnyPPG", "661b877aa96eac3bba320a462cb2a3bfea991103",
                         ("load_anyppg/anyppg_ckpt.pth",), "load_anyppg/anyppg_ckpt.pth")),
    EncoderEntry(
        "sigmappg", "ppgbench_pl.encoders.sigmappg.SigmaPPGEncoder", 50.0, _windows(50.0, 100), 100, 360,
        29_700_928,
        "sigma.pth ('student.' keys under 'model') on the SIGMA-PPG authors' Hugging Face page; no licence, "
        "so download it yourself",
        "https://huggingface.co/zonhengu/sigmappg", True, "model",
        "SIGMA-PPG pretraining student: ViT over 100-sample patches (18 layers, 360-d), mean of the patch "
        "tokens",
        PublishedWeights("huggingface", "zonhengu/sigmappg", None, ("sigma.pth",), "sigma.pth")),
    EncoderEntry(
        "moment_small", "ppgbench_pl.encoders.moment.MomentSmallEncoder", 64.0, _windows(64.0), 8, 512,
        35_337_408,
        "a local copy of AutonLab's Hugging Face folder MOMENT-1-small (config.json, model.safetensors)",
        "https://huggingface.co/AutonLab/MOMENT-1-small", True, "control",
        "MOMENT-1-small: the generic time-series control, a T5 encoder over 8-sample patches "
        "(PROTOCOL.md 5.3)",
        PublishedWeights("huggingface", "AutonLab/MOMENT-1-small", "411e288267f82cce86296dbe4d6c8bc533cc162f",
                         ("config.json", "model.safetensors"), ".")),
    EncoderEntry(
        "prv_published", "ppgbench_pl.encoders.prv.PublishedPRVEncoder", 100.0, _windows(100.0), 1, 8, 0,
        "none (hand-crafted features)", None, False, "control",
        "published PRV control: the protocol's SciPy pulse-rate-variability features (PROTOCOL.md 5.2)"),
    EncoderEntry(
        "prv_neurokit2", "ppgbench_pl.encoders.prv.PRVEncoder", 100.0, _windows(100.0), 1, 12, 0,
        "none (hand-crafted features)", None, False, "control",
        "PRV as the paper states it: NeuroKit2 peaks and 12 time-domain HRV indices (opt-in variant)"),
    EncoderEntry(
        "small_cnn", "ppgbench_pl.encoders.cnn.SmallCNNEncoder", 64.0, _windows(64.0), 16, 64, 13_248,
        "none (a seeded random init; optionally weights saved from this class)", None, False, "test",
        "three strided conv blocks and a time mean: exercises the neural paths without a download"),
    EncoderEntry(
        "custom", "ppgbench_pl.encoders.custom.CustomEncoder", None, None, None, None, None,
        "your checkpoint (or random_init: true, or weights_in_module: true)", None, True, "model",
        "any importable torch.nn.Module, wrapped from YAML (see `ppgbench init`)"),
)

#: Name -> entry, in display order (models, controls, test stand-ins, then the bring-your-own wrapper).
CATALOG: dict[str, EncoderEntry] = {entry.name: entry for entry in _ENTRIES}

#: The registered encoders (``ENCODERS[name]()``): every entry but the bring-your-own wrapper.
REGISTERED: tuple[str, ...] = tuple(name for name in CATALOG if name != "custom")
