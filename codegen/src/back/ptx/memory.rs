//! Places: register-array elements (scalarized: one register per element),
//! global slice elements and shared-array elements, and atomics on them.
//!
//! Global addresses are the slice's global-window pointer (converted once at
//! entry) plus `index * size` (`mul.wide` from 32-bit indices). Shared
//! addresses are 32-bit offsets into the one dynamic block, from the
//! array's offset plus the row-major flattened index; literal indices and
//! literal addends of indices (`r + 16`) fold into the instruction's
//! immediate offset, so that accesses that differ by constants share one
//! address register. (Shared addresses are 32-bit, so the fold is exact
//! even when a sum wraps; a global index is widened to 64 bits after its
//! 32-bit sum, so there it is not.)
//!
//! Indices are not bounds-checked on the device (as in CUDA C): guard
//! accesses with `if i < x.len()`.

use std::fmt;

use super::features::Feature;
use super::function::{arith, is_half, mem_type, Emitter, Operand, ParamRegs};
use super::regs::Reg;
use crate::ir::{AtomicOp, BinaryOp, Expr, ExprKind, ParamType, Place, Scalar, Space};
use crate::Error;

/// A memory operand: `[base+offset]` in a state space.
pub struct Address {
    pub space: &'static str,
    pub base: Reg,
    pub offset: i64,
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.offset {
            0 => write!(f, "[{}]", self.base),
            off => write!(f, "[{}+{off}]", self.base),
        }
    }
}

