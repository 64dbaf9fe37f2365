"""Old and new PTX of the same GEMM variants, timed in one process, alternating (issue 16's
"speed kept": each dtype's best variant before and after the rewrite, within 3%).

Two steps, because the PTX is made where cargo is and timed where the GPU is:

    python3 perf/old_new.py prepare OLD_TREE DIR   # here: `cargo xtask ptx` in this tree and in
                                                   # OLD_TREE (a worktree of the old commit, its
                                                   # xtask built) for each variant below
    python3 perf/old_new.py time DIR [ROUNDS]      # on the GPU machine (CuPy)
    python3 perf/old_new.py sass DIR PTXAS NVDISASM # here: each side assembled for sm_90, its
                                                   # registers and its main loop's SASS

`sass` finds the main loop as the backward branch whose body holds the most MMA instructions and
prints its instruction count, its MMAs and the most registers live inside it (`nvdisasm
-lrm count`, which needs a cubin of its own major version: pip's nvidia-cuda-nvcc 13 has the
ptxas, nvidia-cuda-nvdisasm 13 the nvdisasm).

Both PTX of a variant are loaded by the driver (its JIT, as the runtime does), launched on the
same operands (8192^3, random values; 2:4 metadata that keeps elements 0 and 1 of every group)
with the variant's grid, block and dynamic shared memory, and their outputs compared. Then each
round times both, in alternating order, with CUDA events around ~20 ms of back-to-back launches
and no host gap between the two samples; the medians and the median of the per-round new/old
ratios are printed. The GEMM entry points take the same parameters before and after (the script
fills them by name from each PTX's `.entry`), so one set of buffers serves both.
"""
import gzip, json, re, subprocess, sys, tempfile, time
from pathlib import Path

M = N = K = 8192

