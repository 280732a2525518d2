/*
 * bench/programs.c - real programs under the allocator: perl, Python,
 * SQLite's shell, gcc and clang++, each on a fixed workload written here,
 * so the report shows what preloading an allocator does for programs
 * people run, beside the synthetic benchmarks.
 *
 *   programs size=N program=perl|python|sqlite|gcc|clang
 * starts the Debian program (it inherits LD_PRELOAD, so the allocator
 * under test serves it), reads what it prints, and prints the wall time of
 * the run. The checksum is a hash of that output: the same under every
 * allocator, so a wrong result under one of them shows as a bad checksum.
 *
 * The workloads:
 *   perl    builds a hash of N strings and an array of N pairs, deletes
 *           half the hash, sorts the array by string, grows one string;
 *   python  builds N/50 dicts of 50 entries, each a list of a number, a
 *           string and a small dict (N of each), dumps them as JSON and
 *           parses the text three times, with PYTHONMALLOC=malloc so every
 *           object goes through malloc (pymalloc would serve the small
 *           ones from its own pools);
 *   sqlite  an in-memory table of N rows: inserts, an index, scans,
 *           a grouping and deletes;
 *   gcc     compiles (-O2, to assembly) a generated file of N/10 struct
 *           types and functions; the source is written before the clock
 *           starts;
 *   clang   compiles (clang++ -O2, to assembly) a generated C++ file of
 *           N/100 classes, each filling a std::vector and a std::map
 *           keyed by std::string and sorting the vector with a lambda of
 *           its own: the template instantiations and the optimisers'
 *           work on them are LLVM's many small objects.
 */
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

static const char perl_script[] =
    "my $n = shift; my (%h, @a);\n"
    "for my $i (1 .. $n) { $h{\"key$i\"} = \"value\" x ($i % 7 + 1); push @a, [$i, \"s$i\"]; }\n"
    "my $t = 0; $t += length $h{$_} for keys %h;\n"
    "delete $h{\"key$_\"} for 1 .. int($n / 2);\n"
    "my @s = sort { $a->[1] cmp $b->[1] } @a;\n"
    "my $str = ''; $str .= 'x' x 100 for 1 .. int($n / 10);\n"
    "print join(' ', $t, scalar(keys %h), map({ $_->[0] } @s[0 .. 9]), length $str), \"\\n\";\n";

static const char python_script[] =
    "import json, sys\n"
    "n = int(sys.argv[1])\n"
    "d = [{'k%d' % i: [i, str(i) * (i % 5), {'x': i}] for i in range(j, j + 50)}"
    " for j in range(0, n, 50)]\n"
    "s = json.dumps(d)\n"
    "t = 0\n"
    "for _ in range(3):\n"
    "    t += sum(len(e) for e in json.loads(s))\n"
    "print(len(s), t)\n";

/* %ld: the row count. Every value is derived from the row number. */
static const char sqlite_script[] =
    "CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT, c REAL);\n"
    "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < %ld)\n"
    "  INSERT INTO t SELECT x, printf('%%08x-%%s', (x * 2654435761) %% 4294967296,\n"
    "                                 substr('abcdefghijklmnopqrstuvwxyz', 1, x %% 26 + 1)), x * 1.5 FROM n;\n"
    "CREATE INDEX tb ON t(b);\n"
    "SELECT count(*), sum(length(b)) FROM t WHERE b > '8';\n"
    "SELECT substr(b, 1, 2), count(*) FROM t GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 3;\n"
    "DELETE FROM t WHERE a %% 3 = 0;\n"
    "SELECT count(*), total(c) FROM t;\n";

/* One struct type and one function using it per unit, each calling the
 * previous one: enough for gcc's optimisers to build and drop a good deal
 * of their trees. */