impl Emitter<'_> {
    /// The element type of a place.
    pub fn place_type(&self, place: &Place) -> Scalar {
        match place {
            Place::Local { local, .. } => self.kernel.locals[*local as usize].ty,
            Place::Global { param, .. } => match self.kernel.params[*param as usize].ty {
                ParamType::Slice { elem, .. } | ParamType::Scalar(elem) => elem,
            },
        }
    }

    /// The register of a register-space place, or `None` for memory.
    pub fn register_element(&mut self, place: &Place) -> Result<Option<Reg>, Error> {
        let Place::Local { local, indices } = place else {
            return Ok(None);
        };
        let decl = &self.kernel.locals[*local as usize];
        if decl.space != Space::Register {
            return Ok(None);
        }
        let mut flat = 0usize;
        for (index, dim) in indices.iter().zip(&decl.dims) {
            let (Some(i), Some(d)) = (index.as_int(), dim.as_int()) else {
                return Err(self.error(format!(
                    "register array `{}` is indexed with a value known only at run time: validate the kernel first",
                    decl.name
                )));
            };
            flat = flat * d as usize + i as usize;
        }
        Ok(Some(self.local_regs(*local)[flat]))
    }

    /// `index * size` as a 64-bit register, or a constant.
    fn global_offset(&mut self, index: &Expr, size: u32) -> Result<(Option<Reg>, i64), Error> {
        if let Some(i) = index.as_int() {
            return Ok((None, i * size as i64));
        }
        let i = self.expr(index)?;
        let off = self.fresh(Scalar::U64);
        if index.ty.size_bytes() == 8 {
            self.ins(format!("mul.lo.s64 {off}, {i}, {size}"));
        } else {
            let t = if index.ty.is_signed() { "s32" } else { "u32" };
            self.ins(format!("mul.wide.{t} {off}, {i}, {size}"));
        }
        Ok((Some(off), 0))
    }

    /// A 32-bit register holding an index (64-bit indices are truncated:
    /// shared memory is far smaller than 4 GiB).
    fn index32(&mut self, index: &Expr) -> Result<Reg, Error> {
        let i = self.expr(index)?;
        if index.ty.size_bytes() == 8 {
            let r = self.fresh(Scalar::U32);
            self.ins(format!("cvt.u32.u64 {r}, {i}"));
            Ok(r)
        } else {
            Ok(self.in_reg(i, Scalar::U32))
        }
    }

    pub fn address(&mut self, place: &Place) -> Result<Address, Error> {
        let size = self.place_type(place).size_bytes();
        match place {
            Place::Global { param, index } => {
                let ParamRegs::Slice { ptr: Some(ptr), .. } = self.params[*param as usize] else {
                    return Err(self.error("a slice is accessed but its pointer was not loaded"));
                };
                let (off, offset) = self.global_offset(index, size)?;
                let base = match off {
                    Some(off) => {
                        let addr = self.fresh(Scalar::U64);
                        self.ins(format!("add.s64 {addr}, {ptr}, {off}"));
                        addr
                    }
                    None => ptr,
                };
                Ok(Address {
                    space: "global",
                    base,
                    offset,
                })
            }
            Place::Local { local, indices } => {
                let decl = &self.kernel.locals[*local as usize];
                let (Some(array_offset), Some(smem)) =
                    (self.shared_offsets[*local as usize], self.shared_base)
                else {
                    return Err(self.error(format!("`{}` is not in shared memory", decl.name)));
                };
                let dims: Vec<i64> = decl.dims.iter().map(|d| d.as_int().unwrap_or(0)).collect();
                // Byte stride of each dimension, outermost first.
                let mut strides = vec![size as i64; dims.len()];
                for axis in (0..dims.len().saturating_sub(1)).rev() {
                    strides[axis] = strides[axis + 1] * dims[axis + 1];
                }
                // The sum starts at the block's base and adds the outermost
                // index first, so accesses that share leading indices (a
                // stage, a row) share the partial sums too: ptxas keeps one
                // register for them and each access adds only what differs.
                let mut offset = array_offset as i64;
                let mut base = smem;
                for (index, stride) in indices.iter().zip(&strides) {
                    let (index, constant) = split_constant(index);
                    offset += constant * stride;
                    if let Some(index) = index {
                        let i = self.index32(index)?;
                        let sum = self.fresh(Scalar::U32);
                        self.ins(format!("mad.lo.u32 {sum}, {i}, {stride}, {base}"));
                        base = sum;
                    }
                }
                Ok(Address {
                    space: "shared",
                    base,
                    offset,
                })
            }
        }
    }

    pub fn load(&mut self, place: &Place) -> Result<Operand, Error> {
        if let Some(reg) = self.register_element(place)? {
            return Ok(Operand::Reg(reg));
        }
        let ty = self.place_type(place);
        let addr = self.address(place)?;
        let (space, nc) = (addr.space, self.read_only_cache(place));
        if ty == Scalar::Bool {
            let byte = self.fresh(Scalar::U32);
            self.ins(format!("ld.{space}{nc}.u8 {byte}, {addr}"));
            let p = self.fresh(Scalar::Bool);
            self.ins(format!("setp.ne.u32 {p}, {byte}, 0"));
            return Ok(Operand::Reg(p));
        }
        let r = self.fresh(ty);
        self.ins(format!("ld.{space}{nc}.{} {r}, {addr}", mem_type(ty)));
        Ok(Operand::Reg(r))
    }

    /// `.nc` for an element of a slice the kernel never writes (it goes
    /// through the read-only cache), else nothing.
    pub fn read_only_cache(&self, place: &Place) -> &'static str {
        match place {
            Place::Global { param, .. } if !self.usage.written[*param as usize] => ".nc",
            _ => "",
        }
    }

    pub fn store_memory(&mut self, place: &Place, value: Operand) -> Result<(), Error> {
        let ty = self.place_type(place);
        let addr = self.address(place)?;
        let value = if ty == Scalar::Bool {
            let byte = self.fresh(Scalar::U32);
            self.ins(format!("selp.u32 {byte}, 1, 0, {value}"));
            byte
        } else {
            self.in_reg(value, ty)
        };
        self.ins(format!(
            "st.{}.{} {addr}, {value}",
            addr.space,
            mem_type(ty)
        ));
        Ok(())
    }

    /// `atom.<space>.<op>.<type>`; yields the old value.
    pub fn atomic(
        &mut self,
        op: AtomicOp,
        place: &Place,
        value: &Expr,
        compare: Option<&Expr>,
    ) -> Result<Operand, Error> {
        let ty = self.place_type(place);
        let bits = match ty.size_bytes() {
            2 => "b16",
            4 => "b32",
            _ => "b64",
        };
        let unsupported = || format!("`{op:?}` atomics on {} are not supported", ty.name());
        let (name, t) = match op {
            AtomicOp::Add => match ty {
                Scalar::I32 | Scalar::U32 | Scalar::F32 | Scalar::F64 => ("add", arith(ty)),
                // Two's complement addition is the same for i64 and u64.
                Scalar::I64 | Scalar::U64 => ("add", "u64"),
                Scalar::F16 => {
                    self.require(Feature::AtomAddF16)?;
                    ("add.noftz", "f16")
                }
                Scalar::Bf16 => {
                    self.require(Feature::AtomAddBf16)?;
                    ("add.noftz", "bf16")
                }
                _ => return Err(self.error(unsupported())),
            },
            AtomicOp::Min | AtomicOp::Max if ty.is_int() && ty.size_bytes() >= 4 => {
                (if op == AtomicOp::Min { "min" } else { "max" }, arith(ty))
            }
            AtomicOp::And | AtomicOp::Or | AtomicOp::Xor if ty.is_int() && ty.size_bytes() >= 4 => {
                let name = match op {
                    AtomicOp::And => "and",
                    AtomicOp::Or => "or",
                    _ => "xor",
                };
                (name, bits)
            }
            AtomicOp::Exchange if ty.size_bytes() >= 4 && ty != Scalar::Bool => ("exch", bits),
            AtomicOp::CompareExchange if ty.size_bytes() >= 4 && ty != Scalar::Bool => {
                ("cas", bits)
            }
            AtomicOp::CompareExchange if is_half(ty) => {
                self.require(Feature::AtomCasB16)?;
                ("cas", "b16")
            }
            _ => return Err(self.error(unsupported())),
        };
        // Operands in source order: the place, the expected value, the new one.
        let addr = self.address(place)?;
        let expected = compare.map(|c| self.expr(c)).transpose()?;
        let value = self.expr(value)?;
        let old = self.fresh(ty);
        match expected {
            // IR: `compare` is the expected value, `value` the new one;
            // PTX: `atom.cas d, [a], expected, new`.
            Some(expected) => self.ins(format!(
                "atom.{}.{name}.{t} {old}, {addr}, {expected}, {value}",
                addr.space
            )),
            None => self.ins(format!(
                "atom.{}.{name}.{t} {old}, {addr}, {value}",
                addr.space
            )),
        }
        Ok(Operand::Reg(old))
    }
}

/// `x + c` as (`x`, `c`) for a nonnegative literal `c`, through nested sums
/// (`x + 16 + 8` is (`x`, 24)); a literal alone is (`None`, value).
fn split_constant(index: &Expr) -> (Option<&Expr>, i64) {
    if let Some(v) = index.as_int() {
        return (None, v);
    }
    if let ExprKind::Binary(BinaryOp::Add, a, b) = &index.kind {
        match (a.as_int(), b.as_int()) {
            (_, Some(c)) if c >= 0 => {
                let (x, more) = split_constant(a);
                return (x, more + c);
            }
            (Some(c), _) if c >= 0 => {
                let (x, more) = split_constant(b);
                return (x, more + c);
            }
            _ => {}
        }
    }
    (Some(index), 0)
}