# Each dtype's fastest sm_80-family variants at 8192^3 on the H100 (session 23-24 sweeps), then
# the variants `cargo xtask manifest-diff 504b297` lists above +2% registers (s8 256x128x128 is
# both), then the f16/bf16 tiles `min_blocks_per_sm` bounds beside the s8 risers (session 31)
# and the four-warp 24 KiB tiles it bounds to 7 blocks (session 34), each timed as the sm_90 code
# the GPU runs.
VARIANTS = """
gemm_f16 BM=256,BN=128,BK=64,WARP=64,STAGES=3,ALIGNED=true,A_COL_MAJOR=false,B_ROW_MAJOR=false
gemm_f16 BM=128,BN=256,BK=64,WARP=64,STAGES=3,ALIGNED=true,A_COL_MAJOR=false,B_ROW_MAJOR=false
gemm_bf16 BM=256,BN=128,BK=64,WARP=64,STAGES=3,ALIGNED=true,A_COL_MAJOR=false,B_ROW_MAJOR=false
gemm_bf16 BM=128,BN=256,BK=64,WARP=64,STAGES=3,ALIGNED=true,A_COL_MAJOR=false,B_ROW_MAJOR=false
gemm_tf32 BM=256,BN=128,BK=32,WARP=64,STAGES=3,ALIGNED=true,A_COL_MAJOR=false,B_ROW_MAJOR=false
gemm_tf32 BM=128,BN=256,BK=32,WARP=64,STAGES=3,ALIGNED=true,A_COL_MAJOR=false,B_ROW_MAJOR=false
gemm_s8 BM=256,BN=128,BK=128,WARP=64,STAGES=3,ALIGNED=true,A_COL_MAJOR=false,B_ROW_MAJOR=false
gemm_s8 BM=128,BN=128,BK=128,WARP=64,STAGES=3,ALIGNED=true,A_COL_MAJOR=false,B_ROW_MAJOR=false
gemm_sparse_f16 BM=128,BN=128,BK=128,WARP=64,STAGES=2,ALIGNED=true,B_ROW_MAJOR=false
gemm_sparse_bf16 BM=128,BN=128,BK=128,WARP=64,STAGES=2,ALIGNED=true,B_ROW_MAJOR=false
gemm_f16 BM=256,BN=128,BK=32,WARP=64,STAGES=2,ALIGNED=false,A_COL_MAJOR=false,B_ROW_MAJOR=false
gemm_f16 BM=64,BN=64,BK=32,WARP=32,STAGES=3,ALIGNED=true,A_COL_MAJOR=true,B_ROW_MAJOR=false
gemm_bf16 BM=256,BN=128,BK=32,WARP=64,STAGES=2,ALIGNED=false,A_COL_MAJOR=false,B_ROW_MAJOR=false
gemm_bf16 BM=64,BN=64,BK=32,WARP=32,STAGES=3,ALIGNED=true,A_COL_MAJOR=true,B_ROW_MAJOR=false
gemm_s8 BM=128,BN=64,BK=128,WARP=32,STAGES=3,ALIGNED=true,A_COL_MAJOR=false,B_ROW_MAJOR=false
gemm_s8 BM=128,BN=64,BK=128,WARP=32,STAGES=4,ALIGNED=true,A_COL_MAJOR=false,B_ROW_MAJOR=false
gemm_s8 BM=128,BN=64,BK=128,WARP=32,STAGES=5,ALIGNED=true,A_COL_MAJOR=false,B_ROW_MAJOR=false
gemm_s8 BM=128,BN=64,BK=64,WARP=32,STAGES=2,ALIGNED=false,A_COL_MAJOR=false,B_ROW_MAJOR=false
gemm_s8 BM=64,BN=128,BK=128,WARP=32,STAGES=3,ALIGNED=true,A_COL_MAJOR=false,B_ROW_MAJOR=false
gemm_s8 BM=64,BN=128,BK=128,WARP=32,STAGES=4,ALIGNED=true,A_COL_MAJOR=false,B_ROW_MAJOR=false
gemm_s8 BM=64,BN=128,BK=128,WARP=32,STAGES=5,ALIGNED=true,A_COL_MAJOR=false,B_ROW_MAJOR=false
gemm_s8 BM=64,BN=64,BK=64,WARP=32,STAGES=2,ALIGNED=false,A_COL_MAJOR=false,B_ROW_MAJOR=false
gemm_sparse_f16 BM=128,BN=64,BK=128,WARP=32,STAGES=3,ALIGNED=true,B_ROW_MAJOR=false
gemm_sparse_f16 BM=128,BN=64,BK=128,WARP=32,STAGES=4,ALIGNED=true,B_ROW_MAJOR=false
gemm_sparse_f16 BM=128,BN=64,BK=64,WARP=32,STAGES=2,ALIGNED=false,B_ROW_MAJOR=false
gemm_sparse_f16 BM=64,BN=128,BK=128,WARP=32,STAGES=3,ALIGNED=true,B_ROW_MAJOR=false
gemm_sparse_f16 BM=64,BN=128,BK=64,WARP=32,STAGES=2,ALIGNED=false,B_ROW_MAJOR=false
gemm_sparse_bf16 BM=128,BN=64,BK=128,WARP=32,STAGES=3,ALIGNED=true,B_ROW_MAJOR=false
gemm_sparse_bf16 BM=128,BN=64,BK=128,WARP=32,STAGES=4,ALIGNED=true,B_ROW_MAJOR=false
gemm_sparse_bf16 BM=128,BN=64,BK=64,WARP=32,STAGES=2,ALIGNED=false,B_ROW_MAJOR=false
gemm_sparse_bf16 BM=64,BN=128,BK=128,WARP=32,STAGES=3,ALIGNED=true,B_ROW_MAJOR=false
gemm_sparse_bf16 BM=64,BN=128,BK=64,WARP=32,STAGES=2,ALIGNED=false,B_ROW_MAJOR=false
gemm_f16 BM=64,BN=128,BK=64,WARP=32,STAGES=3,ALIGNED=true,A_COL_MAJOR=false,B_ROW_MAJOR=false
gemm_bf16 BM=64,BN=128,BK=64,WARP=32,STAGES=3,ALIGNED=true,A_COL_MAJOR=false,B_ROW_MAJOR=false
gemm_f16 BM=64,BN=64,BK=32,WARP=32,STAGES=3,ALIGNED=true,A_COL_MAJOR=false,B_ROW_MAJOR=false
gemm_s8 BM=64,BN=64,BK=64,WARP=32,STAGES=3,ALIGNED=true,A_COL_MAJOR=false,B_ROW_MAJOR=false
"""


def ptx(tree, xtask, kernel, consts):
    """The sm_90 PTX of a variant from `tree`, or None when its xtask refuses the consts."""
    out = subprocess.run(xtask + ['ptx', kernel, consts, '--arch', 'sm_90'], cwd=tree,
                         capture_output=True, text=True)
    return out.stdout if out.returncode == 0 and out.stdout.strip() else None


