import lightning as L
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from ppgbench_pl.datamodules.ppg import ArrayDataset
from ppgbench_pl.metrics.scores import Predictions
from ppgbench_pl.tasks.probe_task import ProbeTask


class _Recorder:
    """A scikit-learn style estimator that keeps what it was given."""

    def fit(self, x, y, groups, folds=None):
        self.x, self.y, self.groups, self.folds = x, y, groups, folds
        return self

    def predict(self, x):
        return Predictions("regression", x[:, 0] * 2)


def test_fit_arrays_passes_the_arrays_as_they_are():
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    y, groups = np.arange(6.0), np.array(list("aabbcc"))
    folds = [(np.array([2, 3, 4, 5]), np.array([0, 1]))]
    module = ProbeTask(_Recorder()).fit_arrays(x, y, groups, folds=folds)
    est = module.estimator
    assert est.x is x and est.y is y and est.groups is groups and est.folds is folds  # no copies, no tensors
    np.testing.assert_array_equal(module.predict_arrays(x[:2]).values, [0.0, 4.0])
    with pytest.raises(RuntimeError, match="before fit_arrays"):
        ProbeTask(_Recorder()).predict_arrays(x)


def test_still_usable_under_a_lightning_trainer_with_its_regime_as_callback(tmp_path):
    """The module gathers the rows; the probe regime's hooks fit at the epoch's end and predict at the test's."""
    from ppgbench_pl.regimes.linear import LinearRegime

    z = np.random.default_rng(0).normal(size=(10, 3)).astype(np.float32)
    groups = np.array(list("aabbccddee"))
    loader = DataLoader(ArrayDataset(z=z, y=np.arange(10.0), index=np.arange(10)), batch_size=4)
    module = ProbeTask(_Recorder(), groups=groups)
    trainer = L.Trainer(default_root_dir=tmp_path, accelerator="cpu", enable_progress_bar=False,
                        callbacks=[LinearRegime()], **ProbeTask.trainer_arguments)
    trainer.fit(module, train_dataloaders=loader)
    assert bool(module.fitted) and module.estimator.groups.tolist() == groups.tolist()
    trainer.test(module, dataloaders=loader, verbose=False)
    np.testing.assert_allclose(module.predictions.values, z[:, 0].astype(np.float64) * 2, rtol=1e-6)
    assert torch.is_tensor(module.fitted)


class _ThreadsSeen:
    """Records the BLAS thread counts in force while it fits and predicts."""

    def __init__(self):
        self.seen = {}

    def fit(self, x, y, groups, folds=None):
        from ppgbench_pl.probes.threads import current_blas_threads

        self.seen["fit"] = current_blas_threads()
        return self

    def predict(self, x):
        from ppgbench_pl.probes.threads import current_blas_threads

        self.seen["predict"] = current_blas_threads()
        return Predictions("regression", np.zeros(len(x)))


@pytest.mark.parametrize("threads", [1, None])
def test_the_probe_fit_runs_with_one_blas_thread_unless_told_otherwise(threads):
    from threadpoolctl import threadpool_limits

    from ppgbench_pl.probes.threads import current_blas_threads

    x, y = np.zeros((6, 2)), np.zeros(6)
    with threadpool_limits(limits=2, user_api="blas"):  # the process setting, as on a 2-core machine
        before = current_blas_threads()
        estimator = _ThreadsSeen()
        task = ProbeTask(estimator, groups=np.arange(6), blas_threads=threads)
        task.fit_arrays(x, y)
        task.predict_arrays(x)
        assert current_blas_threads() == before  # restored after each call
    assert before and set(before) == {2}
    expected = {1} if threads == 1 else {2}
    assert set(estimator.seen["fit"]) == expected and set(estimator.seen["predict"]) == expected



def test_without_a_probe_regime_the_fit_and_test_refuse_to_end_with_unused_rows(tmp_path):
    z = np.random.default_rng(0).normal(size=(10, 3)).astype(np.float32)
    loader = DataLoader(ArrayDataset(z=z, y=np.arange(10.0), index=np.arange(10)), batch_size=4)
    trainer = L.Trainer(default_root_dir=tmp_path, accelerator="cpu", enable_progress_bar=False,
                        **ProbeTask.trainer_arguments)
    module = ProbeTask(_Recorder())
    with pytest.raises(RuntimeError, match="nothing fitted the gathered rows; give its Trainer a probe regime"):
        trainer.fit(module, train_dataloaders=loader)
    assert not bool(module.fitted)
    module.fit_arrays(z, np.arange(10.0))
    with pytest.raises(RuntimeError, match="nothing predicted the gathered test rows"):
        trainer.test(module, dataloaders=loader, verbose=False)