static void write_gcc_source(FILE *f, long units)
{
    fputs("#include <string.h>\n", f);
    for (long i = 0; i < units; i++) {
        fprintf(f, "struct s%ld { int a; double b; char c[%ld]; };\n", i, i % 40 + 1);
        fprintf(f, "int f%ld(int x, struct s%ld *p) {\n  int r = x;\n", i, i);
        fprintf(f, "  for (int j = 0; j < x; j++) {\n    r += p->a * j + (int)p->b;\n");
        if (i > 0)
            fprintf(f, "    if (r %% %ld == 1) r ^= f%ld(r & 7, (void *)p);\n", i + 3, i - 1);
        fputs("  }\n  switch (x) {\n", f);
        for (long k = 0; k < 12; k++)
            fprintf(f, "  case %ld: r += %ld; break;\n", k, k * i);
        fprintf(f, "  }\n  return r + (int)strlen(p->c);\n}\n");
    }
}

/* One class per unit: a std::sort with a lambda of its own (a new
 * instantiation of the sort each), a std::map keyed by strings, an
 * instance of a class template; no unit calls another, so the compile
 * time grows linearly with the units. */
static void write_clang_source(FILE *f, long units)
{
    fputs("#include <algorithm>\n#include <map>\n#include <string>\n#include <vector>\n"
          "template <int K> struct Acc { long v = K; long add(long x) { return v += x * K; } };\n", f);
    for (long i = 0; i < units; i++) {
        fprintf(f, "struct S%ld {\n  std::vector<long> v;\n  std::map<std::string, long> m;\n", i);
        fputs("  long run(long n) {\n    for (long j = 0; j < n; j++) {\n", f);
        fprintf(f, "      v.push_back(j * %ld %% 97);\n      m[std::to_string(j %% %ld)] += j;\n    }\n", i + 1,
                i % 13 + 2);
        fprintf(f, "    std::sort(v.begin(), v.end(), [](long a, long b) { return a %% %ld < b %% %ld; });\n",
                i % 7 + 2, i % 7 + 2);
        fprintf(f, "    long s = Acc<%ld>().add(v.empty() ? 0 : v.back());\n", i % 16);
        fputs("    for (auto &kv : m)\n      s += kv.second * (long)kv.first.size();\n    return s;\n  }\n};\n", f);
    }
    fputs("long run_all(long n) {\n  long s = 0;\n", f);
    for (long i = 0; i < units; i++)
        fprintf(f, "  s += S%ld().run(n);\n", i);
    fputs("  return s;\n}\n", f);
}

/* A program that cannot run, or fails, is a failed run (exit 1), not a
 * corrupt object (bench_fail's exit 3). */
__attribute__((noreturn, format(printf, 1, 2)))
static void cannot_run(const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    bench_vfail(1, format, ap);
}

/* FNV-1a, 64 bits: the checksum of everything the program printed. */
static uint64_t hash_bytes(uint64_t hash, const unsigned char *bytes, size_t count)
{
    for (size_t i = 0; i < count; i++)
        hash = (hash ^ bytes[i]) * UINT64_C(0x100000001b3);
    return hash;
}

/* A compiler's generated source, in a directory of its own so that its
 * name (which the compiler writes into the assembly) is the same in every
 * run; both are removed however the run ends. */
static char source_dir[] = "/tmp/pcmalloc-bench-XXXXXX";
#define SOURCE_NAME_MAX sizeof "unit.cpp"
/* Its path, once the directory is made ("": not made). */
static char source_path[sizeof source_dir + SOURCE_NAME_MAX];

static void remove_source(void)
{
    if (!source_path[0])
        return;
    unlink(source_path);
    rmdir(source_dir);
}

/* Writes the source `name` (at most SOURCE_NAME_MAX bytes with its NUL)
 * with write(f, units) into a new directory, which it returns. */
static const char *write_source(const char *name, void (*write)(FILE *, long), long units)
{
    if (!mkdtemp(source_dir))
        cannot_run("cannot make a directory in /tmp");
    snprintf(source_path, sizeof source_path, "%s/%s", source_dir, name);
    atexit(remove_source);
    FILE *source = fopen(source_path, "w");
    if (!source)
        cannot_run("cannot write %s", source_path);
    write(source, units);
    if (fclose(source) != 0)
        cannot_run("cannot write %s", source_path);
    return source_dir;
}

