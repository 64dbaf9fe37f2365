// Integer abs/min/max on every integer type, and warp shuffles.
#[kernel(arch(sm_70, sm_80, sm_90))]
fn intrinsics_int(a: &mut [i8], b: &mut [u8], c: &mut [i32], d: &mut [u32], e: &mut [i64], f: &mut [u64], g: &mut [f32]) {
    let i = thread_idx().x;
    a[i] = a[i].abs().min(a[i + 1]).max(a[i + 2]);
    b[i] = b[i].min(b[i + 1]).max(b[i + 2]);
    c[i] = c[i].abs().min(c[i + 1]).max(c[i + 2]);
    d[i] = d[i].min(d[i + 1]).max(d[i + 2]);
    e[i] = e[i].abs().min(e[i + 1]).max(e[i + 2]);
    f[i] = f[i].min(f[i + 1]).max(f[i + 2]);
    c[i + 3] = shfl_xor(c[i], 1) + shfl_down(c[i], 2);
    d[i + 3] = shfl_xor(d[i], 4) + shfl_down(d[i], i);
    g[i] = shfl_xor(g[i], 8) + shfl_down(g[i], 16);
}
