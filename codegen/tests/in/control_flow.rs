// Nested loops, break/continue, early return, short-circuit conditions,
// step_by, loop {}, and if-expressions.
#[kernel]
fn control_flow(x: &[i32], y: &mut [i32], n: u32, limit: i32) {
    let i = thread_idx().x;
    if i >= n {
        return;
    }
    let mut total = 0i32;
    for r in 0..n {
        if r == i {
            continue;
        }
        for c in (r..n).step_by(3) {
            if c > 2 * r + 7 {
                break;
            }
            if c < x.len() && x[c] > 0 || c == 0 && total < limit {
                total += x[c];
            }
        }
        if total > limit {
            break;
        }
    }
    let mut k = 0i32;
    loop {
        k += 1;
        if k >= limit {
            break;
        }
    }
    let mut j = 10i32;
    while j > 0 && !(j == 5) {
        j -= 1;
    }
    for d in (-8i32..8).step_by(4) {
        total += d;
    }
    y[i] = if total > 0 { total } else if k > 3 { k } else { j };
}
