"""bench/plot.py - the report's pictures, drawn by gnuplot into PNGs next to
results.md: throughput (and peak RSS) against threads for each threaded
benchmark, time and peak RSS bars for the single-threaded ones, the
callgrind counts, and a summary of pcmalloc against the best peer.

Each plot's data and gnuplot script are kept under plots/ beside the PNG,
so a figure can be redrawn or restyled by hand. pcmalloc is always the
thick red line or bar; its variants (BENCH_VARIANTS) each get a colour of
their own from VARIANT_COLORS and a dashed line, so that a before/after
pair reads apart from the solid lines of the peers. A failed run leaves a
gap and a red note on the plot, never a made-up value.

Returns error strings instead of raising: a missing or failing gnuplot
costs the pictures, not the report.
"""

import os
import shutil
import subprocess

COLORS = {
    "pcmalloc": "#d62728",
    "glibc": "#7f7f7f",
    "jemalloc": "#1f77b4",
    "tcmalloc": "#2ca02c",
    "mimalloc": "#ff7f0e",
}
# Thread counts from light to dark blue, then the pinned run and the
# callgrind count in colours of their own.
CONFIG_COLORS = ["#c6dbef", "#9ecae1", "#6baed6", "#3182bd", "#08519c", "#e377c2", "#8c564b"]
SINGLE_COLOR = "#d62728"
# Variants, in the order BENCH_VARIANTS gives them: none of the peers' colours.
VARIANT_COLORS = ["#9467bd", "#17becf", "#8c564b", "#bcbd22", "#e377c2", "#393b79"]
# Summary-plot marks of the variants (gnuplot point types: open shapes).
VARIANT_POINTS = [6, 4, 8, 12, 10, 14]


def style(allocator, allocators):
    """(colour, gnuplot dash type) of an allocator's line, bar and legend:
    a peer's fixed colour and a solid line, or the variant's by its place
    among the variants and a dash pattern (2, 3, ...)."""
    if not allocator.is_variant:
        return COLORS.get(allocator.name, "#000000"), 1
    index = [a.name for a in allocators if a.is_variant].index(allocator.name)
    return VARIANT_COLORS[index % len(VARIANT_COLORS)], 2 + index


def _terminal():
    """pngcairo draws antialiased text; plain png is the fallback."""
    try:
        terminals = subprocess.run(["gnuplot", "-e", "set terminal"], capture_output=True,
                                   text=True, check=False, timeout=30)
        listing = terminals.stdout + terminals.stderr
    except (OSError, subprocess.TimeoutExpired):
        listing = ""
    if "pngcairo" in listing:
        return "pngcairo enhanced font 'DejaVu Sans,10'"
    return "png enhanced"


