"""LightningModules: encoders with heads (frozen/finetune) and the fit-once probe adapter."""

from ppgbench_pl.tasks.encoder_task import EncoderTask
from ppgbench_pl.tasks.probe_task import ProbeTask

__all__ = ["EncoderTask", "ProbeTask"]
