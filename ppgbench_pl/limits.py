"""Limits every layer checks against, import-free (encoders and data may not import each other).

Below 10 Hz a window cannot resolve the pulse wave (~4 Hz with harmonics); no dataset or model goes above 2 kHz.
"""

MIN_SAMPLING_RATE = 10.0
MAX_SAMPLING_RATE = 2000.0
#: Rates a raw file may state for any signal it holds: outside them the header is damaged or in another unit.
MIN_RAW_RATE = 10.0
MAX_RAW_RATE = 10_000.0
