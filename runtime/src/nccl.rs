//! Collectives across GPUs with NCCL (feature `nccl`), on warpforge's own
//! buffers: a [`Communicator`] per GPU, each on its runtime's stream, and
//! all-reduce, all-gather and reduce-scatter over [`DeviceBuffer`]s and
//! their views, in place in device memory (no staging copies).
//!
//! cudarc loads `libnccl.so` at run time, so the feature builds without
//! NCCL installed; a communicator made without the library is an
//! [`Error::Nccl`] that says what to install. Two ways to make the
//! communicators, as NCCL has:
//! - one thread drives every GPU: [`Communicator::for_runtimes`]
//!   (`ncclCommInitAll`), and each step's collectives, one per rank, inside
//!   [`group`];
//! - a thread (or process) per GPU: [`NcclId::new`] on one of them, shared
//!   with the others ([`NcclId::to_bytes`] across processes), then
//!   [`Communicator::for_rank`] on every rank at once (it waits for all of
//!   them); each thread then calls the collectives of its own rank.
//!
//! A collective is enqueued on the runtime's stream after its earlier work
//! and returns; later work of the runtime sees its result. Every rank must
//! call the same collectives in the same order with the same lengths.

use cudarc::driver::{CudaSlice, CudaView, CudaViewMut};
use cudarc::nccl::result::{NcclError, NcclStatus};
use cudarc::nccl::sys::ncclResult_t;
use cudarc::nccl::{Comm, Id, NcclType};

use crate::buffer::Memory;
use crate::cuda::CudaBackend;
use crate::runtime::Backend;
use crate::{BufferMut, BufferRef, DeviceBuffer, DeviceScalar, Error, Runtime};

/// The element types NCCL reduces and gathers: `f16`, `bf16`, `f32`,
/// `f64`, `i8`, `u8`, `i32`, `u32`, `i64` and `u64`.
pub trait NcclScalar: DeviceScalar + NcclType {}

impl<T: DeviceScalar + NcclType> NcclScalar for T {}

/// How a reduction combines the ranks' elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// The sum.
    Sum,
    /// The product.
    Prod,
    /// The largest.
    Max,
    /// The smallest.
    Min,
    /// The mean: the sum divided by the number of ranks.
    Avg,
}

impl ReduceOp {
    fn nccl(self) -> cudarc::nccl::ReduceOp {
        match self {
            ReduceOp::Sum => cudarc::nccl::ReduceOp::Sum,
            ReduceOp::Prod => cudarc::nccl::ReduceOp::Prod,
            ReduceOp::Max => cudarc::nccl::ReduceOp::Max,
            ReduceOp::Min => cudarc::nccl::ReduceOp::Min,
            ReduceOp::Avg => cudarc::nccl::ReduceOp::Avg,
        }
    }
}

/// What the ranks of one communicator share: made on one rank
/// ([`NcclId::new`]), handed to every other ([`Communicator::for_rank`]).
#[derive(Clone, Copy, Debug)]
pub struct NcclId(Id);

impl NcclId {
    /// A new id (`ncclGetUniqueId`; no GPU needed, NCCL's library is).
    pub fn new() -> Result<NcclId, Error> {
        check_library()?;
        Id::new()
            .map(NcclId)
            .map_err(|e| nccl_error("making a communicator id", e))
    }

    /// The id's 128 bytes, to send to the ranks of other processes.
    pub fn to_bytes(&self) -> [u8; 128] {
        self.0.internal().map(|c| c as u8)
    }

    /// The id another process made, from its [`NcclId::to_bytes`].
    pub fn from_bytes(bytes: [u8; 128]) -> NcclId {
        NcclId(Id::uninit(bytes.map(|b| b as std::ffi::c_char)))
    }
}

/// One rank of an NCCL communicator, on one runtime's device and stream
/// (module docs). Sendable to the thread that drives its GPU; a rank's
/// collectives are called from one thread at a time.
pub struct Communicator {
    comm: Comm,
    /// The runtime's device, for messages.
    ordinal: usize,
}

// SAFETY: NCCL lets a communicator be used from any thread, one call at a
// time; `Communicator` is not `Sync`, so its calls never overlap. The stream
// cudarc keeps with it is `Send` and `Sync`.
unsafe impl Send for Communicator {}

