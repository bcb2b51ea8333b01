"""The clocks of a test hook's process, stopped: timings and the results' time stamp are the
only parts of a release that are not reproducible."""

from __future__ import annotations

import time


def stop_clocks() -> None:
    """Every clock dpnet reads (durations and the UTC time of the results) reads 0 from now."""
    time.perf_counter = time.process_time = time.thread_time = time.time = lambda: 0.0
