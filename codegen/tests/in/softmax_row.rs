// Softmax of each row of a `rows x cols` matrix, one warp per row.
#[kernel(block(32), requires(x.len() == y.len()))]
fn softmax_row(x: &[f32], y: &mut [f32], cols: u32) {
    let row = block_idx().x;
    let lane = lane_id();
    let base = row * cols;
    let mut m = -3.0e38f32;
    let mut c = lane;
    while c < cols {
        m = m.max(x[base + c]);
        c += 32;
    }
    // A butterfly (offsets 16, 8, 4, 2, 1): every lane gets the row's max.
    #[unroll]
    for k in 0..5u32 {
        m = m.max(shfl_xor(m, 16 >> k));
    }
    let mut s = 0.0f32;
    c = lane;
    while c < cols {
        s += (x[base + c] - m).exp();
        c += 32;
    }
    // The same butterfly: every lane gets the row's sum.
    #[unroll]
    for k in 0..5u32 {
        s += shfl_xor(s, 16 >> k);
    }
    let inv = 1.0 / s;
    c = lane;
    while c < cols {
        y[base + c] = (x[base + c] - m).exp() * inv;
        c += 32;
    }
}