def prepare(old_tree, here):
    repo = Path(__file__).resolve().parent.parent
    manifest = {(v['variant'], v['arch']): v
                for v in json.load(open(repo / 'generated/manifest.json'))['variants']}
    Path(here).mkdir(parents=True, exist_ok=True)
    variants = []
    for index, (kernel, consts) in enumerate(line.split() for line in VARIANTS.strip().splitlines()):
        new = ptx(repo, ['cargo', 'xtask'], kernel, consts)
        # The old commit may predate a const parameter fixed at false (the layouts of gemm_s8/tf32).
        old = ptx(old_tree, ['./target/release/xtask'], kernel, consts) or ptx(
            old_tree, ['./target/release/xtask'], kernel, consts.replace(',A_COL_MAJOR=false,B_ROW_MAJOR=false', ''))
        if not (old and new):
            sys.exit(f'no PTX for {kernel} {consts} in {"the old tree" if new else "this tree"}')
        values = dict(pair.split('=') for pair in consts.split(','))
        name = kernel + '[' + ','.join(f"{k}={ {'true': '1', 'false': '0'}.get(v, v)}" for k, v in values.items()) + ']'
        for side, text in (('old', old), ('new', new)):
            Path(f'{here}/{index}_{side}.ptx.gz').write_bytes(gzip.compress(text.encode(), 9))
        variants.append(dict(index=index, kernel=kernel, consts=consts, bm=int(values['BM']),
                             bn=int(values['BN']), warp=int(values['WARP']),
                             shared=manifest[(name, 'sm_90')]['shared_bytes']))
    json.dump(variants, open(f'{here}/variants.json', 'w'), indent=1)
    print(f'{len(variants)} variants written to {here}')


def disassembly(cubin, nvdisasm):
    """(instruction, live registers) per instruction and the instruction index of each label."""
    text = subprocess.run([nvdisasm, '-c', '-lrm', 'count', cubin], capture_output=True, text=True,
                          check=True).stdout
    rows, labels = [], {}
    for line in text.splitlines():
        label = re.match(r'\s*(\.L_x_\d+):', line)
        if label:
            labels[label.group(1)] = len(rows)
            continue
        ins = re.match(r'\s*/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;\s*//\s*\|\s*(\d+)', line)
        if ins:
            rows.append((ins.group(1), int(ins.group(2))))
    return rows, labels


def main_loop(rows, labels):
    """The body of the backward branch with the most MMA instructions."""
    best = None
    for end, (ins, _) in enumerate(rows):
        target = re.search(r'\bBRA\b.*?(\.L_x_\d+)', ins)
        if target and labels.get(target.group(1), end + 1) <= end:
            body = rows[labels[target.group(1)]:end + 1]
            mma = sum(bool(re.search(r'\b[HI]MMA\b|\bHGMMA\b', i)) for i, _ in body)
            if best is None or mma > best[0]:
                best = (mma, body)
    return best


def sass(here, ptxas, nvdisasm):
    print(f'{"variant":<72} {"side":4} {"regs":>4} {"loop":>5} {"mma":>4} {"live":>4}')
    for v in json.load(open(f'{here}/variants.json')):
        for side in ('old', 'new'):
            with tempfile.TemporaryDirectory() as tmp:
                source = Path(tmp, 'k.ptx')
                source.write_bytes(gzip.decompress(Path(f'{here}/{v["index"]}_{side}.ptx.gz').read_bytes()))
                info = subprocess.run([ptxas, '-arch=sm_90', '-O3', '-v', str(source), '-o', f'{tmp}/k.cubin'],
                                      capture_output=True, text=True, check=True).stderr
                registers = re.search(r'Used (\d+) registers', info).group(1)
                mma, body = main_loop(*disassembly(f'{tmp}/k.cubin', nvdisasm))
                live = max(count for _, count in body)
                print(f'{v["kernel"] + " " + v["consts"]:<72} {side:4} {registers:>4} {len(body):>5} {mma:>4} {live:>4}')


