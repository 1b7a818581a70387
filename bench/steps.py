"""Step lines of `pipezip train` runs, for the benchmarks' reports
(link_report.py, dp_train_report.py): the timed steps of a run, and the
median of several runs."""
import json
import os
import statistics


def timed_rows(path, first):
    """The step lines ({"step", "loss", "ms", ...}) of a run's stdout from step `first` on."""
    with open(path) as f:
        rows = [json.loads(line) for line in f if '"loss"' in line]
    return [r for r in rows if r["step"] >= first]


def median_run(paths, first):
    """(step seconds, step lines) of the median run: each run's step time is
    the median over its timed steps (from `first` on), and the runs are
    ranked by it. (None, None) when a run is missing or has no timed step."""
    per_run = []
    for p in paths:
        if not os.path.exists(p):
            return None, None
        rows = timed_rows(p, first)
        if not rows:
            return None, None
        per_run.append((statistics.median(r["ms"] for r in rows) / 1e3, rows))
    per_run.sort(key=lambda x: x[0])
    return per_run[len(per_run) // 2]
