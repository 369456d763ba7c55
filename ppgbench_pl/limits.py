"""Limits every layer checks against, kept in one import-free place (encoders and data may not import each other).

Sampling rates: pulse content reaches ~4 Hz (240 bpm, plus harmonics), so below 10 Hz a window cannot resolve
the pulse wave; above 2 kHz no dataset or model of the benchmark exists, and every window (and the embedding
cache) grows with the rate.
"""

MIN_SAMPLING_RATE = 10.0
MAX_SAMPLING_RATE = 2000.0
#: Rates a raw file may state for any signal it holds (PPG, ECG, EEG events): outside them the header is damaged
#: or in another unit (an ECG "rate" of 1e9 would leave every heart-rate label NaN without a word).
MIN_RAW_RATE = 10.0
MAX_RAW_RATE = 10_000.0
