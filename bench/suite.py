"""bench/suite.py - the benchmarks the runner knows: which program, with
which arguments in a full run and in a quick one (BENCH_QUICK=1), whether
it is threaded, and a sentence on what it stresses for the report.

Sizes are chosen so that one full run takes roughly 0.2-2 s on a small
2-core machine, and the whole suite (3 repetitions, 5 allocators, 5 thread
counts and a pinned run: about 700 runs, then the callgrind counts) about
ten minutes. Quick sizes are a fifth of those (workload 1 and 3: a third or
less): long enough that the threads of a run overlap, short enough for a
one-minute smoke test. The
threaded programs split a fixed amount of work over their threads, so
throughput against threads shows scaling (and, past the cores, whether
oversubscription costs anything).

Only data here: no running, no reporting.
"""

from dataclasses import dataclass

THREAD_COUNTS = [1, 2, 4, 8, 16]
# The pinned run: this many threads, all on CPU 0 (taskset -c 0). More than
# one thread, so every switch between them is a preemption, possibly of a
# thread inside the allocator.
PINNED_THREADS = 4


@dataclass
class Benchmark:
    name: str
    program: str
    title: str
    about: str
    threaded: bool
    args: dict
    quick_args: dict


BENCHMARKS = [
    Benchmark(
        "tree", "tree", "Tree of small mixed-size objects (one thread, -pthread)",
        "Workload 1: a single-threaded program linked with -pthread (it starts and joins one idle "
        "thread first) builds, walks and destroys a tree of nodes, names, child arrays grown by "
        "realloc and text grown by realloc. Time of all rounds; lower is better. The measures "
        "table splits it by phase: build (the mallocs and reallocs), walk (no allocator call) "
        "and destroy (the frees, mostly of objects no longer in cache), and gives the resident "
        "set (above the program's own) once the last tree is freed: at once, and after a 1.5 s "
        "pause and a short burst of calls (neither is timed).",
        False, {"nodes": 250000, "rounds": 4, "idle_ms": 1500},
        {"nodes": 100000, "rounds": 1, "idle_ms": 10}),
    Benchmark(
        "realloc_grow", "realloc_grow", "realloc(p, size += 4096), 350 steps a round",
        "Workload 2: a buffer grows from 4097 bytes by 4096 bytes per realloc, 350 steps a round, "
        "each step writing its new bytes. An allocator that copies on every step is O(n^2). "
        "Time of all rounds; lower is better.",
        False, {"rounds": 2000, "between": 0}, {"rounds": 200, "between": 0}),
    Benchmark(
        "realloc_grow_between", "realloc_grow", "realloc(p, size += 4096) with a small malloc between steps",
        "Workload 2, harder: as realloc_grow, but a 32-byte allocation is made (and kept until "
        "the end of the round) after every step, where it may block growth in place. "
        "Time of all rounds; lower is better.",
        False, {"rounds": 2000, "between": 1}, {"rounds": 200, "between": 1}),
    Benchmark(
        "realloc_doubling", "realloc_grow", "realloc(p, size += 4096): rounds of 350 to 2800 steps",
        "Workload 2's growth with its length: rounds of 350 steps as in realloc_grow, then of "
        "700, 1400 and 2800 (each length half the bytes of the first, after one untimed round). "
        "Time of all timed rounds; lower is better. The measures table gives the microseconds a "
        "round at each length and the ratio of each doubling: 2 when a round's time grows "
        "linearly with its steps, 4 when it grows with their square (a copy of the buffer at "
        "every step). A buffer that outgrows a cache raises it for every allocator (350 steps "
        "make 1.4 MB).",
        False, {"rounds": 1000, "between": 0, "doublings": 3},
        {"rounds": 200, "between": 0, "doublings": 3}),
    Benchmark(
        "realloc_doubling_between", "realloc_grow",
        "realloc(p, size += 4096), a small malloc between steps: rounds of 350 to 2800 steps",
        "As realloc_doubling, with realloc_grow_between's small allocation after every step.",
        False, {"rounds": 1000, "between": 1, "doublings": 3},
        {"rounds": 200, "between": 1, "doublings": 3}),
    Benchmark(
        "list", "list", "Linked list of 10 million 24-byte nodes",
        "Workload 3: 10 million nodes of 24 bytes, one malloc each, built, walked and freed. "
        "Time; lower is better. Peak RSS shows each allocator's cost per 24-byte object. The "
        "measures table splits the time by phase: build, walk (no allocator call) and free, and "
        "gives the resident set (above the program's own) once every node is freed: at once, "
        "and after a 1.5 s pause and a short burst of calls (neither is timed).",
        False, {"nodes": 10000000, "rounds": 1, "idle_ms": 1500},
        {"nodes": 2000000, "rounds": 1, "idle_ms": 10}),
    Benchmark(
        "lifo", "lifo", "Threads sharing a lock-free LIFO",
        "Workload 4: each thread draws k in 1..32 and either mallocs k objects of 16..512 bytes "
        "and pushes them, or pops up to k and frees them: almost every free is remote. "
        "Objects made (and freed) per second; higher is better.",
        True, {"draws": 1000000}, {"draws": 500000}),
    Benchmark(
        "larson", "larson", "Larson server simulation",
        "Each thread replaces random objects (16..400 bytes) in a table of 1000; after each of "
        "20 rounds the tables move on to the next thread, which frees what another allocated. "
        "Replacements per second; higher is better.",
        True, {"ops": 25000000}, {"ops": 5000000}),
    Benchmark(
        "cache_scratch", "cache_scratch", "cache-scratch (passive false sharing)",
        "Each thread frees an 8-byte object the main thread allocated next to its siblings', then "
        "mallocs, writes 1000 times and frees 8-byte objects. Slow if the allocator hands a thread "
        "a slot on a cache line other threads write. Objects per second; higher is better.",
        True, {"objects": 100000}, {"objects": 20000}),
    Benchmark(
        "cache_thrash", "cache_thrash", "cache-thrash (active false sharing)",
        "Each thread mallocs an 8-byte object, writes it 1000 times and frees it. Slow if objects "
        "of different threads share cache lines. Objects per second; higher is better.",
        True, {"objects": 150000}, {"objects": 30000}),
    Benchmark(
        "xmalloc", "xmalloc", "Producer/consumer (xmalloc-style)",
        "Half of the threads malloc batches of 100 objects of 16..256 bytes, the other half free "
        "them (one thread: it frees its own). Every free is remote. Objects per second; "
        "higher is better.",
        True, {"objects": 6000000}, {"objects": 2000000}),
    Benchmark(
        "threadtest", "threadtest", "threadtest (private batches)",
        "Each thread mallocs a batch of 1000 64-byte objects, then frees them all, again and "
        "again; nothing is shared. Objects per second; higher is better.",
        True, {"objects": 50000000}, {"objects": 10000000}),
    Benchmark(
        "cxx_containers", "cxx_containers", "C++ containers (operator new and delete)",
        "Each thread keeps a std::map from std::string keys to std::vector values and a "
        "std::unordered_map of std::string, and inserts, appends, replaces and erases at random "
        "among 4096 keys: every allocation is the standard library's operator new, every free "
        "its sized operator delete. Operations per second; higher is better.",
        True, {"ops": 3000000}, {"ops": 600000}),
    Benchmark(
        "mixed_sizes", "mixed_sizes", "Mixed sizes up to 4 MiB",
        "Each thread replaces random objects in a table of 200, with sizes 16 B..1 KiB (84%), "
        "1..64 KiB (15%) and 64 KiB..4 MiB (1%), writing every page it gets. "
        "Replacements per second; higher is better.",
        True, {"ops": 200000}, {"ops": 100000}),
    Benchmark(
        "fragmentation", "fragmentation", "Fragmentation: 1 in 100 objects long-lived, the rest freed",
        "One thread allocates a million objects of 16..512 bytes, keeps one in 100 at random and "
        "frees the others. The measures table gives the resident set (above the program's own) "
        "right after the free, after a 1.5 s pause and a short burst of calls, and after "
        "malloc_trim(0), each as KiB and as a ratio to the live bytes; pages_with_live is the floor "
        "for an allocator that does not move objects. Time of the allocations and frees; lower is "
        "better (the pause is not timed).",
        False, {"objects": 1000000, "keep": 100, "idle_ms": 1500},
        {"objects": 200000, "keep": 100, "idle_ms": 0}),
    Benchmark(
        "perl", "programs", "perl: hashes, arrays, a sort (a real program)",
        "Debian's perl builds a hash of 300,000 strings and an array of as many pairs, deletes "
        "half the hash, sorts the array by string and grows a string. Time; lower is better. "
        "The checksum hashes the program's output.",
        False, {"size": 300000, "program": "perl"}, {"size": 50000, "program": "perl"}),
    Benchmark(
        "python", "programs", "python3: JSON dumps and loads, every object by malloc (a real program)",
        "Debian's python3 with PYTHONMALLOC=malloc (so its small objects come from malloc too, "
        "not from pymalloc's pools) builds 2,000 dicts of 50 entries, each a list of a number, a "
        "string and a small dict, dumps them as JSON and parses the text three times. Time; "
        "lower is better.",
        False, {"size": 100000, "program": "python"}, {"size": 20000, "program": "python"}),
    Benchmark(
        "sqlite", "programs", "sqlite3: an in-memory table (a real program)",
        "Debian's sqlite3 shell inserts 300,000 rows into an in-memory table, indexes them, "
        "scans, groups and deletes a third. SQLite allocates its pages through malloc. Time; "
        "lower is better.",
        False, {"size": 300000, "program": "sqlite"}, {"size": 50000, "program": "sqlite"}),
    Benchmark(
        "gcc", "programs", "gcc -O2: one generated file (a real program)",
        "Debian's gcc compiles, at -O2 to assembly, a generated file of 200 struct types and "
        "functions (its compiler proper, cc1, runs under the allocator too). Time; lower is "
        "better; peak RSS is cc1's.",
        False, {"size": 2000, "program": "gcc"}, {"size": 300, "program": "gcc"}),
    Benchmark(
        "clang", "programs", "clang++ -O2: one generated C++ file (a real program)",
        "Debian's clang++ compiles, at -O2 to assembly, a generated C++ file of 15 classes, each "
        "filling a std::vector and a std::map keyed by std::string and sorting the vector with a "
        "lambda of its own: LLVM's template instantiations and optimisers, in C++, allocate many "
        "small objects. Time; lower is better.",
        False, {"size": 1500, "program": "clang"}, {"size": 300, "program": "clang"}),
]

