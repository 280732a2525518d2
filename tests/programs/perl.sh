#!/usr/bin/env bash
# perl's string append: $y .= "." x 4096, 350 times a round - the
# realloc(p, size += 4096) workload.
. "$(dirname "$0")/lib.sh"
perl=$(program perl) || no_program
compare_run perl-string-append "$perl" -e '
    my $sum = 0;
    for my $round (1 .. '"$(scaled 200)"') { my $y = ""; $y .= "." x 4096 for 1 .. 350; $sum += length $y; }
    print "$sum\n";'
finish
