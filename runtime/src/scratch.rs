//! Scratch buffers a runtime keeps between launches, for kernels that need
//! memory of their own besides their operands (a GEMM's stream-K partial
//! sums and the flags that count them): [`Runtime::lend_scratch`] and
//! [`Runtime::keep_scratch`].
//!
//! A launch borrows a buffer by purpose and element type, enqueues its work
//! and gives it back; the next launch that borrows it runs after that work
//! on the runtime's stream, so the two never overlap, and a buffer a launch
//! leaves zeroed (a kernel's counters, which it resets as it finishes) is
//! zeroed for the next one without a memset. A fork ([`Runtime::fork`]) has
//! its own, as it has its own stream. A buffer lent and not given back (an
//! error in between) is dropped; the next borrower gets a new zeroed one.

use std::any::Any;
use std::sync::Mutex;

use crate::buffer::DeviceBuffer;
use crate::scalar::DeviceScalar;
use crate::{Error, Runtime};

/// The buffers a runtime keeps, by purpose. Buffers replaced by longer ones
/// stay allocated until the runtime drops: a captured graph may still
/// launch kernels that read them.
#[derive(Default)]
pub(crate) struct Scratch {
    kept: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    current: Vec<(&'static str, Box<dyn Any + Send>)>,
    retired: Vec<Box<dyn Any + Send>>,
}

impl Runtime {
    /// Lends the runtime's scratch buffer for `purpose` (one name per use,
    /// such as "gemm_wgmma stream-K flags"), of at least `len` elements of
    /// `T`: the one given back last for it when that is long enough (what
    /// the launches before left in it), else a new zeroed one. Give it back
    /// with [`Runtime::keep_scratch`] once the launches that use it are
    /// enqueued. Launches that use it must leave the values they need at
    /// the start of the next (zeros, say) as they found them.
    pub fn lend_scratch<T: DeviceScalar>(
        &self,
        purpose: &'static str,
        len: usize,
    ) -> Result<DeviceBuffer<T>, Error> {
        let kept = {
            let mut kept = self.scratch.kept.lock().unwrap_or_else(|e| e.into_inner());
            let found = kept.current.iter().position(|(p, buffer)| {
                *p == purpose && buffer.downcast_ref::<DeviceBuffer<T>>().is_some()
            });
            found.map(|i| kept.current.swap_remove(i).1)
        };
        if let Some(buffer) = kept.and_then(|b| b.downcast::<DeviceBuffer<T>>().ok()) {
            if buffer.len() >= len {
                return Ok(*buffer);
            }
            self.retire_scratch(buffer);
        }
        self.alloc_zeroed(len.max(1))
    }

    /// Gives back a buffer [`Runtime::lend_scratch`] lent for `purpose`.
    pub fn keep_scratch<T: DeviceScalar>(&self, purpose: &'static str, buffer: DeviceBuffer<T>) {
        let mut kept = self.scratch.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.current.push((purpose, Box::new(buffer)));
    }

    fn retire_scratch<T: DeviceScalar>(&self, buffer: Box<DeviceBuffer<T>>) {
        let mut kept = self.scratch.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.retired.push(buffer);
    }
}

#[cfg(test)]
mod tests {
    use crate::Runtime;

    #[test]
    fn a_scratch_buffer_given_back_is_lent_again_as_it_was_left() -> Result<(), crate::Error> {
        let rt = Runtime::interpreter();
        let mut flags = rt.lend_scratch::<u32>("flags", 4)?;
        assert_eq!(rt.download(&flags)?, [0; 4]);
        rt.copy_from_host(&mut flags, &[1, 2, 3, 4])?;
        rt.keep_scratch("flags", flags);

        // The same purpose and type, no longer: the buffer as it was left.
        let flags = rt.lend_scratch::<u32>("flags", 3)?;
        assert_eq!(rt.download(&flags)?, [1, 2, 3, 4]);
        // Meanwhile another borrower of it, another purpose or another type
        // gets a new zeroed buffer.
        assert_eq!(rt.download(&rt.lend_scratch::<u32>("flags", 2)?)?, [0; 2]);
        assert_eq!(rt.download(&rt.lend_scratch::<u32>("sums", 2)?)?, [0; 2]);
        assert_eq!(rt.download(&rt.lend_scratch::<f32>("flags", 2)?)?, [0.0; 2]);
        rt.keep_scratch("flags", flags);

        // Longer than the one kept: a new zeroed buffer replaces it.
        let flags = rt.lend_scratch::<u32>("flags", 6)?;
        assert_eq!(rt.download(&flags)?, [0; 6]);
        rt.keep_scratch("flags", flags);
        assert_eq!(rt.lend_scratch::<u32>("flags", 1)?.len(), 6);
        Ok(())
    }
}
