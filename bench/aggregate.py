"""bench/aggregate.py - from the raw runs to the figures the report shows:
the checksum check, the median of each cell's repetitions, and each
allocator's ratio to the best peer of the same run.

A cell is one (benchmark, thread setting, allocator). Ratios are "time
ratios" whatever the metric, so that below 1.00 always means faster than
the best peer: time / best time, or best throughput / throughput. Peak RSS
ratios likewise: below 1.00 is smaller than the smallest peer. The best
peer is chosen per cell column, among the peers that ran successfully.
Variants of pcmalloc (BENCH_VARIANTS) are not peers: they get ratios to
the best peer like pcmalloc does, and never become that best peer.

No I/O here: records in, figures out.
"""

import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass


@dataclass
class Cell:
    status: str  # "ok", or the first failure's status
    runs: int
    failures: int
    metric: str = ""
    unit: str = ""
    value: float = 0.0  # median over the successful runs
    rss_kb: float = 0.0  # median peak RSS over the successful runs
    spread: float = 0.0  # (max - min) / median of the successful runs
    low: float = 0.0  # the least and greatest value of the successful runs
    high: float = 0.0
    rss_low: float = 0.0  # the same of their peak RSS
    rss_high: float = 0.0
    sleeps: float = 0.0  # median voluntary context switches a run (measure.Outcome)
    detail: str = ""
    time_ratio: float | None = None
    rss_ratio: float | None = None
    best_time: bool = False  # the best (fastest) in its column
    best_rss: bool = False

    @property
    def ok(self):
        return self.status == "ok"


def mark_bad_checksums(records):
    """A successful run whose checksum differs from the reference for the
    same benchmark and arguments becomes "bad-checksum". The reference is
    glibc's checksum, or failing that the most common one."""
    groups = defaultdict(list)
    for r in records:
        if r["status"] == "ok":
            groups[(r["benchmark"], r["args"])].append(r)
    for runs in groups.values():
        from_glibc = [r["checksum"] for r in runs if r["allocator"] == "glibc"]
        pool = from_glibc or [r["checksum"] for r in runs]
        reference = Counter(pool).most_common(1)[0][0]
        for r in runs:
            if r["checksum"] != reference:
                r["status"] = "bad-checksum"
                r["detail"] = (f"checksum {r['checksum']}, expected {reference} "
                               f"({'glibc' if from_glibc else 'most runs'})")


def _cell(runs):
    good = [r for r in runs if r["status"] == "ok"]
    bad = [r for r in runs if r["status"] != "ok"]
    cell = Cell("ok" if not bad else bad[0]["status"], len(runs), len(bad))
    if bad:
        cell.detail = bad[0]["detail"]
    if good:
        values = [r["value"] for r in good]
        cell.metric, cell.unit = good[0]["metric"], good[0]["unit"]
        cell.value = statistics.median(values)
        cell.rss_kb = statistics.median(r["maxrss_kb"] for r in good)
        cell.low, cell.high = min(values), max(values)
        cell.spread = (cell.high - cell.low) / cell.value if cell.value else 0.0
        cell.rss_low, cell.rss_high = min(r["maxrss_kb"] for r in good), max(r["maxrss_kb"] for r in good)
        cell.sleeps = statistics.median(r.get("sleeps", 0) for r in good)
    return cell


def _ranges_meet(low, high, other_low, other_high):
    return low <= other_high and other_low <= high


def overlap(cell, other):
    """Whether two successful cells of one column had runs that overlap:
    each one's range of values (least to greatest) meets the other's. Then
    the order of their medians is one this machine's noise can reverse, and
    a ratio above or below 1.00 between them says little. Needs two runs or
    more each to mean anything; single runs overlap only when equal."""
    return cell.ok and other.ok and _ranges_meet(cell.low, cell.high, other.low, other.high)


def rss_overlap(cell, other):
    """The same for the cells' peak RSS."""
    return cell.ok and other.ok and _ranges_meet(cell.rss_low, cell.rss_high, other.rss_low, other.rss_high)


