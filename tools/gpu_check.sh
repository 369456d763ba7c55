#!/usr/bin/env bash
# GPU readiness check (< 5 min on one GPU): cuML vs scikit-learn RF, stacked vs sequential finetune trials
# with AMP (bf16-mixed), embedding throughput per encoder, peak GPU memory.
#
#   tools/gpu_check.sh               # on a GPU machine; paste the output into docs/performance.md
#   tools/gpu_check.sh --dry-run     # tiny and CPU-only (also: PPGBENCH_GPU_CHECK_DRY_RUN=1); run by the tests
#
# Encoders whose code or weights are missing are reported as skipped (random weights: throughput only).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || PY=python
DRY="${PPGBENCH_GPU_CHECK_DRY_RUN:-0}"
for arg in "$@"; do
  case "$arg" in
    --dry-run) DRY=1 ;;
    *) echo "gpu_check.sh: unknown option $arg (use --dry-run)" >&2; exit 2 ;;
  esac
done
export WANDB_MODE=disabled PPGBENCH_GPU_CHECK_DRY_RUN="$DRY"
exec "$PY" - <<'PY'
import copy
import os
import time
import warnings

import numpy as np
import torch

warnings.filterwarnings("ignore")
DRY = os.environ["PPGBENCH_GPU_CHECK_DRY_RUN"] == "1"
CUDA = torch.cuda.is_available() and not DRY
DEV = torch.device("cuda" if CUDA else "cpu")


def sync():
    if CUDA:
        torch.cuda.synchronize()


def line(section, text):
    print(f"[{section}] {text}", flush=True)


name = torch.cuda.get_device_name(0) if CUDA else "cpu"
line("device", f"{name}; torch {torch.__version__}; dry run: {DRY}")
if CUDA:
    torch.cuda.reset_peak_memory_stats()

# -- 1. random forest: cuML vs scikit-learn ------------------------------------------------------------
from sklearn.ensemble import RandomForestClassifier
from sklearn.metrics import balanced_accuracy_score

