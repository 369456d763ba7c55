"""Linear probes with the protocol's grids (PROTOCOL.md 4.1), in plain NumPy/scikit-learn.

Ridge is the hot path of the whole benchmark (every task, seed and fold, seven alphas, four inner
folds plus a refit), so :class:`RidgeGrid` solves every alpha from one SVD of the standardised training
matrix instead of one fit per alpha. It matches ``Pipeline(StandardScaler(), Ridge(alpha))`` (the
reference in the tests). Logistic regression keeps scikit-learn's lbfgs solver.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

RIDGE_ALPHAS = (0.01, 0.1, 1.0, 10.0, 100.0, 1000.0, 10000.0)
LOGISTIC_CS = (0.001, 0.01, 0.1, 1.0, 10.0)


def _standardise(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and scale of a training matrix as StandardScaler computes them (zero std -> 1)."""
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale == 0.0] = 1.0
    return mean, scale


class RidgeGrid:
    """Standardise-then-ridge for many alphas from one SVD: a scikit-learn style estimator.

    After ``fit`` the estimator predicts with every alpha at once (``predict_all``) or with the
    selected ``alpha`` (``predict``).

    Args:
        alphas: The alpha grid.
        alpha: Alpha used by ``predict``; defaults to the first of the grid.
    """

    def __init__(self, alphas: Sequence[float] = RIDGE_ALPHAS, alpha: float | None = None) -> None:
        self.alphas = alphas
        self.alpha = alpha

    def fit(self, x: np.ndarray, y: np.ndarray) -> RidgeGrid:
        """Standardise ``x``, centre ``y`` and keep the SVD; coefficients for all alphas follow."""
        x = np.asarray(x, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        self.x_mean_, self.x_scale_ = _standardise(x)
        xs = (x - self.x_mean_) / self.x_scale_
        self.y_mean_ = y.mean(axis=0)
        u, s, vt = np.linalg.svd(xs, full_matrices=False)
        uty = u.T @ (y - self.y_mean_).reshape(len(y), -1)
        # coef(alpha) = V diag(s / (s^2 + alpha)) U^T y for every alpha: [n_alpha, n_features, n_targets]
        shrink = s[None, :] / (s[None, :] ** 2 + np.asarray(self.alphas, dtype=np.float64)[:, None])
        self.coefs_ = np.einsum("fk,ak,kt->aft", vt.T, shrink, uty)
        self.n_targets_ = 1 if y.ndim == 1 else y.shape[1]
        return self

    def predict_all(self, x: np.ndarray) -> np.ndarray:
        """Predictions for every alpha: ``[n_alpha, n]`` or ``[n_alpha, n, n_targets]``."""
        xs = (np.asarray(x, dtype=np.float64) - self.x_mean_) / self.x_scale_
        out = np.einsum("nf,aft->ant", xs, self.coefs_) + np.reshape(self.y_mean_, (1, 1, -1))
        return out[..., 0] if self.n_targets_ == 1 else out

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Predictions with the selected ``alpha``."""
        alpha = self.alphas[0] if self.alpha is None else self.alpha
        return self.predict_all(x)[list(self.alphas).index(alpha)]


def logistic_pipeline(c: float, seed: int) -> object:
    """``StandardScaler -> LogisticRegression(L2, lbfgs, max_iter 1000)``, unweighted, seeded."""
    return make_pipeline(
        StandardScaler(),
        LogisticRegression(C=c, solver="lbfgs", max_iter=1000, random_state=seed),
    )
