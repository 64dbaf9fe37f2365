//! [`VariantCache`]: the compiled variants of a backend, one per (kernel IR,
//! const values, backend key), compiled on first launch and kept.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use warpforge_codegen::{Kernel, KernelDef};

use crate::Error;

/// Variants by kernel name. Names need not be unique across a program, so a
/// hit also compares the whole IR. `K` is what else picks the code: the
/// arch for PTX, the block shape for WGSL.
pub(crate) struct VariantCache<K, V> {
    variants: Mutex<BTreeMap<String, Vec<Entry<K, V>>>>,
}

struct Entry<K, V> {
    ir: Kernel,
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
        let list = variants.entry(def.ir.name.clone()).or_default();
        if let Some(found) = list
            .iter()
            .find(|e| e.key == key && e.consts == consts && e.ir == def.ir)
        {
            return Ok(found.variant.clone());
        }
        let variant = Arc::new(compile()?);
        list.push(Entry {
            ir: def.ir.clone(),
            consts: consts.to_vec(),
            key,
            variant: variant.clone(),
        });
        Ok(variant)
    }
}