def _as_time(cell):
    """A number where lower is better, comparable within a column."""
    if cell.metric == "time":
        return cell.value
    return 1.0 / cell.value if cell.value > 0 else float("inf")


def tables(records, allocators):
    """{(benchmark, threads, pinned): {allocator name: Cell}}, ratios set.
    A cell with any failed run counts as failed: its median (from the runs
    that passed, if any) is shown but takes no part in the ratios."""
    by_cell = defaultdict(list)
    for r in records:
        by_cell[(r["benchmark"], r["threads"], r["pinned"], r["allocator"])].append(r)
    result = defaultdict(dict)
    for (bench, threads, pinned, name), runs in by_cell.items():
        result[(bench, threads, pinned)][name] = _cell(runs)
    peers = {a.name for a in allocators if a.is_peer}
    for column in result.values():
        ranked = {n: c for n, c in column.items() if c.ok and c.value > 0}
        peer_cells = [c for n, c in ranked.items() if n in peers]
        if peer_cells:
            best_time = min(_as_time(c) for c in peer_cells)
            best_rss = min(c.rss_kb for c in peer_cells)
            for c in ranked.values():
                c.time_ratio = _as_time(c) / best_time
                c.rss_ratio = c.rss_kb / best_rss if best_rss else None
        if ranked:
            fastest = min(_as_time(c) for c in ranked.values())
            smallest = min(c.rss_kb for c in ranked.values())
            for c in ranked.values():
                c.best_time = _as_time(c) == fastest
                c.best_rss = c.rss_kb == smallest
    return result


def _peer_cells(column, allocators, preloaded=False):
    """(name, cell) of each peer in a column that ran successfully (with
    `preloaded`, of those loaded by LD_PRELOAD only: every peer but glibc)."""
    peers = {a.name for a in allocators if a.is_peer and (a.preload or not preloaded)}
    return [(n, c) for n, c in column.items() if n in peers and c.ok and c.value > 0]


def best_peer(column, allocators):
    """The name of the fastest successful peer in a column, or None."""
    candidates = _peer_cells(column, allocators)
    if not candidates:
        return None
    return min(candidates, key=lambda nc: _as_time(nc[1]))[0]


def smallest_peer(column, allocators, preloaded=False):
    """The cell of the successful peer with the least peak RSS, or None;
    `preloaded` as for _peer_cells."""
    candidates = _peer_cells(column, allocators, preloaded)
    return min((c for _, c in candidates), key=lambda c: c.rss_kb) if candidates else None


def fastpath_ratios(counts, allocators):
    """{size: {allocator: ratio to the best peer}} for the callgrind counts
    ({size: {allocator: Count}})."""
    peers = {a.name for a in allocators if a.is_peer}
    ratios = {}
    for size, row in counts.items():
        peer_values = [c.per_pair for n, c in row.items() if n in peers and c.ok]
        best = min(peer_values) if peer_values else None
        ratios[size] = {n: (c.per_pair / best if best and c.ok else None) for n, c in row.items()}
    return ratios


def versus(tables, name, other):
    """name's time over other's, one per column where both ran cleanly: a
    before/after comparison (below 1.00, name is faster), which needs no
    peer in the run."""
    found = []
    for column in tables.values():
        mine, theirs = column.get(name), column.get(other)
        if mine is None or theirs is None or not mine.ok or not theirs.ok:
            continue
        if mine.value > 0 and theirs.value > 0:
            found.append(_as_time(mine) / _as_time(theirs))
    return found


def measures(records):
    """(benchmark, allocator) -> {key: median}, from the measures of the
    runs that went well (single-threaded settings only)."""
    seen = defaultdict(lambda: defaultdict(list))
    for r in records:
        if r["status"] != "ok" or not r.get("measures") or r["threads"] != 1 or r["pinned"]:
            continue
        for pair in r["measures"].split():
            key, _, value = pair.partition("=")
            try:
                seen[(r["benchmark"], r["allocator"])][key].append(float(value))
            except ValueError:
                continue
    return {cell: {k: statistics.median(v) for k, v in values.items()} for cell, values in seen.items()}