# The callgrind microbenchmark: 0 is the mixed sequence of 16..512 bytes.
FASTPATH_SIZES = [0, 16, 64, 256, 512]
FASTPATH_QUICK_SIZES = [0]
FASTPATH_ARGS = {"pairs": 200000, "warmup": 20000}
FASTPATH_QUICK_ARGS = {"pairs": 50000, "warmup": 10000}

PROGRAMS = sorted({b.program for b in BENCHMARKS} | {"fastpath"})
NAMES = [b.name for b in BENCHMARKS] + ["fastpath"]


def configs(benchmark, thread_counts, pinned_threads):
    """The (threads, pinned) settings a benchmark runs at."""
    if not benchmark.threaded:
        return [(1, False)]
    return [(t, False) for t in thread_counts] + [(pinned_threads, True)]


def config_label(benchmark, threads, pinned):
    if not benchmark.threaded:
        return "-"
    return f"{threads} pinned" if pinned else str(threads)


def argv(benchmark, quick, threads, scale=1.0):
    """The program's key=value arguments. scale multiplies the first
    (work-size) argument, for BENCH_SCALE."""
    args = dict(benchmark.quick_args if quick else benchmark.args)
    if scale != 1.0:
        first = next(iter(args))
        args[first] = max(1, int(args[first] * scale))
    if benchmark.threaded:
        args = {"threads": threads, **args}
    return [f"{k}={v}" for k, v in args.items()]
