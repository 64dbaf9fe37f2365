// Every atomic on global and shared memory, for each 32- and 64-bit type.
#[kernel(block(64), arch(sm_70, sm_80, sm_90))]
fn atomics(xi: &mut [i32], xu: &mut [u32], xl: &mut [i64], xul: &mut [u64], xf: &mut [f32], xd: &mut [f64]) {
    let mut si: [i32; 64] = shared();
    let mut su: [u32; 64] = shared();
    let mut sd: [f64; 64] = shared();
    let t = thread_idx().x;
    si[t] = 0;
    su[t] = 0;
    sd[t] = 0.0;
    sync_threads();
    let a = atomic_add(&mut xi[0], 1) + atomic_min(&mut xi[1], -3) + atomic_max(&mut xi[2], 5);
    let b = atomic_and(&mut xi[3], 6) ^ atomic_or(&mut xi[4], 7) ^ atomic_xor(&mut xi[5], a);
    let c = atomic_exchange(&mut xi[6], b) + atomic_compare_exchange(&mut xi[7], 0, t as i32);
    atomic_add(&mut xu[t], 1u32);
    atomic_min(&mut xu[t + 1], 2u32);
    atomic_max(&mut xu[t + 2], 3u32);
    atomic_add(&mut xl[t], c as i64);
    atomic_max(&mut xl[t + 1], -1i64);
    atomic_and(&mut xul[t], 255u64);
    atomic_compare_exchange(&mut xul[t + 1], 1u64, 2u64);
    atomic_add(&mut xf[t], 1.5);
    atomic_exchange(&mut xf[t + 1], 2.5);
    atomic_compare_exchange(&mut xf[t + 2], 0.0, 1.0);
    atomic_add(&mut xd[t], 0.25);
    atomic_add(&mut si[t % 8], 1);
    atomic_max(&mut su[t / 2], t);
    atomic_xor(&mut su[0], t);
    atomic_add(&mut sd[t % 4], 1.0);
    sync_threads();
    xi[t + 8] = si[t];
    xu[t + 8] = su[t];
    xd[t + 8] = sd[t];
}
