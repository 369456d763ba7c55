"""Print the encoder table (the paper's Table 7): parameters, trainable parameters, embedding, rate, weights.

Every registered encoder is built with its published settings (random weights: no checkpoint is needed
to count), one at a time so at most one large model is in memory. Parameters shared between modules
(SigmaPPG registers its patch embedding twice) are counted once.

    python tools/encoder_table.py                      # Markdown table on stdout
    python tools/encoder_table.py --json encoders.json # also write the rows as JSON (for the report)
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ppgbench_pl.encoders import ENCODERS

#: How each model's published weights are stored (the loader in each encoder module implements it).
CHECKPOINT_FORMATS: dict[str, str] = {
    "papagei_p": "papagei_p.pt (Zenodo 13983110): bare state dict, optional `module.` prefix",
    "papagei_s": "papagei_s.pt (Zenodo 13983110): bare state dict, optional `module.` prefix",
    "pulseppg": "checkpoint_best.pkl (Zenodo 17270930): training dict, weights under `net`",
    "anyppg": "anyppg_ckpt.pth (GitHub Ngk03/AnyPPG): bare state dict",
    "sigmappg": "sigma.pth (HF zonhengu/sigmappg): dict `model`, encoder keys under `student.`",
    "moment_small": "HF AutonLab/MOMENT-1-small folder: config.json + model.safetensors",
    "prv_neurokit2": "none (parameter-free features)",
    "prv_published": "none (parameter-free features)",
    "small_cnn": "none (seeded random init); optional state dict of this class",
}
COLUMNS = ("model", "parameters", "trainable", "embedding", "rate (Hz)", "checkpoint format")


def describe(name: str) -> dict[str, Any]:
    """One row: build the encoder, count its parameters once, read its contract attributes."""
    cls = ENCODERS[name]
    encoder = cls(random_init=True) if getattr(cls, "weights_source", None) else cls()  # only counts parameters
    trainable = sum(p.numel() for p in encoder.parameters() if p.requires_grad) if encoder.trainable else 0
    row = {
        "model": name,
        "class": f"{cls.__module__}.{cls.__qualname__}",
        "total": sum(p.numel() for p in encoder.parameters()),
        "trainable": trainable,
        "embed_dim": int(encoder.embed_dim),
        "sampling_rate": float(encoder.sampling_rate),
        "checkpoint": getattr(cls, "checkpoint_format", None) or CHECKPOINT_FORMATS.get(name, "undocumented"),
    }
    del encoder
    gc.collect()
    return row


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    """The rows as a Markdown table."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join("---" for _ in COLUMNS) + "|"]
    for r in rows:
        cells = (r["model"], f"{r['total']:,}", f"{r['trainable']:,}", str(r["embed_dim"]),
                 f"{r['sampling_rate']:g}", r["checkpoint"])
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="Also write the rows to this JSON file ({model: row}).")
    parser.add_argument("--only", nargs="+", choices=sorted(ENCODERS), help="Only these encoders.")
    args = parser.parse_args(argv)
    rows = [describe(name) for name in (args.only or list(ENCODERS))]
    print(markdown(rows))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({r["model"]: r for r in rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
