//! WGSL functions the generated code calls where a DSL construct is more
//! than one WGSL expression. Each is emitted once, only when used, in a
//! fixed order; their names start with `wf_`, which no DSL name does.

use super::function::Emitter;
use crate::ir::{LocalId, ParamId, Scalar};
use crate::Error;

/// The variable an atomic compare-exchange updates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum AtomicVar {
    Buffer(ParamId),
    Shared(LocalId),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Helper {
    /// Rust's `as` from f32 (f16 widens first) to an integer type.
    FloatToInt(Scalar),
    /// Rust's `round` on f32 or f16.
    Round(Scalar),
    /// `shfl_down` with CUDA's clamp at lane 31, on a 32-bit type.
    ShuffleDown(Scalar),
    /// A strong `atomic_compare_exchange` on one variable.
    CompareExchange(AtomicVar),
}

impl Emitter<'_> {
    /// The name of a helper, recording its use.
    pub fn helper(&mut self, helper: Helper) -> String {
        self.helpers.insert(helper);
        match helper {
            Helper::FloatToInt(to) => format!("wf_f32_to_{}", to.name()),
            Helper::Round(ty) => format!("wf_round_{}", ty.name()),
            Helper::ShuffleDown(ty) => format!("wf_shuffle_down_{}", ty.name()),
            Helper::CompareExchange(var) => {
                format!("wf_compare_exchange_{}", self.atomic_var(var).0)
            }
        }
    }

    /// The name of an atomic variable, its element type and its dimensions.
    fn atomic_var(&self, var: AtomicVar) -> (String, Scalar, usize) {
        match var {
            AtomicVar::Buffer(param) => {
                let ty = match self.kernel.param(param).ty {
                    crate::ir::ParamType::Slice { elem, .. }
                    | crate::ir::ParamType::Scalar(elem) => elem,
                };
                let name = self.buffers[param as usize].clone().unwrap_or_default();
                (name, ty, 1)
            }
            AtomicVar::Shared(local) => {
                let decl = self.kernel.local(local);
                (
                    self.locals[local as usize].clone(),
                    decl.ty,
                    decl.dims.len(),
                )
            }
        }
    }

    /// The text of a helper function.
    pub fn helper_text(&mut self, helper: &Helper) -> Result<String, Error> {
        let name = self.helper(*helper);
        Ok(match *helper {
            Helper::FloatToInt(to) => {
                let t = self.ty(to)?;
                // WGSL clamps to the largest value both types hold (2^32 - 256
                // for u32, 2^31 - 128 for i32: f32 has 24 bits of mantissa);
                // Rust's `as` gives the integer type's maximum from 2^32 (2^31) up.
                let converted = match to {
                    Scalar::I8 => "clamp(i32(x), -128i, 127i)".to_string(),
                    Scalar::U8 => "min(u32(x), 255u)".to_string(),
                    Scalar::I32 => "select(i32(x), 2147483647i, x >= 2147483648.0f)".to_string(),
                    Scalar::U32 => "select(u32(x), 4294967295u, x >= 4294967296.0f)".to_string(),
                    _ => format!("{t}(x)"),
                };
                format!(
                    "// Rust's `as`: truncates and saturates at the integer type's limits, and NaN gives 0.\n\
                     fn {name}(x: f32) -> {t} {{\n    \
                         let is_nan = (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;\n    \
                         return select({converted}, 0{suffix}, is_nan);\n\
                     }}",
                    suffix = if t == "i32" { "i" } else { "u" }
                )
            }
            Helper::Round(ty) => {
                let t = self.ty(ty)?;
                let suffix = if ty == Scalar::F16 { "h" } else { "f" };
                format!(
                    "// Rust's `round`: halfway cases away from zero (WGSL's `round` goes to even).\n\
                     fn {name}(x: {t}) -> {t} {{\n    \
                         let truncated = trunc(x);\n    \
                         return select(truncated, truncated + sign(x), abs(x - truncated) >= 0.5{suffix});\n\
                     }}"
                )
            }
            Helper::ShuffleDown(ty) => {
                let t = self.ty(ty)?;
                format!(
                    "// CUDA's `shfl.down` with clamp 31: a lane whose source is past lane 31 keeps its value.\n\
                     fn {name}(value: {t}, delta: u32, lane: u32) -> {t} {{\n    \
                         let shifted = subgroupShuffleDown(value, delta);\n    \
                         return select(value, shifted, delta < 32u - lane);\n\
                     }}"
                )
            }
            Helper::CompareExchange(var) => {
                let (var_name, ty, dims) = self.atomic_var(var);
                let t = self.ty(ty)?;
                let indices: Vec<String> = (0..dims).map(|i| format!("i{i}")).collect();
                let params: Vec<String> = indices.iter().map(|i| format!("{i}: u32")).collect();
                let place: String = indices.iter().map(|i| format!("[{i}]")).collect();
                format!(
                    "// A strong compare-exchange: WGSL's weak one, retried while it fails spuriously.\n\
                     fn {name}({params}, compare: {t}, value: {t}) -> {t} {{\n    \
                         var old: {t};\n    \
                         loop {{\n        \
                             let result = atomicCompareExchangeWeak(&{var_name}{place}, compare, value);\n        \
                             old = result.old_value;\n        \
                             if result.exchanged || old != compare {{\n            \
                                 break;\n        \
                             }}\n    \
                         }}\n    \
                         return old;\n\
                     }}",
                    params = params.join(", ")
                )
            }
        })
    }
}
