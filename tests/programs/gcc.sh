#!/usr/bin/env bash
# gcc compiling a generated C file (thousands of functions).
. "$(dirname "$0")/lib.sh"
awk 'BEGIN {
    for (i = 0; i < 3000; i++) {
        printf "struct s%d { int a[%d]; const char *name; };\n", i, i % 13 + 1
        printf "int f%d(int x) { struct s%d v = { {0}, \"f%d\" }; for (int i = 0; i < %d; i++) x = x * 31 + v.a[i %% %d] + i; return x ^ %d; }\n", i, i, i, i % 17, i % 13 + 1, i
    }
    printf "int main(void) { int x = 0;\n"
    for (i = 0; i < 3000; i++) printf "  x += f%d(x);\n", i
    printf "  return x == 12345; }\n"
}' >"$work/big.c"
compare_run gcc-compile-3000-functions gcc -O1 -c "$work/big.c" -o /dev/stdout
finish
