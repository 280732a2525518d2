#!/usr/bin/env bash
# tests/programs/cxx.sh - C++ under pcmalloc: a program of our own on the
# C++ runtime (cxx_runtime.cpp: containers, every form of operator new and
# delete, exceptions across threads, objects destroyed on other threads),
# and clang++ itself - LLVM, a large C++ program - compiling a generated
# C++ file at -O2.  Each is run without and with pcmalloc preloaded; the
# outputs must match.
. "$(dirname "$0")/lib.sh"
clang=$(program clang++) || no_program
if "$clang" -std=c++17 -fsized-deallocation -O2 -pthread -o "$work/cxx_runtime" "$(dirname "$0")/cxx_runtime.cpp" 2>"$work/build.err"; then
    compare_run cxx-runtime "$work/cxx_runtime"
else
    fail "cxx-runtime: clang++ could not build cxx_runtime.cpp:"
    head -20 "$work/build.err"
fi
# Classes that each fill a vector and a map of strings and sort the
# vector with a lambda of their own: template instantiation and -O2.
awk -v n="$(scaled 40)" 'BEGIN {
    print "#include <algorithm>\n#include <map>\n#include <string>\n#include <vector>"
    for (i = 0; i < n; i++) {
        printf "struct S%d {\n  std::vector<long> v;\n  std::map<std::string, long> m;\n", i
        printf "  long run(long n) {\n    for (long j = 0; j < n; j++) {\n"
        printf "      v.push_back(j * %d %% 97);\n      m[std::to_string(j %% %d)] += j;\n    }\n", i + 1, i % 13 + 2
        printf "    std::sort(v.begin(), v.end(), [](long a, long b) { return a %% %d < b %% %d; });\n", i % 7 + 2, i % 7 + 2
        printf "    long s = 0;\n    for (auto &kv : m)\n      s += kv.second * (long)kv.first.size();\n    return s;\n  }\n};\n"
    }
    printf "long run_all(long n) {\n  long s = 0;\n"
    for (i = 0; i < n; i++) printf "  s += S%d().run(n);\n", i
    printf "  return s;\n}\n"
}' >"$work/unit.cpp"
# In its directory: the file name goes into the assembly.
cd "$work" || exit 1
compare_run clang++-O2-40-classes "$clang" -O2 -S -o - unit.cpp
finish
