//! [`VariantCache`]: the compiled variants of a backend, one per (kernel IR,
//! const values, backend key), compiled on first launch and kept. Kernels
//! are told apart by their IR's digest ([`KernelDef::ir_digest`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use warpforge_codegen::{Digest, KernelDef};

use crate::Error;

/// Variants by the digest of their kernel's IR (names need not be unique
/// across a program). `K` is what else picks the code: the arch for PTX,
/// the block shape for WGSL.
pub(crate) struct VariantCache<K, V> {
    variants: Mutex<BTreeMap<Digest, Vec<Entry<K, V>>>>,
}

struct Entry<K, V> {
    consts: Vec<i64>,
    key: K,
    /// Empty until a compile succeeds. Its own lock, so that different
    /// variants compile at once (the driver JIT-compiles a large GEMM variant
    /// for most of a second) while one variant compiles once.
    slot: Arc<Mutex<Option<Arc<V>>>>,
}

impl<K, V> Default for VariantCache<K, V> {
    fn default() -> Self {
        VariantCache {
            variants: Mutex::default(),
        }
    }
}

impl<K: PartialEq, V> VariantCache<K, V> {
    /// The cached variant, or `compile` it and cache it. `compile` runs under
    /// the variant's own lock: a variant is compiled once, threads that want
    /// it meanwhile wait for it, and other variants compile beside it. A
    /// failure is not cached.
    pub(crate) fn get_or_compile(
        &self,
        def: &KernelDef,
        consts: &[i64],
        key: K,
        compile: impl FnOnce() -> Result<V, Error>,
    ) -> Result<Arc<V>, Error> {
        let slot = {
            // The cache stays consistent if a holder panicked: entries are inserted whole.
            let mut variants = self.variants.lock().unwrap_or_else(PoisonError::into_inner);
            let list = variants.entry(def.ir_digest()).or_default();
            match list.iter().find(|e| e.key == key && e.consts == consts) {
                Some(entry) => entry.slot.clone(),
                None => {
                    let slot = Arc::new(Mutex::new(None));
                    list.push(Entry {
                        consts: consts.to_vec(),
                        key,
                        slot: slot.clone(),
                    });
                    slot
                }
            }
        };
        let mut variant = slot.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(compiled) = &*variant {
            return Ok(compiled.clone());
        }
        let compiled = Arc::new(compile()?);
        *variant = Some(compiled.clone());
        Ok(compiled)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::thread;

    use warpforge_codegen::Target;

    use super::*;
    use crate::test_defs::kernel_def;

    /// Threads of several runtimes launching the same variants at once (the
    /// process-wide PTX cache on a multi-GPU host): each variant is compiled
    /// once, and every thread gets that one.
    #[test]
    fn threads_share_each_variant_and_compile_it_once() {
        let cache: VariantCache<u32, String> = VariantCache::default();
        let defs = [
            kernel_def("first", vec![], vec![Target::Wgsl]),
            kernel_def("second", vec![], vec![Target::Wgsl]),
        ];
        let compiles = AtomicUsize::new(0);
        let (threads, keys, const_sets) = (8, 3u32, [[1i64], [2]]);
        let seen: Vec<Vec<Arc<String>>> = thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    scope.spawn(|| {
                        let mut got = Vec::new();
                        for def in &defs {
                            for key in 0..keys {
                                for consts in &const_sets {
                                    let variant = cache
                                        .get_or_compile(def, consts, key, || {
                                            compiles.fetch_add(1, Ordering::SeqCst);
                                            Ok(format!("{}:{key}:{consts:?}", def.ir.name))
                                        })
                                        .unwrap();
                                    got.push(variant);
                                }
                            }
                        }
                        got
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        let distinct = defs.len() * keys as usize * const_sets.len();
        assert_eq!(compiles.load(Ordering::SeqCst), distinct);
        for got in &seen {
            assert_eq!(got.len(), distinct);
            for (mine, first) in got.iter().zip(&seen[0]) {
                assert!(Arc::ptr_eq(mine, first), "{mine} is another copy");
            }
        }
        assert_eq!(*seen[0][0], "first:0:[1]");
        assert_eq!(*seen[0][distinct - 1], "second:2:[2]");
    }

    /// Two variants compile at the same time: each compile waits (up to a
    /// generous bound) to see the other one inside `compile` too, which a
    /// lock over the whole cache during a compile would never let happen.
    #[test]
    fn different_variants_compile_at_once() {
        let cache: VariantCache<u32, bool> = VariantCache::default();
        let def = kernel_def("pair", vec![], vec![Target::Wgsl]);
        let inside = AtomicUsize::new(0);
        let met: Vec<bool> = thread::scope(|scope| {
            let workers: Vec<_> = (0..2u32)
                .map(|key| {
                    let (cache, def, inside) = (&cache, &def, &inside);
                    scope.spawn(move || {
                        let compiled = cache.get_or_compile(def, &[], key, || {
                            inside.fetch_add(1, Ordering::SeqCst);
                            let deadline =
                                std::time::Instant::now() + std::time::Duration::from_secs(30);
                            while inside.load(Ordering::SeqCst) < 2
                                && std::time::Instant::now() < deadline
                            {
                                thread::yield_now();
                            }
                            Ok(inside.load(Ordering::SeqCst) == 2)
                        });
                        *compiled.unwrap()
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        assert_eq!(met, [true, true], "one compile waited for the other");
    }

    #[test]
    fn a_failed_compile_is_not_cached() {
        let cache: VariantCache<u32, u32> = VariantCache::default();
        let def = kernel_def("flaky", vec![], vec![Target::Wgsl]);
        let failed = cache.get_or_compile(&def, &[], 0, || Err(Error::Buffer("no".into())));
        assert!(failed.is_err());
        assert_eq!(*cache.get_or_compile(&def, &[], 0, || Ok(7)).unwrap(), 7);
        assert_eq!(*cache.get_or_compile(&def, &[], 0, || Ok(8)).unwrap(), 7);
    }
}