impl Communicator {
    /// One rank per runtime, rank `i` on `runtimes[i]`'s device and stream,
    /// made together from one thread (`ncclCommInitAll`). Each runtime must
    /// be a CUDA runtime of a different GPU. With one runtime, the
    /// collectives copy (a one-rank communicator, which a one-GPU machine
    /// can check).
    pub fn for_runtimes(runtimes: &[&Runtime]) -> Result<Vec<Communicator>, Error> {
        if runtimes.is_empty() {
            return Err(Error::Nccl(
                "an NCCL communicator needs at least one runtime: pass one CUDA runtime per GPU"
                    .into(),
            ));
        }
        let mut streams = Vec::with_capacity(runtimes.len());
        let mut ordinals = Vec::with_capacity(runtimes.len());
        for (rank, rt) in runtimes.iter().enumerate() {
            let cuda = cuda_of(rt, rank)?;
            let ordinal = cuda.info.ordinal;
            if let Some(other) = ordinals.iter().position(|&o| o == ordinal) {
                return Err(Error::Nccl(format!(
                    "runtimes {other} and {rank} both drive CUDA device {ordinal}, and NCCL takes \
                     one rank per GPU: pass one runtime per device (Runtime::cuda(0), \
                     Runtime::cuda(1), ..)"
                )));
            }
            ordinals.push(ordinal);
            streams.push(cuda.stream.clone());
        }
        check_library()?;
        let comms = Comm::from_devices(streams).map_err(|e| {
            nccl_error(
                &format!("making a communicator of CUDA devices {ordinals:?}"),
                e,
            )
        })?;
        Ok(comms
            .into_iter()
            .zip(ordinals)
            .map(|(comm, ordinal)| Communicator { comm, ordinal })
            .collect())
    }

    /// Rank `rank` of `world_size`, on `rt`'s device and stream
    /// (`ncclCommInitRank`), for a thread or process per GPU: every rank
    /// calls this with the same `id` at the same time, and each call
    /// returns once all ranks have joined.
    pub fn for_rank(
        rt: &Runtime,
        rank: usize,
        world_size: usize,
        id: &NcclId,
    ) -> Result<Communicator, Error> {
        if rank >= world_size || i32::try_from(world_size).is_err() {
            return Err(Error::Nccl(format!(
                "rank {rank} of a communicator of {world_size} ranks does not exist: ranks run \
                 from 0 to world_size - 1, and world_size is at least 1 and fits an i32"
            )));
        }
        let cuda = cuda_of(rt, rank)?;
        check_library()?;
        // NCCL puts the rank on the current device.
        cuda.ctx
            .bind_to_thread()
            .map_err(|e| crate::cuda::driver_error("making the CUDA context current", e))?;
        let comm = Comm::from_rank(cuda.stream.clone(), rank, world_size, id.0).map_err(|e| {
            nccl_error(
                &format!(
                    "joining rank {rank} of {world_size} on CUDA device {}",
                    cuda.info.ordinal
                ),
                e,
            )
        })?;
        Ok(Communicator {
            comm,
            ordinal: cuda.info.ordinal,
        })
    }

    /// This rank's index, from 0.
    pub fn rank(&self) -> usize {
        self.comm.rank()
    }

    /// The number of ranks.
    pub fn world_size(&self) -> usize {
        self.comm.world_size()
    }

    /// `receive[i]` = `op` over every rank's `send[i]`; `send` and
    /// `receive` have the same length on every rank.
    pub fn all_reduce<'s, 'r, T: NcclScalar>(
        &self,
        send: impl Into<BufferRef<'s, T>>,
        receive: impl Into<BufferMut<'r, T>>,
        op: ReduceOp,
    ) -> Result<(), Error> {
        let blocks = (1, 1);
        self.collective(
            "all_reduce",
            send.into(),
            receive.into(),
            blocks,
            |comm, s, r| comm.all_reduce(s, r, &op.nccl()),
        )
    }

