//! Virtual registers: one typed class per kind of value, numbered per class,
//! declared at the top of the function (`.reg .f32 %f<12>;`). ptxas does the
//! real allocation; this only hands out fresh names.

use std::fmt;

use crate::ir::Scalar;

/// A register class. i8/u8 live in 32-bit registers (kept sign- or
/// zero-extended), f16/bf16 in 16-bit ones, bool in predicates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegClass {
    Pred,
    B16,
    B32,
    B64,
    F32,
    F64,
}

impl RegClass {
    pub const ALL: [RegClass; 6] = [
        RegClass::Pred,
        RegClass::B16,
        RegClass::B32,
        RegClass::B64,
        RegClass::F32,
        RegClass::F64,
    ];

    pub fn of(ty: Scalar) -> RegClass {
        match ty {
            Scalar::Bool => RegClass::Pred,
            Scalar::F16 | Scalar::Bf16 => RegClass::B16,
            Scalar::I8 | Scalar::U8 | Scalar::I32 | Scalar::U32 | Scalar::E4m3 | Scalar::E5m2 => {
                RegClass::B32
            }
            Scalar::I64 | Scalar::U64 => RegClass::B64,
            Scalar::F32 => RegClass::F32,
            Scalar::F64 => RegClass::F64,
        }
    }

    fn prefix(self) -> &'static str {
        match self {
            RegClass::Pred => "%p",
            RegClass::B16 => "%h",
            RegClass::B32 => "%r",
            RegClass::B64 => "%rd",
            RegClass::F32 => "%f",
            RegClass::F64 => "%fd",
        }
    }

    /// The type of its `.reg` declaration and of a plain `mov`.
    pub fn ptx_type(self) -> &'static str {
        match self {
            RegClass::Pred => "pred",
            RegClass::B16 => "b16",
            RegClass::B32 => "b32",
            RegClass::B64 => "b64",
            RegClass::F32 => "f32",
            RegClass::F64 => "f64",
        }
    }

    fn slot(self) -> usize {
        RegClass::ALL
            .iter()
            .position(|c| *c == self)
            .expect("every class is in ALL")
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reg {
    pub class: RegClass,
    index: u32,
}

impl fmt::Display for Reg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.class.prefix(), self.index)
    }
}

/// Hands out fresh registers, counting per class.
#[derive(Default)]
pub struct RegAlloc {
    counts: [u32; 6],
}

impl RegAlloc {
    pub fn fresh(&mut self, class: RegClass) -> Reg {
        let count = &mut self.counts[class.slot()];
        let reg = Reg {
            class,
            index: *count,
        };
        *count += 1;
        reg
    }

    /// `.reg` lines for every class in use, in a fixed order.
    pub fn declarations(&self) -> Vec<String> {
        RegClass::ALL
            .iter()
            .filter(|c| self.counts[c.slot()] > 0)
            .map(|c| {
                format!(
                    ".reg .{} {}<{}>;",
                    c.ptx_type(),
                    c.prefix(),
                    self.counts[c.slot()]
                )
            })
            .collect()
    }
}