class Plotter:
    def __init__(self, out_dir):
        self.out_dir = out_dir
        self.work = os.path.join(out_dir, "plots")
        self.errors = []
        self.available = shutil.which("gnuplot") is not None
        if self.available:
            os.makedirs(self.work, exist_ok=True)
            self.terminal = _terminal()

    def _draw(self, name, script, data):
        """Writes name.dat and name.gp, runs gnuplot; True on success."""
        if not self.available:
            return False
        data_path = os.path.join(self.work, name + ".dat")
        script_path = os.path.join(self.work, name + ".gp")
        with open(data_path, "w", encoding="utf-8") as f:
            f.write(data)
        png = os.path.join(self.out_dir, name + ".png")
        header = (f"set terminal {self.terminal} size {script[0]},{script[1]}\n"
                  f"set output '{png}'\n"
                  f"data = '{data_path}'\n"
                  )
        with open(script_path, "w", encoding="utf-8") as f:
            f.write(header + script[2])
        done = subprocess.run(["gnuplot", script_path], capture_output=True, text=True,
                              check=False)
        if done.returncode != 0:
            self.errors.append(f"{name}: gnuplot: {done.stderr.strip()[-300:]}")
            return False
        return True

    # ---- throughput against threads ------------------------------------

    def threads(self, name, title, columns, configs, allocators, unit, subtitle):
        """columns: {(threads, pinned): {allocator: Cell}}; configs in
        order, the pinned one last."""
        positions = []
        for i, (threads, pinned) in enumerate(configs):
            positions.append(i + 1.5 if pinned else i + 1)
        tics = ", ".join(
            f'"{t} pinned\\n(cpu 0)" {x}' if p else f'"{t}" {x}'
            for (t, p), x in zip(configs, positions))
        blocks, plots_top, plots_bottom, failures = [], [], [], []
        for index, allocator in enumerate(allocators):
            rows = []
            for (threads, pinned), x in zip(configs, positions):
                cell = columns.get((threads, pinned), {}).get(allocator.name)
                if pinned:
                    rows.append("")  # do not join the pinned point to the 16-thread one
                if cell and cell.ok:
                    rows.append(f"{x} {cell.value / 1e6:.6g} {cell.rss_kb / 1024:.6g}")
                else:
                    rows.append(f"{x} NaN NaN")
                    if cell:
                        label = f"{threads} pinned" if pinned else f"{threads} thr"
                        failures.append(f"{allocator.name} {cell.status} at {label}")
            blocks.append("\n".join(rows))
            width = 3 if allocator.name == "pcmalloc" or allocator.is_variant else 1.5
            color, dash = style(allocator, allocators)
            line = f"with linespoints lw {width} dt {dash} pt 7 ps 1.1 lc rgb '{color}'"
            plots_top.append(f"data index {index} using 1:2 {line} "
                             f"title \"{_escape(allocator.name)}\"")
            plots_bottom.append(f"data index {index} using 1:3 {line} notitle")
        note = ""
        if failures:
            text = "; ".join(failures[:6]) + (" ..." if len(failures) > 6 else "")
            note = (f"set label 1 'FAILED: {text}' at graph 0.01, graph 0.96 left "
                    "textcolor rgb '#d62728' front\n")
        script = f"""
set multiplot title "{_escape(title)}\\n{{/*0.85 {_escape(subtitle)}}}"
set origin 0, 0.36
set size 1, 0.56
set lmargin 12
set rmargin 16
set grid ytics
set xrange [0.5:{positions[-1] + 0.5}]
set xtics ({tics})
set yrange [0:*]
set ylabel 'million {unit}'
set key outside right top
{note}
plot {", ".join(plots_top)}
unset label 1
set origin 0, 0
set size 1, 0.36
set ylabel 'peak RSS (MiB)'
set xlabel 'threads (fixed total work, split between them)'
set tmargin 1
unset key
plot {", ".join(plots_bottom)}
unset multiplot
"""
        return self._draw(name, (900, 700, script), "\n\n\n".join(blocks) + "\n")

    # ---- bars for single-threaded benchmarks ------------------------------

    def bars(self, name, title, column, allocators, subtitle):
        """Time and peak RSS bars, one per allocator, side by side."""
        rows, failures = [], []
        for i, allocator in enumerate(allocators):
            cell = column.get(allocator.name)
            color = int(style(allocator, allocators)[0][1:], 16)
            if cell and cell.ok:
                ratio = f"{cell.time_ratio:.2f}x" if cell.time_ratio else ""
                rss_ratio = f"{cell.rss_ratio:.2f}x" if cell.rss_ratio else ""
                mib = cell.rss_kb / 1024
                mib_text = f"{mib:.0f}" if mib >= 100 else f"{mib:.1f}"
                # Two short lines: side by side, long labels of similar
                # bars would run into each other.
                rows.append(f"{i} {cell.value:.6g} {mib:.6g} {color} "
                            f"{allocator.name} \"{cell.value:.3g} s\\n{ratio}\" "
                            f"\"{mib_text} MiB\\n{rss_ratio}\"")
            else:
                status = cell.status if cell else "not run"
                failures.append(f"{allocator.name}: {status}")
                rows.append(f"{i} 0 0 {color} {allocator.name} \"{status.upper()}\" \"\"")
        script = f"""
set multiplot layout 1,2 title "{_escape(title)}\\n{{/*0.85 {_escape(subtitle)}}}"
set style fill solid 0.85 border -1
set boxwidth 0.7
set grid ytics
set xrange [-0.6:{len(allocators) - 0.4}]
set yrange [0:*]
set offsets 0, 0, graph 0.2, 0
set xtics rotate by -30 nomirror
set title 'time (s), lower is better; ratio to the best peer'
plot data using 1:2:4:xtic(5) with boxes lc rgb variable notitle, \\
     data using 1:2:6 with labels offset 0,1.5 font ',9' notitle
set title 'peak RSS (MiB), lower is better; ratio to the best peer'
plot data using 1:3:4:xtic(5) with boxes lc rgb variable notitle, \\
     data using 1:3:7 with labels offset 0,1.5 font ',9' notitle
unset multiplot
"""
        return self._draw(name, (1000, 480, script), "\n".join(rows) + "\n")

    # ---- callgrind counts -------------------------------------------------

    def fastpath(self, name, counts, sizes, allocators):
        """Clustered bars: one cluster per size, one bar per allocator."""
        rows, tics = [], []
        n = len(allocators)
        for g, size in enumerate(sizes):
            centre = g * (n + 1) + (n - 1) / 2
            tics.append(f'"{_size_label(size)}" {centre}')
            for i, allocator in enumerate(allocators):
                count = counts.get(size, {}).get(allocator.name)
                color = int(style(allocator, allocators)[0][1:], 16)
                x = g * (n + 1) + i
                if count and count.ok:
                    rows.append(f"{x} {count.per_pair:.6g} {color} \"{count.per_pair:.0f}\"")
                else:
                    rows.append(f"{x} 0 {color} \"fail\"")
        legend = ", ".join(f"NaN with boxes lc rgb '{style(a, allocators)[0]}' "
                           f"title '{a.name}'" for a in allocators)
        script = f"""
set title "Fast path: instructions per malloc+free pair (callgrind; lower is better)\\n{{/*0.85 loop overhead subtracted; steady state after a warm-up}}"
set style fill solid 0.85 border -1
set boxwidth 0.9
set grid ytics
set yrange [0:*]
set offsets 0, 0, graph 0.1, 0
set xrange [-1:{len(sizes) * (n + 1) - 1}]
set xtics ({", ".join(tics)})
set xlabel 'object size (bytes)'
set ylabel 'instructions per pair'
set key outside right top
plot data using 1:2:3 with boxes lc rgb variable notitle, \\
     data using 1:2:4 with labels offset 0,0.8 font ',8' notitle, {legend}
"""
        return self._draw(name, (1000, 480, script), "\n".join(rows) + "\n")

    # ---- the summary ----------------------------------------------------

    def summary(self, name, groups, config_names, rss_groups, subtitle, variants=()):
        """groups: [(label, [(config index, ratio or None, {variant: ratio
        or None})])] drawn as bars from 1 to pcmalloc's ratio on a log
        scale, each variant's ratio a mark on its bar; rss_groups:
        [(label, ratio)]."""
        if not self.available:
            return False  # no gnuplot: no plots, and no directory to write their data in
        rows, tics, x = [], [], 0
        marks = {v.name: [] for v in variants}
        for label, bars in groups:
            start = x
            for config, ratio, variant_ratios in bars:
                color = int(CONFIG_COLORS[config % len(CONFIG_COLORS)][1:], 16)
                if ratio:
                    low, high = min(ratio, 1.0), max(ratio, 1.0)
                    rows.append(f"{x} 1 {x - 0.4} {x + 0.4} {low:.6g} {high:.6g} {color}")
                for variant, mark in marks.items():
                    if variant_ratios.get(variant):
                        mark.append(f"{x} {variant_ratios[variant]:.6g}")
                x += 1
            tics.append(f'"{_escape(label)}" {(start + x - 1) / 2}')
            x += 1
        rss_rows, rss_tics = [], []
        for i, (label, ratio) in enumerate(rss_groups):
            rss_tics.append(f'"{_escape(label)}" {i}')
            if ratio:
                low, high = min(ratio, 1.0), max(ratio, 1.0)
                rss_rows.append(f"{i} 1 {i - 0.35} {i + 0.35} {low:.6g} {high:.6g} "
                                f"\"{ratio:.2f}\" {ratio:.6g}")
        ratios = [r for _, bars in groups for _, r, _ in bars if r] + \
                 [r for _, r in rss_groups if r] + \
                 [float(m.split()[1]) for mark in marks.values() for m in mark]
        top = max(2.0, max(ratios, default=2.0) * 1.3)
        bottom = min(0.5, min(ratios, default=0.5) / 1.3)
        legend = ", ".join(f"NaN with boxes lc rgb '{CONFIG_COLORS[i % len(CONFIG_COLORS)]}' "
                           f"title \"{_escape(label)}\"" for i, label in enumerate(config_names))
        rss_path = os.path.join(self.work, name + "_rss.dat")
        with open(rss_path, "w", encoding="utf-8") as f:
            f.write("\n".join(rss_rows) + "\n")
        mark_plots = self._variant_marks(name, marks, variants)
        marks_note = "; marks: its variants" if variants else ""
        script = f"""
set multiplot title "pcmalloc against the best peer (ratio; below 1 = pcmalloc better{marks_note})\\n{{/*0.85 {_escape(subtitle)}}}"
set style fill solid 0.9 border -1
set logscale y 2
set yrange [{bottom:.4g}:{top:.4g}]
set ytics ("1/8" 0.125, "1/4" 0.25, "1/2" 0.5, "1" 1, "2" 2, "4" 4, "8" 8, "16" 16, "32" 32, "64" 64)
set grid ytics
set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead lw 2 lc rgb '#000000' front
set lmargin 10
set rmargin 18
set origin 0, 0.45
set size 1, 0.5
set xrange [-1:{x - 1}]
set xtics ({", ".join(tics)}) rotate by -25 nomirror
set ylabel 'time / best peer time (fastpath: instructions)'
set key outside right top title 'threads'
plot data using 1:2:3:4:5:6:7 with boxxyerror lc rgb variable notitle, {legend}{mark_plots}
set origin 0, 0
set size 1, 0.45
set tmargin 2
set title 'peak RSS / smallest peer RSS (threaded: at the largest thread count)' offset 0,-0.5
set xrange [-1:{len(rss_groups)}]
set xtics ({", ".join(rss_tics)}) rotate by -25 nomirror
set ylabel 'RSS / best peer RSS'
unset key
plot '{rss_path}' using 1:2:3:4:5:6 with boxxyerror lc rgb '{SINGLE_COLOR}' notitle, \\
     '{rss_path}' using 1:8:7 with labels offset 0,0.7 font ',8' notitle
unset multiplot
"""
        return self._draw(name, (1200, 820, script), "\n".join(rows) + "\n")

    def _variant_marks(self, name, marks, variants):
        """Writes the variants' summary marks (one data block each) and
        returns the plot clauses that draw them, "" without variants."""
        if not variants:
            return ""
        path = os.path.join(self.work, name + "_variants.dat")
        with open(path, "w", encoding="utf-8") as f:
            # A block with no point would shift gnuplot's index numbering.
            f.write("\n\n\n".join("\n".join(marks[v.name]) or "NaN NaN" for v in variants)
                    + "\n")
        clauses = []
        for index, variant in enumerate(variants):
            color, _ = style(variant, variants)
            point = VARIANT_POINTS[index % len(VARIANT_POINTS)]
            clauses.append(f"'{path}' index {index} using 1:2 with points pt {point} ps 1.6 "
                           f"lw 2 lc rgb '{color}' title \"{_escape(variant.name)}\"")
        return ", \\\n     " + ", \\\n     ".join(clauses)


def _escape(text):
    """Text for a double-quoted gnuplot string in enhanced mode, where _ and
    ^ would start a subscript or superscript."""
    return (text.replace("\\", "\\\\").replace('"', '\\"')
            .replace("_", "\\\\_").replace("^", "\\\\^"))


def _size_label(size):
    return "16..512 mixed" if size == 0 else str(size)
