// Every atomic on i32 and u32, on global and shared memory (a 2-D shared
// array included), with the old values used and unused.
#[kernel(block(64))]
fn portable_atomics(xi: &mut [i32], xu: &mut [u32]) {
    let mut si: [i32; 64] = shared();
    let mut su: [[u32; 8]; 8] = shared();
    let t = thread_idx().x;
    si[t] = 0;
    su[t / 8][t % 8] = 0;
    sync_threads();
    let a = atomic_add(&mut xi[0], 1) + atomic_min(&mut xi[1], -3) + atomic_max(&mut xi[2], 5);
    let b = atomic_and(&mut xi[3], 6) ^ atomic_or(&mut xi[4], 7) ^ atomic_xor(&mut xi[5], a);
    let c = atomic_exchange(&mut xi[6], b) + atomic_compare_exchange(&mut xi[7], 0, t as i32);
    atomic_add(&mut xu[t], 1u32);
    atomic_min(&mut xu[t + 1], 2u32);
    atomic_max(&mut xu[t + 2], 3u32);
    atomic_compare_exchange(&mut xu[t + 3], 1u32, 2u32);
    atomic_add(&mut si[t % 8], c);
    atomic_max(&mut su[t / 8][t % 8], t);
    atomic_xor(&mut su[0][1], t);
    atomic_compare_exchange(&mut su[1][t % 8], 0u32, t);
    sync_threads();
    xi[t + 8] = si[t];
    xu[t + 8] = su[t / 8][t % 8];
}