rng = np.random.default_rng(0)
n, d = (400, 16) if DRY else (20000, 64)
x = rng.normal(size=(n, d)).astype(np.float32)
y = ((x[:, 0] + np.tanh(x[:, 1] * x[:, 2]) + 0.5 * rng.normal(size=n)) > 0).astype(np.int32)
tr, te = slice(0, n * 4 // 5), slice(n * 4 // 5, n)
trees = 10 if DRY else 100
start = time.perf_counter()
sk = RandomForestClassifier(n_estimators=trees, max_depth=10, n_jobs=-1, random_state=0).fit(x[tr], y[tr])
sk_bacc = balanced_accuracy_score(y[te], sk.predict(x[te]))
sk_s = time.perf_counter() - start
line("rf", f"sklearn: {sk_s:.2f} s, balanced accuracy {sk_bacc:.4f} ({n} x {d}, {trees} trees, depth 10)")
try:
    if DRY:
        raise ImportError("dry run")
    from cuml.ensemble import RandomForestClassifier as CuRF
except ImportError as exc:
    line("rf", f"cuML: skipped ({exc})")
else:
    start = time.perf_counter()
    cu = CuRF(n_estimators=trees, max_depth=10, n_bins=128, random_state=0).fit(x[tr], y[tr])
    cu_bacc = balanced_accuracy_score(y[te], np.asarray(cu.predict(x[te])))
    cu_s = time.perf_counter() - start
    line("rf", f"cuML: {cu_s:.2f} s, balanced accuracy {cu_bacc:.4f}; speed-up {sk_s / cu_s:.1f}x, "
               f"metric difference {cu_bacc - sk_bacc:+.4f}")

# -- 2. finetune trials: the trial stack (one Trainer.fit) vs one fit per trial, bf16 on a GPU -------------
import lightning as L

from ppgbench_pl.encoders.cnn import SmallCNNEncoder
from ppgbench_pl.heads.mlp import MLPHead
from ppgbench_pl.hpo.trial_stack import Slot, SlotData, TrialStack
from ppgbench_pl.regimes.finetune import HeadedEncoder
from ppgbench_pl.regimes.mlp import MLPRegime  # its hooks end the fixed-length slots and set their modes

k, n_fit, n_val, t_len, epochs = (3, 64, 32, 128, 1) if DRY else (8, 8192, 2048, 640, 2)
batch = 32 if DRY else 512
precision = "bf16-mixed" if CUDA else "32-true"
g = torch.Generator().manual_seed(0)
raw = torch.randn(n_fit + n_val, t_len, generator=g)
pre = SmallCNNEncoder(embed_dim=64).preprocess(raw)
target = raw[:, :32].mean(1)
data = SlotData(pre[:n_fit], target[:n_fit], None, "mse")


def slot(i):
    net = HeadedEncoder(SmallCNNEncoder(embed_dim=64, seed=i), MLPHead(64, 1, 256, 0.3 * (i % 2)))
    groups = [{"params": list(net.head.parameters()), "lr": 1e-3, "weight_decay": 1e-4},
              {"params": list(net.encoder.parameters()), "lr": 1e-4, "weight_decay": 1e-4}]
    return Slot(f"trial/{i}", net, data, batch, i, groups, epochs)


def fit(slots):
    trainer = L.Trainer(accelerator="gpu" if CUDA else "cpu", devices=1, precision=precision, max_epochs=-1,
                        logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=0, callbacks=[MLPRegime()])
    trainer.fit(TrialStack(slots))


def timed(fn):
    sync()
    start = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - start


timed(lambda: fit([slot(0)]))  # warm-up
seq = timed(lambda: [fit([slot(i)]) for i in range(k)])
if CUDA:
    torch.cuda.reset_peak_memory_stats()
stk = timed(lambda: fit([slot(i) for i in range(k)]))
stack_peak = f", stack peak {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB" if CUDA else ""
line("finetune", f"small CNN, {k} trials x {epochs} epochs of {n_fit} windows, batch {batch}, {precision}: "
                 f"one fit per trial {k / seq:.2f} trials/s, trial stack {k / stk:.2f} trials/s, "
                 f"ratio {seq / stk:.2f}x{stack_peak}")

# -- 2b. the trial stack per encoder: 8 finetune trials in one fit, trials/s and peak memory ----------------
from ppgbench_pl.encoders import ENCODERS

stack_names = ["small_cnn"] if DRY else sorted(ENCODERS)
n_stack, stack_batch = (32, 16) if DRY else (2048, 128)
for enc_name in stack_names:
    try:
        cls = ENCODERS[enc_name]
        try:
            base_enc = cls(random_init=True)
        except TypeError:
            base_enc = cls()
        if not any(p.numel() for p in base_enc.parameters()):
            line("stack", f"{enc_name}: skipped (no parameters: head-only finetuning)")
            continue
        fs = float(base_enc.sampling_rate)
        raw_w = torch.randn(n_stack, int(round(10 * fs)))
        with torch.no_grad():
            pre_w = base_enc.preprocess(raw_w, torch.zeros(n_stack), torch.ones(n_stack)).float()
            dim = int(base_enc.forward_features(pre_w[:2]).shape[1])
        data_w = SlotData(pre_w, raw_w[:, :8].mean(1), None, "mse")

        def enc_slot(i, base_enc=base_enc, dim=dim, data_w=data_w):
            net = HeadedEncoder(copy.deepcopy(base_enc).requires_grad_(True), MLPHead(dim, 1, 256, 0.0))
            groups = [{"params": list(net.head.parameters()), "lr": 1e-3, "weight_decay": 0.0},
                      {"params": list(net.encoder.parameters()), "lr": 1e-4, "weight_decay": 0.0}]
            return Slot(f"{enc_name}/{i}", net, data_w, stack_batch, i, groups, 1)

        if CUDA:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        seconds = timed(lambda: fit([enc_slot(i) for i in range(8)]))
        peak_w = f"{torch.cuda.max_memory_allocated() / 2**30:.2f} GiB" if CUDA else "n/a (no GPU)"
        line("stack", f"{enc_name}: 8 trials x 1 epoch of {n_stack} windows, batch {stack_batch}, {precision}: "
                      f"{8 / seconds:.2f} trials/s, peak memory {peak_w}")
        del base_enc
    except Exception as exc:  # missing code, weights or memory: say so, keep going
        line("stack", f"{enc_name}: skipped ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})")

# -- 3. embedding throughput per encoder (random weights) ------------------------------------------------

names = ["small_cnn"] if DRY else sorted(ENCODERS)
n_win, eb = (16, 8) if DRY else (4096, 256)
for enc_name in names:
    try:
        cls = ENCODERS[enc_name]
        try:
            model = cls(random_init=True)
        except TypeError:
            model = cls()
        model = model.to(DEV).eval()
        fs = float(model.sampling_rate)
        windows = torch.randn(n_win, int(round(10 * fs)))
        mean, std = torch.zeros(n_win), torch.ones(n_win)
        with torch.no_grad(), torch.autocast(DEV.type, dtype=torch.bfloat16, enabled=CUDA):
            model(windows[:eb].to(DEV), mean[:eb].to(DEV), std[:eb].to(DEV))  # warm-up
            sync()
            start = time.perf_counter()
            for i in range(0, n_win, eb):
                model(windows[i:i + eb].to(DEV), mean[i:i + eb].to(DEV), std[i:i + eb].to(DEV))
            sync()
        seconds = time.perf_counter() - start
        line("embed", f"{enc_name}: {n_win / seconds:,.0f} windows/s ({fs:g} Hz, 10 s windows, batch {eb})")
        del model
    except Exception as exc:  # missing code, weights or memory: say so, keep going
        line("embed", f"{enc_name}: skipped ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})")

peak = f"{torch.cuda.max_memory_allocated() / 2**30:.2f} GiB" if CUDA else "n/a (no GPU)"
line("memory", f"peak GPU memory allocated: {peak}")
PY