/* Runs argv in directory dir (NULL: this one) with stdout to a pipe;
 * returns the hash of its output and stores the wall time of the run.
 * Fails on any exit but 0. */
static uint64_t run_program(char *const argv[], const char *dir, double *seconds)
{
    if (access(argv[0], X_OK) != 0)
        cannot_run("%s is not installed (scripts/bench_deps.sh installs it)", argv[0]);
    int out[2];
    if (pipe(out) != 0)
        cannot_run("pipe failed");
    double begin = bench_now();
    pid_t child = fork();
    if (child < 0)
        cannot_run("fork failed");
    if (child == 0) {
        dup2(out[1], STDOUT_FILENO);
        close(out[0]);
        close(out[1]);
        if (dir && chdir(dir) != 0)
            _exit(126);
        execv(argv[0], argv);
        _exit(127);
    }
    close(out[1]);
    uint64_t hash = UINT64_C(0xcbf29ce484222325);
    unsigned char buffer[65536];
    ssize_t got;
    while ((got = read(out[0], buffer, sizeof buffer)) != 0) {
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            cannot_run("reading %s's output failed", argv[0]);
        hash = hash_bytes(hash, buffer, (size_t)got);
    }
    close(out[0]);
    int status;
    while (waitpid(child, &status, 0) < 0)
        if (errno != EINTR)
            cannot_run("waitpid failed");
    *seconds = bench_now() - begin;
    if (WIFSIGNALED(status)) {
        /* The same signal for the runner to see as a crash of this run. */
        fprintf(stderr, "%s: killed by signal %d\n", argv[0], WTERMSIG(status));
        remove_source();
        signal(WTERMSIG(status), SIG_DFL);
        raise(WTERMSIG(status));
        exit(1);
    }
    if (WEXITSTATUS(status) != 0)
        cannot_run("%s exited with status %d", argv[0], WEXITSTATUS(status));
    return hash;
}

int main(int argc, char **argv)
{
    long size = bench_arg(argc, argv, "size", 100000);
    const char *program = bench_arg_text(argc, argv, "program");
    bench_args_done(argc, argv);
    if (!program)
        bench_fail("argument program= is missing");
    if (size < 10)
        bench_fail("need size >= 10");

    char number[32];
    snprintf(number, sizeof number, "%ld", size);
    double seconds;
    uint64_t checksum;
    if (strcmp(program, "perl") == 0) {
        char *args[] = { "/usr/bin/perl", "-e", (char *)perl_script, number, NULL };
        checksum = run_program(args, NULL, &seconds);
    } else if (strcmp(program, "python") == 0) {
        /* Debian's python3 (PATH may hold another build); fixed hash seed. */
        setenv("PYTHONMALLOC", "malloc", 1);
        setenv("PYTHONHASHSEED", "0", 1);
        char *args[] = { "/usr/bin/python3", "-c", (char *)python_script, number, NULL };
        checksum = run_program(args, NULL, &seconds);
    } else if (strcmp(program, "sqlite") == 0) {
        char sql[sizeof sqlite_script + 32];
        snprintf(sql, sizeof sql, sqlite_script, size);
        char *args[] = { "/usr/bin/sqlite3", ":memory:", sql, NULL };
        checksum = run_program(args, NULL, &seconds);
    } else if (strcmp(program, "gcc") == 0) {
        const char *dir = write_source("unit.c", write_gcc_source, size / 10);
        char *args[] = { "/usr/bin/gcc", "-O2", "-S", "-o", "-", "unit.c", NULL };
        checksum = run_program(args, dir, &seconds);
    } else if (strcmp(program, "clang") == 0) {
        const char *dir = write_source("unit.cpp", write_clang_source, size / 100);
        char *args[] = { "/usr/bin/clang++", "-O2", "-S", "-o", "-", "unit.cpp", NULL };
        checksum = run_program(args, dir, &seconds);
    } else {
        bench_fail("program=%s: not perl, python, sqlite, gcc or clang", program);
        return 1;
    }
    bench_report_time(seconds, checksum);
    return 0;
}
