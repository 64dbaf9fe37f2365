//! NCCL's collectives on warpforge buffers (feature `nccl`). Without a GPU
//! the communicators refuse what they cannot take, with what to do; the
//! collectives themselves need a CUDA GPU and libnccl: `#[ignore]`d in the
//! CPU tier and run with `--ignored --features nccl` on a GPU machine, where
//! a one-rank communicator checks each collective bit for bit.
#![cfg(feature = "nccl")]

use warpforge_runtime::nccl::{group, Communicator, NcclId, ReduceOp};
use warpforge_runtime::{f16, Error, Runtime};

#[test]
fn communicators_refuse_no_runtimes_and_runtimes_without_cuda() {
    let err = Communicator::for_runtimes(&[]).err().unwrap().to_string();
    assert!(err.contains("at least one runtime"), "{err}");
    let interpreter = Runtime::interpreter();
    let err = Communicator::for_runtimes(&[&interpreter])
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("interpreter") && err.contains("Runtime::cuda"),
        "{err}"
    );
    let id = NcclId::from_bytes([7; 128]);
    let err = Communicator::for_rank(&interpreter, 0, 1, &id)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("NCCL runs on CUDA GPUs"), "{err}");
    let err = Communicator::for_rank(&interpreter, 2, 2, &id)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("rank 2 of a communicator of 2 ranks"), "{err}");
}

#[test]
fn ids_round_trip_through_bytes_and_need_the_library() {
    let bytes: [u8; 128] = std::array::from_fn(|i| (i * 3) as u8);
    assert_eq!(NcclId::from_bytes(bytes).to_bytes(), bytes);
    match NcclId::new() {
        Ok(id) => assert_eq!(NcclId::from_bytes(id.to_bytes()).to_bytes(), id.to_bytes()),
        Err(Error::Nccl(message)) => assert!(
            message.contains("libnccl.so") && message.contains("LD_LIBRARY_PATH"),
            "says what to install: {message}"
        ),
        Err(other) => panic!("a missing NCCL is Error::Nccl, got: {other}"),
    }
}

fn gpu() -> Runtime {
    Runtime::cuda(0).unwrap_or_else(|e| panic!("this test needs a CUDA GPU and found none: {e}"))
}

fn one_rank(rt: &Runtime) -> Communicator {
    let mut comms = Communicator::for_runtimes(&[rt]).unwrap();
    assert_eq!(comms.len(), 1);
    comms.pop().unwrap()
}

#[test]
#[ignore = "needs a CUDA GPU and libnccl: run with --ignored --features nccl on a GPU machine"]
fn one_rank_collectives_are_exact_on_buffers_and_views() {
    let rt = gpu();
    let comm = one_rank(&rt);
    assert_eq!((comm.rank(), comm.world_size()), (0, 1));
    let values: Vec<f32> = (0..1024).map(|i| (i as f32).sin() * 1e3).collect();
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let send = rt.upload(&values).unwrap();

    let mut reduced = rt.alloc_zeroed::<f32>(1024).unwrap();
    comm.all_reduce(&send, &mut reduced, ReduceOp::Sum).unwrap();
    assert_eq!(bits(&rt.download(&reduced).unwrap()), bits(&values));

    let mut gathered = rt.alloc_zeroed::<f32>(1024).unwrap();
    comm.all_gather(&send, &mut gathered).unwrap();
    assert_eq!(bits(&rt.download(&gathered).unwrap()), bits(&values));

    let mut scattered = rt.alloc_zeroed::<f32>(1024).unwrap();
    comm.reduce_scatter(&send, &mut scattered, ReduceOp::Max)
        .unwrap();
    assert_eq!(bits(&rt.download(&scattered).unwrap()), bits(&values));

    // Views: the second half reduced into the first half of another buffer.
    let mut halves = rt.alloc_zeroed::<f32>(1024).unwrap();
    comm.all_reduce(
        send.slice(512..).unwrap(),
        halves.slice_mut(..512).unwrap(),
        ReduceOp::Sum,
    )
    .unwrap();
    let got = rt.download(&halves).unwrap();
    assert_eq!(bits(&got[..512]), bits(&values[512..]));
    assert!(got[512..].iter().all(|&v| v == 0.0));

    let mut in_place = rt.upload(&values).unwrap();
    comm.all_reduce_in_place(&mut in_place, ReduceOp::Avg)
        .unwrap();
    assert_eq!(bits(&rt.download(&in_place).unwrap()), bits(&values));

    let halfs: Vec<f16> = values.iter().map(|&v| f16::from_f32(v)).collect();
    let send = rt.upload(&halfs).unwrap();
    let mut reduced = rt.alloc_zeroed::<f16>(1024).unwrap();
    group(|| comm.all_reduce(&send, &mut reduced, ReduceOp::Sum)).unwrap();
    assert_eq!(rt.download(&reduced).unwrap(), halfs);
}

#[test]
#[ignore = "needs a CUDA GPU and libnccl: run with --ignored --features nccl on a GPU machine"]
fn collectives_refuse_wrong_lengths_and_other_devices_buffers() {
    let rt = gpu();
    let comm = one_rank(&rt);
    let send = rt.upload(&[1.0f32; 256]).unwrap();
    let mut short = rt.alloc_zeroed::<f32>(128).unwrap();
    let err = comm.all_gather(&send, &mut short).unwrap_err().to_string();
    assert!(
        err.contains("all_gather") && err.contains("world_size"),
        "{err}"
    );
    let err = comm
        .all_reduce(&send, &mut short, ReduceOp::Sum)
        .unwrap_err()
        .to_string();
    assert!(err.contains("the same length for all_reduce"), "{err}");
    let interpreter = Runtime::interpreter();
    let mut on_the_cpu = interpreter.alloc_zeroed::<f32>(256).unwrap();
    let err = comm
        .all_reduce(&send, &mut on_the_cpu, ReduceOp::Sum)
        .unwrap_err()
        .to_string();
    assert!(err.contains("not a CUDA buffer"), "{err}");
    let err = Communicator::for_runtimes(&[&rt, &gpu()])
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("one rank per GPU"), "{err}");
}

/// A thread per rank, as an app drives one GPU per thread: here one rank.
#[test]
#[ignore = "needs a CUDA GPU and libnccl: run with --ignored --features nccl on a GPU machine"]
fn a_rank_joins_from_its_own_thread() {
    let id = NcclId::new().unwrap();
    let sums = std::thread::spawn(move || {
        let rt = gpu();
        let comm = Communicator::for_rank(&rt, 0, 1, &id).unwrap();
        let mut values = rt.upload(&[3i32; 300]).unwrap();
        comm.all_reduce_in_place(&mut values, ReduceOp::Sum)
            .unwrap();
        rt.download(&values).unwrap()
    })
    .join()
    .unwrap();
    assert_eq!(sums, vec![3; 300]);
}
