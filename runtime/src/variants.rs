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
    variant: Arc<V>,
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
    /// the cache's lock, so a variant is compiled once; a failure is not cached.
    pub(crate) fn get_or_compile(
        &self,
        def: &KernelDef,
        consts: &[i64],
        key: K,
        compile: impl FnOnce() -> Result<V, Error>,
    ) -> Result<Arc<V>, Error> {
        // The cache stays consistent if a holder panicked: entries are inserted whole.
        let mut variants = self.variants.lock().unwrap_or_else(PoisonError::into_inner);
        let list = variants.entry(def.ir_digest()).or_default();
        if let Some(found) = list.iter().find(|e| e.key == key && e.consts == consts) {
            return Ok(found.variant.clone());
        }
        let variant = Arc::new(compile()?);
        list.push(Entry {
            consts: consts.to_vec(),
            key,
            variant: variant.clone(),
        });
        Ok(variant)
    }
}
