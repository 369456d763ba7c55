"""Limits every layer checks against, import-free (encoders and data may not import each other).

Below 10 Hz a window cannot resolve the pulse wave (~4 Hz with harmonics); no dataset or model goes above 2 kHz.
"""

MIN_SAMPLING_RATE = 10.0
MAX_SAMPLING_RATE = 2000.0
#: Rates a raw file may state for any signal it holds (PPG, ECG, EEG events): outside them the header is damaged
#: or in another unit (an ECG "rate" of 1e9 would leave every heart-rate label NaN without a word).
MIN_RAW_RATE = 10.0
MAX_RAW_RATE = 10_000.0