def operands(kernel):
    if kernel in ('gemm_f16', 'gemm_sparse_f16'):
        el = lambda n: cp.random.standard_normal(n, dtype=cp.float32).astype(cp.float16)
        c = cp.zeros(M * N, cp.float32)
    elif kernel in ('gemm_bf16', 'gemm_sparse_bf16'):
        el = lambda n: (cp.random.standard_normal(n, dtype=cp.float32).view(cp.uint32) >> 16).astype(cp.uint16)
        c = cp.zeros(M * N, cp.float32)
    elif kernel == 'gemm_tf32':
        el = lambda n: cp.random.standard_normal(n, dtype=cp.float32)
        c = cp.zeros(M * N, cp.float32)
    else:
        el = lambda n: cp.random.randint(-128, 128, n, dtype=cp.int32).astype(cp.int8)
        c = cp.zeros(M * N, cp.int32)
    if kernel.startswith('gemm_sparse'):
        a = el(M * K // 2)
        # every group of four keeps elements 0 and 1: valid 2:4 metadata in any layout
        meta = cp.full(M * K // 8, 0x44444444, cp.uint32)
        bufs = {'a': a, 'a_meta': meta, 'b': el(K * N), 'c': c}
    else:
        bufs = {'a': el(M * K), 'b': el(K * N), 'c': c}
    bufs['bias'] = cp.zeros(N, cp.float32)
    return bufs

def args_of(ptx, bufs):
    entry = re.search(r'\.entry\s+\w+\(([^)]*)\)', ptx).group(1)
    out = []
    for ty, name in re.findall(r'\.param\s+\.(\w+)\s+p\d+_(\w+)', entry):
        if name.endswith('_ptr'):
            out.append(bufs[name[:-4]])
        elif name.endswith('_len'):
            out.append(np.uint32(bufs[name[:-4]].size))
        elif name in ('m', 'n', 'k'):
            out.append(np.uint32({'m': M, 'n': N, 'k': K}[name]))
        elif name == 'batches':
            out.append(np.uint32(1))
        elif name in ('alpha', 'beta'):
            value = 1 if name == 'alpha' else 0
            out.append(np.float32(value) if ty == 'f32' else np.int32(value))
        else:  # batch strides, bias mode, activation, layouts: 0
            assert ty == 'u32', (ty, name)
            out.append(np.uint32(0))
    return tuple(out)


def time_variants(here, rounds):
    print(cp.cuda.runtime.getDeviceProperties(0)['name'].decode(), flush=True)
    for v in json.load(open(f'{here}/variants.json')):
        time_one(here, v, rounds)


def time_one(here, v, rounds):
    i, kernel = v['index'], v['kernel']
    bufs = operands(kernel)
    grid = (N // v['bn'], M // v['bm'], 1)
    block = ((v['bm'] // v['warp']) * (v['bn'] // v['warp']) * 32, 1, 1)
    funcs, args = {}, {}
    t0 = time.time()
    for side in ('old', 'new'):
        ptx = gzip.decompress(open(f'{here}/{i}_{side}.ptx.gz', 'rb').read())
        with tempfile.NamedTemporaryFile(suffix='.ptx') as file:
            file.write(ptx); file.flush()
            f = cp.RawModule(path=file.name).get_function(kernel)
        f.max_dynamic_shared_size_bytes = v['shared']
        funcs[side], args[side] = f, args_of(ptx.decode(), bufs)
    launch = lambda side: funcs[side](grid, block, args[side], shared_mem=v['shared'])
    outs = {}
    for side in ('old', 'new'):
        bufs['c'].fill(0); launch(side); cp.cuda.Device().synchronize(); outs[side] = bufs['c'].copy()
    same = bool((outs['old'] == outs['new']).all())
    nonzero = int(cp.count_nonzero(outs['new']))
    # launches per ~20 ms sample, from one timed launch; then ~300 ms of both in turn
    s, e = cp.cuda.Event(), cp.cuda.Event()
    s.record(); launch('new'); e.record(); e.synchronize()
    launch_ms = cp.cuda.get_elapsed_time(s, e)
    n = max(1, int(20.0 / launch_ms))
    for _ in range(int(150.0 / launch_ms) + 1):
        launch('old'); launch('new')
    times = {'old': [], 'new': []}
    ratios = []
    for r in range(rounds):
        order = ('old', 'new') if r % 2 == 0 else ('new', 'old')
        ev = [cp.cuda.Event() for _ in range(3)]
        ev[0].record()
        for _ in range(n): launch(order[0])
        ev[1].record()
        for _ in range(n): launch(order[1])
        ev[2].record(); ev[2].synchronize()
        ms = {order[0]: cp.cuda.get_elapsed_time(ev[0], ev[1]) / n, order[1]: cp.cuda.get_elapsed_time(ev[1], ev[2]) / n}
        for side in ms: times[side].append(ms[side])
        ratios.append(ms['new'] / ms['old'])
    med = {s: float(np.median(times[s])) for s in times}
    print(f"{kernel} {v['consts']}: old {med['old']:.4f} ms, new {med['new']:.4f} ms, "
          f"new/old {float(np.median(ratios)):.4f} (rounds {rounds} of {n} launches; per-round ratio "
          f"{min(ratios):.4f}-{max(ratios):.4f}); outputs bit-identical: {same}, nonzero {nonzero}; {time.time() - t0:.1f} s", flush=True)


if __name__ == '__main__':
    if len(sys.argv) >= 4 and sys.argv[1] == 'prepare':
        prepare(sys.argv[2], sys.argv[3])
    elif len(sys.argv) >= 5 and sys.argv[1] == 'sass':
        sass(sys.argv[2], sys.argv[3], sys.argv[4])
    elif len(sys.argv) >= 3 and sys.argv[1] == 'time':
        import numpy as np, cupy as cp
        cp.random.seed(7)
        time_variants(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 30)
    else:
        sys.exit(__doc__)
