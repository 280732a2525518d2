#!/usr/bin/env bash
# perl's string append: $y .= "." x 4096, 350 times a round - the
# realloc(p, size += 4096) workload; then a hash of tens of thousands of
# entries (arrays, hashes and strings of every length as values), sorted,
# joined, rewritten by a regex, split and two thirds deleted.
. "$(dirname "$0")/lib.sh"
perl=$(program perl) || no_program
compare_run perl-string-append "$perl" -e '
    my $sum = 0;
    for my $round (1 .. '"$(scaled 200)"') { my $y = ""; $y .= "." x 4096 for 1 .. 350; $sum += length $y; }
    print "$sum\n";'
compare_run perl-hash-sort-regex "$perl" -e '
    my $n = '"$(scaled 40000)"';
    my %h;
    $h{"key$_"} = [$_, "v" x ($_ % 97), { n => $_ }] for 1 .. $n;
    my @k = sort { $h{$a}[0] % 1000 <=> $h{$b}[0] % 1000 or $a cmp $b } keys %h;
    (my $text = join "\n", map { "$_=" . length($h{$_}[1]) } @k) =~ s/key(\d+)=(\d+)/K$2:$1/g;
    my @lines = split /\n/, $text;
    my %count;
    $count{substr($_, 0, 3)}++ for @lines;
    delete $h{"key$_"} for grep { $_ % 3 } 1 .. $n;
    print scalar(keys %h), " ", scalar(@lines), " ", length($text), " ",
        join(",", map { "$_:$count{$_}" } (sort keys %count)[0 .. 4]), "\n";'
finish
