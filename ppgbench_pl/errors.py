"""Errors the user should see as one clear line, never as a traceback."""


class PPGBenchError(Exception):
    """A problem with the user's input or environment, reported as one line by the CLI."""


class ConfigError(PPGBenchError):
    """A config names something unknown or inconsistent (task, dataset, encoder, regime)."""


class NotEvaluable(ConfigError):
    """A task has fewer labelled subjects than outer folds: a named task refuses the run, an unnamed one is skipped."""


class DataError(PPGBenchError):
    """A data file is missing, malformed or inconsistent; the message names the file."""


class CheckpointError(PPGBenchError):
    """A checkpoint does not fit the encoder it is loaded into."""


class DownloadError(PPGBenchError):
    """A raw-data download or extraction failed; the message names the file and what to do."""


def user_error(exc: BaseException) -> BaseException | None:
    """The :class:`PPGBenchError` behind ``exc`` (jsonargparse wraps errors raised while instantiating)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, PPGBenchError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None
