"""Issue 20: how the power cap's noise reaches a ratio, and which way of sampling cancels it.

Session 33 read the default bench's samples (perf/LOG.md): at shapes that hold the H100 at its
700 W cap, one 20 ms sample of a GEMM varies with a CV of 2-8%, and in the time order of a round
the deviations of consecutive samples (24 ms apart, spacer included) correlate at +0.36, then
+0.15, -0.13, -0.20 at lags 2-4: the clock swings over ~100-200 ms, slower than a sample. A ratio
of two samples 24-150 ms apart inherits most of that swing; two contenders whose launches
alternate inside one window see the same swing and should not. This script measures both on two
identical cuBLAS GEMMs (PyTorch, bf16 4096^3 by default), whose true ratio is 1:

A  6000 launches back to back, one event pair each: the autocorrelation of the per-launch
   times at lags of 1 to 2000 launches, and the CV of block means against the block's length.
B  blocks, as the bench samples today: per round a block of X's launches then one of Y's
   (alternating which goes first), each `window_ms` long; per repeat the median of the
   rounds' Y/X ratios, 6 repeats of 2 s each.
C  interleaved, the candidate method: per round one window of X, Y, X, Y, ... launches with an
   event between each, X's time the sum of its launches' intervals and Y's likewise; the same
   repeats and GPU time as B.
D  turns, the bench's method since session 34: as C, in turns of ~2 ms of launches (windows of
   at least two turns each).

For each window length the spread of the repeats' medians in B against C is the run-to-run
move each method would show at that GPU time. Usage, on the GPU machine:

    python3 perf/power_noise.py OUT.json [M N K]

and, anywhere, the lag correlations of a bench report's samples (the figures above):

    python3 perf/power_noise.py lags REPORT.json[.gz] ...
"""
import gzip, json, math, statistics as st, sys, time


