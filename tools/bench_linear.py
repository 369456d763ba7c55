"""Linear-probe selection: our one-SVD ridge grid / group grid search vs plain scikit-learn GridSearchCV.

Both sides see the same embeddings, the same inner group folds and the same grids; the script prints
the time ratio and whether the selected hyperparameters and the outer-test metrics agree.

    python tools/bench_linear.py [--windows 4000] [--dim 512] [--groups 40] [--repeats 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.metrics import balanced_accuracy_score, mean_absolute_error
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from ppgbench_pl.data.splits import InnerGroupSplit
from ppgbench_pl.probes.families import LogisticFamily, RidgeFamily
from ppgbench_pl.probes.linear import LOGISTIC_CS, RIDGE_ALPHAS
from ppgbench_pl.probes.search import GroupGridSearch


def make_data(n: int, dim: int, n_groups: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Embeddings with a group effect and a linear target."""
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(n_groups), int(np.ceil(n / n_groups)))[:n].astype(str)
    x = rng.normal(size=(n, dim)) + rng.normal(size=(n_groups, dim))[groups.astype(int)]
    y = x[:, :20] @ rng.normal(size=20) + rng.normal(0, 3, size=n)
    return x, y, groups


def best_of(repeats: int, fn) -> tuple[float, object]:  # noqa: ANN001
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), out


def compare(name: str, ours_fn, ref_fn, ours_key: str, ref_key: str, metric, x_test, y_test, repeats: int) -> None:  # noqa: ANN001
    t_ours, ours = best_of(repeats, ours_fn)
    t_ref, ref = best_of(repeats, ref_fn)
    ours_pred = ours.predict(x_test)
    ours_pred = ours_pred.labels if ours_pred.classes is not None else ours_pred.values
    m_ours, m_ref = metric(y_test, ours_pred), metric(y_test, ref.predict(x_test))
    same = ours.best_params_[ours_key] == ref.best_params_[ref_key]
    print(f"{name:<9} ours {t_ours:8.3f} s   GridSearchCV {t_ref:8.3f} s   speed-up x{t_ref / t_ours:6.1f}   "
          f"selected {ours.best_params_[ours_key]:g} vs {ref.best_params_[ref_key]:g} ({'same' if same else 'DIFFERENT'})   "
          f"test {m_ours:.4f} vs {m_ref:.4f} ({'same' if np.isclose(m_ours, m_ref, rtol=1e-6) else 'DIFFERENT'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=4000)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--groups", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()

    x, y, groups = make_data(args.windows + args.windows // 4, args.dim, args.groups + args.groups // 4)
    test = np.isin(groups, np.unique(groups)[args.groups:])
    x_tr, y_tr, g_tr, x_te, y_te = x[~test], y[~test], groups[~test], x[test], y[test]
    folds = list(InnerGroupSplit(args.seed).split(x_tr, y_tr, g_tr))
    print(f"{len(x_tr)} training windows x {args.dim} dims, {args.groups} groups, 4 inner group folds; best of {args.repeats}")

    compare(
        "ridge",
        lambda: GroupGridSearch(RidgeFamily(), "regression", "window", args.seed).fit(x_tr, y_tr, g_tr),
        lambda: GridSearchCV(make_pipeline(StandardScaler(), Ridge()), {"ridge__alpha": list(RIDGE_ALPHAS)},
                             scoring="neg_mean_absolute_error", cv=folds).fit(x_tr, y_tr),
        "alpha", "ridge__alpha", mean_absolute_error, x_te, y_te, args.repeats,
    )
    labels = np.digitize(y, np.quantile(y, [0.33, 0.66]))
    compare(
        "logistic",
        lambda: GroupGridSearch(LogisticFamily(), "classification", "window", args.seed).fit(x_tr, labels[~test], g_tr),
        lambda: GridSearchCV(make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000, random_state=args.seed)),
                             {"logisticregression__C": list(LOGISTIC_CS)}, scoring="balanced_accuracy", cv=folds,
                             ).fit(x_tr, labels[~test]),
        "C", "logisticregression__C", balanced_accuracy_score, x_te, labels[test], 1,
    )


if __name__ == "__main__":
    main()