    /// [`Communicator::all_reduce`] with the result in `buffer`, which holds
    /// this rank's input.
    pub fn all_reduce_in_place<'b, T: NcclScalar>(
        &self,
        buffer: impl Into<BufferMut<'b, T>>,
        op: ReduceOp,
    ) -> Result<(), Error> {
        let mut buffer = buffer.into();
        let len = buffer.len();
        let mut target = self.receive_view(&mut buffer)?;
        self.comm
            .all_reduce_in_place(&mut target, &op.nccl())
            .map_err(|e| self.failed("all_reduce_in_place", len, T::SCALAR, e))
            .map(drop)
    }

    /// Every rank's `send`, in rank order, into each rank's `receive`,
    /// which holds `world_size` times `send`'s length.
    pub fn all_gather<'s, 'r, T: NcclScalar>(
        &self,
        send: impl Into<BufferRef<'s, T>>,
        receive: impl Into<BufferMut<'r, T>>,
    ) -> Result<(), Error> {
        let blocks = (1, self.world_size());
        self.collective(
            "all_gather",
            send.into(),
            receive.into(),
            blocks,
            |comm, s, r| comm.all_gather(s, r),
        )
    }

    /// `op` over every rank's `send`, of which rank `r` receives block `r`:
    /// `send` holds `world_size` times `receive`'s length.
    pub fn reduce_scatter<'s, 'r, T: NcclScalar>(
        &self,
        send: impl Into<BufferRef<'s, T>>,
        receive: impl Into<BufferMut<'r, T>>,
        op: ReduceOp,
    ) -> Result<(), Error> {
        let blocks = (self.world_size(), 1);
        self.collective(
            "reduce_scatter",
            send.into(),
            receive.into(),
            blocks,
            |comm, s, r| comm.reduce_scatter(s, r, &op.nccl()),
        )
    }

    /// Checks a collective's buffers and enqueues it with `call`. `blocks`
    /// is how many blocks of one length `send` and `receive` hold.
    fn collective<T: NcclScalar>(
        &self,
        name: &str,
        send: BufferRef<'_, T>,
        mut receive: BufferMut<'_, T>,
        (send_blocks, receive_blocks): (usize, usize),
        call: impl FnOnce(
            &Comm,
            &CudaView<'_, T>,
            &mut CudaViewMut<'_, T>,
        ) -> Result<NcclStatus, NcclError>,
    ) -> Result<(), Error> {
        let (sent, received) = (send.len(), receive.len());
        if sent.checked_mul(receive_blocks) != received.checked_mul(send_blocks) {
            return Err(Error::Buffer(format!(
                "{name} on rank {} of {} takes a send buffer of {send_blocks} block(s) and a \
                 receive buffer of {receive_blocks} block(s), all of one length (world_size \
                 blocks where it is more than one), and got buffers of {sent} and {received} \
                 elements: make the lengths match (the same length for all_reduce)",
                self.rank(),
                self.world_size()
            )));
        }
        let source = self.send_view(&send)?;
        let mut target = self.receive_view(&mut receive)?;
        call(&self.comm, &source, &mut target)
            .map(drop)
            .map_err(|e| self.failed(name, sent, T::SCALAR, e))
    }

    /// The CUDA memory of a view to send, checked to be on this rank's device.
    fn send_view<'v, T: NcclScalar>(
        &self,
        view: &BufferRef<'v, T>,
    ) -> Result<CudaView<'v, T>, Error> {
        let (buffer, offset_bytes, len) = view.parts();
        let start = offset_bytes as usize / std::mem::size_of::<T>();
        let slice = self.cuda_slice(buffer, "the buffer to send")?;
        Ok(slice.slice(start..start + len))
    }

    /// The CUDA memory of a view to receive into, checked as [`Communicator::send_view`].
    fn receive_view<'v, T: NcclScalar>(
        &self,
        view: &'v mut BufferMut<'_, T>,
    ) -> Result<CudaViewMut<'v, T>, Error> {
        let (buffer, offset_bytes, len) = view.parts_mut();
        let start = offset_bytes as usize / std::mem::size_of::<T>();
        self.cuda_slice(buffer, "the buffer to receive into")?;
        match &mut buffer.memory {
            Memory::Cuda(slice) => Ok(slice.slice_mut(start..start + len)),
            #[allow(unreachable_patterns)]
            _ => unreachable!("cuda_slice accepts CUDA memory alone"),
        }
    }

    fn cuda_slice<'b, T: NcclScalar>(
        &self,
        buffer: &'b DeviceBuffer<T>,
        what: &str,
    ) -> Result<&'b CudaSlice<T>, Error> {
        let slice = match &buffer.memory {
            Memory::Cuda(slice) => &**slice,
            #[allow(unreachable_patterns)]
            _ => {
                return Err(Error::Buffer(format!(
                    "{what} is not a CUDA buffer, and NCCL moves CUDA memory: create it with the \
                     CUDA runtime of rank {}",
                    self.rank()
                )))
            }
        };
        if slice.context() != self.comm.context() {
            return Err(Error::Buffer(format!(
                "{what} belongs to CUDA device {}, and rank {} runs on device {}: pass a buffer \
                 of this rank's runtime",
                slice.context().ordinal(),
                self.rank(),
                self.ordinal
            )));
        }
        Ok(slice)
    }

    fn failed(&self, collective: &str, len: usize, elem: crate::Scalar, e: NcclError) -> Error {
        nccl_error(
            &format!(
                "{collective} of {len} {} values on rank {} of {} (CUDA device {})",
                elem.name(),
                self.rank(),
                self.world_size(),
                self.ordinal
            ),
            e,
        )
    }
}