def turn_order(count, round_):
    """The bench's order of `count` contenders in round `round_` (tests/src/bench/method.rs,
    `turn_order`: a Williams design)."""
    if count == 0:
        return []
    first = [0 if p == 0 else ((p + 1) // 2 if p % 2 else count - p // 2) for p in range(count)]
    cycle = count if count % 2 == 0 else 2 * count
    row = round_ % cycle
    order = [(c + row) % count for c in first]
    return order[::-1] if row >= count else order


def lags(paths):
    """Per report: the correlation of consecutive samples' log deviations from their contender's
    median, in each round's time order, over the GEMM cases of at least 4096^3's work."""
    assert turn_order(5, 0) == [0, 1, 4, 2, 3]
    for path in paths:
        report = json.load(gzip.open(path) if path.endswith('.gz') else open(path))
        pairs = {lag: [] for lag in (1, 2, 3, 4)}
        for case in report['cases']:
            if case['section'] != 'gemm' or case['work'] < 2 * 4096 ** 3 * 0.99:
                continue
            rounds = {}
            for index, contender in enumerate(case['contenders']):
                if not contender['samples']:
                    continue
                middle = st.median(s['ms'] for s in contender['samples'])
                for sample in contender['samples']:
                    rounds.setdefault(sample['round'], {})[index] = math.log(sample['ms'] / middle)
            for round_, deviations in rounds.items():
                timed = sorted(deviations)
                seq = [deviations[timed[place]] for place in turn_order(len(timed), round_)]
                for lag, found in pairs.items():
                    found.extend(zip(seq, seq[lag:]))
        text = []
        for lag, found in pairs.items():
            xs, ys = [a for a, _ in found], [b for _, b in found]
            mx, my = st.mean(xs), st.mean(ys)
            cov = sum((a - mx) * (b - my) for a, b in found)
            r = cov / math.sqrt(sum((a - mx) ** 2 for a in xs) * sum((b - my) ** 2 for b in ys))
            text.append(f'lag {lag}: {r:+.3f} ({len(found)} pairs)')
        print(path + ': ' + ', '.join(text))


def main():
    if sys.argv[1] == 'lags':
        return lags(sys.argv[2:])
    import torch
    m, n, k = (int(x) for x in sys.argv[2:5]) if len(sys.argv) >= 5 else (4096, 4096, 4096)
    dev = torch.device('cuda')
    a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    b = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
    cx = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
    cy = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
    x = lambda: torch.matmul(a, b, out=cx)
    y = lambda: torch.matmul(a, b, out=cy)
    out = {'gpu': torch.cuda.get_device_name(), 'shape': [m, n, k], 'dtype': 'bf16'}

    def events(count):
        return [torch.cuda.Event(enable_timing=True) for _ in range(count)]

    def block(f, launches):
        s, e = events(2)
        s.record()
        for _ in range(launches):
            f()
        e.record()
        return s, e

    # Warm up into the cap.
    started = time.time()
    while time.time() - started < 2.0:
        s, e = block(x, 50)
        e.synchronize()
    s, e = block(x, 200)
    e.synchronize()
    one = s.elapsed_time(e) / 200
    out['launch_ms'] = one
    print(f"{out['gpu']}: {m}x{n}x{k} bf16, one launch {one:.4f} ms", flush=True)

    # A: per-launch series.
    count = 6000
    marks = events(count + 1)
    marks[0].record()
    for i in range(count):
        x()
        marks[i + 1].record()
    torch.cuda.synchronize()
    series = [marks[i].elapsed_time(marks[i + 1]) for i in range(count)]
    out['series_ms'] = series
    mean = st.mean(series)
    dev_ = [t - mean for t in series]
    var = sum(d * d for d in dev_) / count
    print(f"A: {count} launches, mean {mean:.4f} ms, cv {var ** 0.5 / mean:.4f}")
    for lag in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000):
        r = sum(dev_[i] * dev_[i + lag] for i in range(count - lag)) / ((count - lag) * var)
        print(f"   lag {lag:5d} launches ({lag * mean:7.1f} ms): autocorrelation {r:+.3f}")
    for size in (1, 10, 50, 100, 500, 1000):
        means = [st.mean(series[i:i + size]) for i in range(0, count - size + 1, size)]
        print(f"   block {size:5d} launches ({size * mean:7.1f} ms): cv of block means "
              f"{st.pstdev(means) / st.mean(means):.4f} (white noise: {var ** 0.5 / mean / size ** 0.5:.4f})")

    # B and C at the same windows and GPU time.
    def blocks_round(launches, first_x):
        order = (x, y) if first_x else (y, x)
        pairs = [block(f, launches) for f in order]
        pairs[-1][1].synchronize()
        times = [s.elapsed_time(e) for s, e in pairs]
        return times[1] / times[0] if first_x else times[0] / times[1]

    def interleaved_round(launches, per_turn=1):
        turns = max(1, launches // per_turn)
        marks = events(2 * turns + 1)
        marks[0].record()
        for i in range(turns):
            for _ in range(per_turn):
                x()
            marks[2 * i + 1].record()
            for _ in range(per_turn):
                y()
            marks[2 * i + 2].record()
        marks[-1].synchronize()
        tx = sum(marks[2 * i].elapsed_time(marks[2 * i + 1]) for i in range(turns))
        ty = sum(marks[2 * i + 1].elapsed_time(marks[2 * i + 2]) for i in range(turns))
        return ty / tx

    out['windows'] = {}
    for window_ms in (5, 20, 100):
        launches = max(1, round(window_ms / one))
        rounds = max(3, round(2000 / (2 * launches * one)))
        result = {}
        per_turn = max(1, round(2.0 / one))
        methods = {
            'blocks': ('B', lambda r: blocks_round(launches, r % 2 == 0)),
            'interleaved': ('C', lambda r: interleaved_round(launches)),
        }
        if launches >= 2 * per_turn:
            methods['turns'] = ('D', lambda r: interleaved_round(launches, per_turn))
        for method, (letter, one_round) in methods.items():
            medians, cvs = [], []
            for _ in range(6):
                ratios = [one_round(r) for r in range(rounds)]
                medians.append(st.median(ratios))
                cvs.append(st.pstdev(ratios) / st.mean(ratios))
            result[method] = {'medians': medians, 'round_cv': cvs}
            print(f"{letter} {method:11s} window {window_ms:4d} ms "
                  f"({launches} launches each), {rounds} rounds a repeat: per-round cv "
                  f"{st.mean(cvs):.4f}; medians {' '.join(f'{v:.4f}' for v in medians)}; "
                  f"spread {max(medians) - min(medians):.4f}", flush=True)
        out['windows'][window_ms] = {'launches': launches, 'rounds': rounds, **result}
    json.dump(out, open(sys.argv[1], 'w'))


if __name__ == '__main__':
    main()
