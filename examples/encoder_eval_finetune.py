"""A new regime as a subclass that overrides one Lightning hook, plus a YAML file: finetuning in eval mode.

The published finetune regime trains each trial's encoder in train mode (its dropout active; BatchNorm
statistics updated unless the searched ``batchnorm_mode`` is ``freeze_stats``). On small datasets some
finetune a foundation model with the whole encoder in eval mode: its weights learn, but its dropout is off and
its BatchNorm keeps the pretraining statistics. This regime does that in its ``on_train_epoch_start`` hook, for
every trial, stacked or trained one by one. Run it from the project folder (its module is found there):

    ppgbench fit --config configs/regime_finetune.yaml --config examples/encoder_eval_finetune.yaml

It has a name of its own, so its jobs, records, summary rows and run identity never mix with the published
regime's.
"""

from __future__ import annotations

import lightning as L

from ppgbench_pl.regimes.finetune import FinetuneRegime, HeadedEncoder


class EncoderEvalFinetune(FinetuneRegime):
    """The finetune regime with each trial's encoder in eval mode while it trains (the head in train mode)."""

    name = "finetune_encoder_eval"

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """After the regime set each trial's modes (start of fit, end of each epoch): the encoders to eval."""
        super().on_train_epoch_start(trainer, pl_module)
        for module in pl_module.modules():
            if isinstance(module, HeadedEncoder):
                module.encoder.eval()