/// Runs `calls`, the collectives one thread makes for several ranks, as one
/// NCCL group (`ncclGroupStart` .. `ncclGroupEnd`): without it, the first
/// rank's call would wait for ranks whose calls come after it. The group is
/// ended whatever `calls` returns.
pub fn group<R>(calls: impl FnOnce() -> Result<R, Error>) -> Result<R, Error> {
    check_library()?;
    cudarc::nccl::group_start().map_err(|e| nccl_error("starting an NCCL group", e))?;
    let result = calls();
    let ended = cudarc::nccl::group_end().map_err(|e| nccl_error("ending an NCCL group", e));
    let value = result?;
    ended?;
    Ok(value)
}

/// The CUDA backend of rank `rank`'s runtime.
fn cuda_of(rt: &Runtime, rank: usize) -> Result<&CudaBackend, Error> {
    match &rt.backend {
        Backend::Cuda(cuda) => Ok(cuda),
        #[allow(unreachable_patterns)]
        _ => Err(Error::Nccl(format!(
            "rank {rank}'s runtime runs on {}, and NCCL runs on CUDA GPUs: make it with \
             Runtime::cuda(ordinal)",
            rt.backend_name()
        ))),
    }
}

/// Refuses to go on without libnccl: cudarc panics when it cannot load it.
fn check_library() -> Result<(), Error> {
    if crate::cuda::library::loads(&["nccl"]) {
        return Ok(());
    }
    let versioned = crate::cuda::library::loads_file("libnccl.so.2");
    let hint = if versioned {
        "libnccl.so.2 loads, and cudarc opens libnccl.so: link libnccl.so to it in a directory \
         on LD_LIBRARY_PATH (pip's nvidia-nccl-cu12 ships libnccl.so.2 alone)"
    } else {
        "install NCCL (`pip install nvidia-nccl-cu12`, or the libnccl2 and libnccl-dev packages) \
         and put the directory of libnccl.so on LD_LIBRARY_PATH"
    };
    Err(Error::Nccl(format!(
        "NCCL's library (libnccl.so) could not be loaded: {hint}"
    )))
}

fn nccl_error(op: &str, e: NcclError) -> Error {
    let hint = match e.0 {
        ncclResult_t::ncclUnhandledCudaError => {
            "a CUDA call inside NCCL failed: check the GPUs with nvidia-smi"
        }
        ncclResult_t::ncclSystemError => {
            "a system call failed (sockets, shared memory: in a container, enlarge /dev/shm)"
        }
        ncclResult_t::ncclRemoteError => "another rank failed or exited: see its error",
        ncclResult_t::ncclInvalidArgument | ncclResult_t::ncclInvalidUsage => {
            "the ranks' calls disagree (order, lengths, types) or the communicator is broken"
        }
        _ => "NCCL failed inside",
    };
    Error::Nccl(format!(
        "NCCL failed {op}: {:?}. {hint}; set NCCL_DEBUG=WARN to have NCCL say more",
        e.0
    ))
}
