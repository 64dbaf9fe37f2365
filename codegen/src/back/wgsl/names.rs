//! WGSL identifiers for the kernel's names: every declaration of the module
//! gets a name of its own, so no declaration shadows another or a WGSL
//! built-in the generated code calls.
//!
//! A DSL name is kept when it is free; otherwise it takes the first free
//! `_1`, `_2`, ... suffix. Names the generator makes for itself (helper
//! functions) start with `wf_`, so a DSL name starting with `wf_` (or with
//! `__`, which WGSL reserves) is prefixed with `u`.

use std::collections::BTreeSet;

/// WGSL keywords and reserved words (WGSL §15.1, §15.2), and the
/// predeclared types, enumerants and built-in functions (§6.9, §6.3.1, §17):
/// a declaration named like a built-in would hide it from the generated code.
const RESERVED: &str = "
    alias break case const const_assert continue continuing default diagnostic discard else
    enable false fn for if let loop override requires return struct switch true var while
    NULL Self abstract active alignas alignof as asm asm_fragment async attribute auto await
    become cast catch class co_await co_return co_yield coherent column_major common compile
    compile_fragment concept const_cast consteval constexpr constinit crate debugger decltype
    delete demote demote_to_helper do dynamic_cast enum explicit export extends extern external
    fallthrough filter final finally friend from fxgroup get goto groupshared highp impl
    implements import inline instanceof interface layout lowp macro macro_rules match mediump
    meta mod module move mut mutable namespace new nil noexcept noinline nointerpolation
    non_coherent noncoherent noperspective null nullptr of operator package packoffset
    partition pass patch pixelfragment precise precision premerge priv protected pub public
    readonly ref regardless register reinterpret_cast require resource restrict self set shared
    sizeof smooth snorm static static_assert static_cast std subroutine super target template
    this thread_local throw trait try type typedef typeid typename typeof union unless unorm
    unsafe unsized use using varying virtual volatile wgsl where with writeonly yield
    bool i32 u32 f32 f16 i64 u64 f64 array atomic vec2 vec3 vec4 mat2x2 mat2x3 mat2x4 mat3x2
    mat3x3 mat3x4 mat4x2 mat4x3 mat4x4 ptr sampler sampler_comparison read write read_write
    function private workgroup uniform storage
    bitcast all any select arrayLength abs acos acosh asin asinh atan atanh atan2 ceil clamp
    cos cosh countLeadingZeros countOneBits countTrailingZeros cross degrees determinant
    distance dot exp exp2 extractBits faceForward firstLeadingBit firstTrailingBit floor fma
    fract frexp insertBits inverseSqrt ldexp length log log2 max min mix modf normalize pow
    quantizeToF16 radians reflect refract reverseBits round saturate sign sin sinh smoothstep
    sqrt step tan tanh transpose trunc atomicLoad atomicStore atomicAdd atomicSub atomicMax
    atomicMin atomicAnd atomicOr atomicXor atomicExchange atomicCompareExchangeWeak
    storageBarrier workgroupBarrier workgroupUniformLoad subgroupShuffle subgroupShuffleDown
    subgroupShuffleUp subgroupShuffleXor
";

/// The prefix of the generator's own names.
pub const GENERATED_PREFIX: &str = "wf_";

/// One namespace: the module's declarations, or the members of `Params`.
pub struct Names {
    taken: BTreeSet<String>,
}

impl Names {
    /// A namespace where `fixed` (the generator's names) are already taken.
    pub fn new(fixed: &[&str]) -> Names {
        let mut taken: BTreeSet<String> = RESERVED.split_whitespace().map(String::from).collect();
        taken.extend(fixed.iter().map(|s| s.to_string()));
        Names { taken }
    }

    /// A fresh identifier for the DSL name `name`.
    pub fn fresh(&mut self, name: &str) -> String {
        let base = if name.starts_with(GENERATED_PREFIX) || name.starts_with("__") {
            format!("u{name}")
        } else {
            name.to_string()
        };
        let mut candidate = base.clone();
        let mut n = 0;
        while self.taken.contains(&candidate) {
            n += 1;
            candidate = format!("{base}_{n}");
        }
        self.taken.insert(candidate.clone());
        candidate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_never_reserved_or_generated() {
        let mut names = Names::new(&["main", "params"]);
        assert_eq!(names.fresh("x"), "x");
        assert_eq!(names.fresh("x"), "x_1");
        assert_eq!(names.fresh("x_1"), "x_1_1");
        assert_eq!(names.fresh("max"), "max_1");
        assert_eq!(names.fresh("filter"), "filter_1");
        assert_eq!(names.fresh("params"), "params_1");
        assert_eq!(names.fresh("wf_round"), "uwf_round");
        assert_eq!(names.fresh("__x"), "u__x");
    }
}
