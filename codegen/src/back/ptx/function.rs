//! The emitter of one `.entry`: its state (registers, labels, loop targets,
//! where each local and parameter lives) and the helpers every construct
//! uses. Statements, expressions, memory and intrinsics are emitted by the
//! `impl Emitter` blocks in the sibling modules, one case per construct.

use std::fmt;

use super::features::{Feature, FeatureUse};
use super::regs::{Reg, RegAlloc, RegClass};
use super::shared::SharedLayout;
use super::staging::Staging;
use super::usage::Usage;
use crate::ir::{Arch, Kernel, Literal, LocalId, ParamType, Scalar};
use crate::Error;

/// The name of the one dynamic shared-memory block every shared array lives in.
pub const SHARED_SYMBOL: &str = "smem";

/// A source operand: a register or an immediate spelled for its type.
#[derive(Clone, Debug, PartialEq)]
pub enum Operand {
    Reg(Reg),
    Imm(String),
}

impl fmt::Display for Operand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operand::Reg(r) => r.fmt(f),
            Operand::Imm(s) => f.write_str(s),
        }
    }
}

/// Where a parameter's value lives once loaded at entry.
#[derive(Clone, Copy)]
pub enum ParamRegs {
    Unused,
    Scalar(Reg),
    /// The global-window address of the first element, the length and
    /// the generic address of the tensor map, each when read.
    Slice {
        ptr: Option<Reg>,
        len: Option<Reg>,
        map: Option<Reg>,
    },
}

/// Branch targets of one enclosing loop.
pub struct LoopLabels {
    pub continue_to: String,
    pub break_to: String,
}

pub struct Emitter<'k> {
    pub kernel: &'k Kernel,
    pub arch: Arch,
    pub features: FeatureUse,
    pub regs: RegAlloc,
    pub usage: Usage,
    /// Body lines, indented, in order.
    lines: Vec<String>,
    next_label: u32,
    pub loops: Vec<LoopLabels>,
    /// Per local in register space: its registers, one per element
    /// (row-major), allocated at its first `let`.
    locals: Vec<Option<Vec<Reg>>>,
    /// Per local in shared space: its byte offset in the shared block.
    pub shared_offsets: Vec<Option<u32>>,
    pub shared_bytes: u32,
    /// The alignment of the shared block: [`super::shared::SHARED_ALIGN`], or more for
    /// swizzled wgmma tiles.
    pub shared_align: u32,
    /// The 32-bit shared-window address of the shared block.
    pub shared_base: Option<Reg>,
    pub params: Vec<ParamRegs>,
    /// Register staging of async copies, on targets without `cp.async`.
    pub staging: Option<Staging>,
}

/// The arithmetic type suffix of a value type. i8/u8 compute in 32 bits and
/// f16/bf16 in f32; bool has none. e4m3 and e5m2 are moved as their bits in
/// 32-bit registers, as u8 (the front lets no arithmetic reach them).
pub fn arith(ty: Scalar) -> &'static str {
    match ty {
        Scalar::I8 | Scalar::I32 => "s32",
        Scalar::U8 | Scalar::U32 | Scalar::Bool | Scalar::E4m3 | Scalar::E5m2 => "u32",
        Scalar::I64 => "s64",
        Scalar::U64 => "u64",
        Scalar::F16 | Scalar::Bf16 | Scalar::F32 => "f32",
        Scalar::F64 => "f64",
    }
}

/// The type suffix of a load or store. bool is one byte in memory.
pub fn mem_type(ty: Scalar) -> &'static str {
    match ty {
        Scalar::Bool | Scalar::U8 | Scalar::E4m3 | Scalar::E5m2 => "u8",
        Scalar::I8 => "s8",
        Scalar::I32 => "s32",
        Scalar::U32 => "u32",
        Scalar::I64 => "s64",
        Scalar::U64 => "u64",
        Scalar::F16 | Scalar::Bf16 => "b16",
        Scalar::F32 => "f32",
        Scalar::F64 => "f64",
    }
}

/// The `.param` type of a scalar parameter. bool is passed as a u32 (the
/// runtime passes 0 or 1) since PTX has no predicate parameters.
pub fn param_type(ty: Scalar) -> &'static str {
    match ty {
        Scalar::Bool => "u32",
        _ => mem_type(ty),
    }
}

/// `f16`/`bf16`: stored in 16 bits, computed in f32.
pub fn is_half(ty: Scalar) -> bool {
    matches!(ty, Scalar::F16 | Scalar::Bf16)
}

/// The `.param` names of parameter `index`: `p{index}_{name}` for a scalar,
/// `p{index}_{name}_ptr` and `p{index}_{name}_len` for a slice. The index
/// keeps them unique whatever the names.
pub fn param_names(kernel: &Kernel, index: usize) -> (String, String) {
    let base = format!("p{index}_{}", kernel.params[index].name);
    (format!("{base}_ptr"), format!("{base}_len"))
}

/// The `.param` name of the tensor map of slice parameter `index`.
pub fn tensor_map_param_name(kernel: &Kernel, index: usize) -> String {
    format!("p{index}_{}_map", kernel.params[index].name)
}

pub fn scalar_param_name(kernel: &Kernel, index: usize) -> String {
    format!("p{index}_{}", kernel.params[index].name)
}

impl<'k> Emitter<'k> {
    /// An emitter for `kernel` on `arch`; an error when its shared arrays
    /// do not fit one block there.
    pub fn new(kernel: &'k Kernel, arch: Arch) -> Result<Emitter<'k>, Error> {
        let usage = Usage::of(kernel);
        let layout = SharedLayout::of(kernel, &usage);
        // Within the arch's limit, the offsets fit a u32.
        layout.check_fits(kernel, arch)?;
        let shared_offsets = layout.offsets.iter().map(|o| o.map(|o| o as u32)).collect();
        let (shared_bytes, shared_align) = (layout.bytes as u32, layout.align);
        let features = FeatureUse::new(arch);
        let staging = (!features.available(Feature::CpAsync)).then(|| Staging::new(kernel));
        Ok(Emitter {
            kernel,
            arch,
            features,
            regs: RegAlloc::default(),
            usage,
            lines: Vec::new(),
            next_label: 0,
            loops: Vec::new(),
            locals: vec![None; kernel.locals.len()],
            shared_offsets,
            shared_bytes,
            shared_align,
            shared_base: None,
            params: vec![ParamRegs::Unused; kernel.params.len()],
            staging,
        })
    }

    /// An error about this kernel on this target.
    pub fn error(&self, message: impl fmt::Display) -> Error {
        Error::new(format!(
            "kernel `{}` ({}): {message}",
            self.kernel.name,
            self.arch.name()
        ))
    }

    pub fn require(&mut self, feature: Feature) -> Result<(), Error> {
        self.features
            .require(feature)
            .map_err(|reason| self.error(reason))
    }

    /// Emits one instruction.
    pub fn ins(&mut self, text: impl AsRef<str>) {
        self.lines.push(format!("    {};", text.as_ref()));
    }

    pub fn place_label(&mut self, label: &str) {
        self.lines.push(format!("{label}:"));
    }

    /// A fresh number for the labels of one construct (`$if3_else`, `$if3_end`).
    pub fn label_id(&mut self) -> u32 {
        self.next_label += 1;
        self.next_label
    }

    pub fn fresh(&mut self, ty: Scalar) -> Reg {
        self.regs.fresh(RegClass::of(ty))
    }

    pub fn fresh_class(&mut self, class: RegClass) -> Reg {
        self.regs.fresh(class)
    }

    /// `mov` of a register's own class.
    pub fn mov(&mut self, dst: Reg, src: &Operand) {
        self.ins(format!("mov.{} {dst}, {src}", dst.class.ptx_type()));
    }

    /// The operand in a register (immediates are moved into a fresh one).
    pub fn in_reg(&mut self, op: Operand, ty: Scalar) -> Reg {
        match op {
            Operand::Reg(r) => r,
            imm => {
                let r = self.fresh(ty);
                self.mov(r, &imm);
                r
            }
        }
    }

    /// A literal as an immediate where PTX takes one, else in a register
    /// (bool, f16, bf16).
    pub fn literal(&mut self, ty: Scalar, lit: Literal) -> Operand {
        match (ty, lit) {
            (Scalar::U64, Literal::Int(v)) => Operand::Imm(format!("{}", v as u64)),
            (_, Literal::Int(v)) => Operand::Imm(format!("{v}")),
            (Scalar::F32, Literal::Float(v)) => {
                Operand::Imm(format!("0f{:08X}", (v as f32).to_bits()))
            }
            (Scalar::F64, Literal::Float(v)) => Operand::Imm(format!("0d{:016X}", v.to_bits())),
            (Scalar::F16, Literal::Float(v)) => self.bits16(half::f16::from_f64(v).to_bits()),
            (Scalar::Bf16, Literal::Float(v)) => self.bits16(half::bf16::from_f64(v).to_bits()),
            (_, Literal::Float(v)) => Operand::Imm(format!("0d{:016X}", v.to_bits())),
            (_, Literal::Bool(b)) => {
                let r = self.fresh(Scalar::Bool);
                self.mov(r, &Operand::Imm(format!("{}", b as u32)));
                Operand::Reg(r)
            }
        }
    }

    fn bits16(&mut self, bits: u16) -> Operand {
        let r = self.fresh_class(RegClass::B16);
        self.ins(format!("mov.b16 {r}, 0x{bits:04X}"));
        Operand::Reg(r)
    }

    /// The registers of a register-space local (one per element), allocated
    /// on first use.
    pub fn local_regs(&mut self, id: LocalId) -> Vec<Reg> {
        if let Some(regs) = &self.locals[id as usize] {
            return regs.clone();
        }
        let local = &self.kernel.locals[id as usize];
        let elements: usize = local
            .dims
            .iter()
            .map(|d| d.as_int().unwrap_or(0) as usize)
            .product();
        let class = RegClass::of(local.ty);
        let regs: Vec<Reg> = (0..elements).map(|_| self.regs.fresh(class)).collect();
        self.locals[id as usize] = Some(regs.clone());
        regs
    }

    /// Loads every used parameter once, at entry, and the shared base;
    /// clears the flags of staged copies.
    pub fn prologue(&mut self) {
        let kernel = self.kernel;
        for (index, param) in kernel.params.iter().enumerate() {
            match param.ty {
                ParamType::Scalar(ty) if self.usage.used[index] => {
                    let name = scalar_param_name(kernel, index);
                    let reg = if ty == Scalar::Bool {
                        let raw = self.fresh(Scalar::U32);
                        self.ins(format!("ld.param.u32 {raw}, [{name}]"));
                        let p = self.fresh(Scalar::Bool);
                        self.ins(format!("setp.ne.u32 {p}, {raw}, 0"));
                        p
                    } else {
                        let r = self.fresh(ty);
                        self.ins(format!("ld.param.{} {r}, [{name}]", param_type(ty)));
                        r
                    };
                    self.params[index] = ParamRegs::Scalar(reg);
                }
                ParamType::Scalar(_) => {}
                ParamType::Slice { .. } => {
                    let (ptr_name, len_name) = param_names(kernel, index);
                    let ptr = self.usage.used[index].then(|| {
                        let generic = self.fresh(Scalar::U64);
                        self.ins(format!("ld.param.u64 {generic}, [{ptr_name}]"));
                        let global = self.fresh(Scalar::U64);
                        self.ins(format!("cvta.to.global.u64 {global}, {generic}"));
                        global
                    });
                    let len = self.usage.len_read[index].then(|| {
                        let len = self.fresh(Scalar::U32);
                        self.ins(format!("ld.param.u32 {len}, [{len_name}]"));
                        len
                    });
                    // TMA takes the map's generic address (ptxas refuses the
                    // `.param` symbol itself).
                    let map = self.usage.tensor_map_read[index].then(|| {
                        let symbol = self.fresh(Scalar::U64);
                        let name = tensor_map_param_name(kernel, index);
                        self.ins(format!("mov.b64 {symbol}, {name}"));
                        let generic = self.fresh(Scalar::U64);
                        self.ins(format!("cvta.param.u64 {generic}, {symbol}"));
                        generic
                    });
                    self.params[index] = ParamRegs::Slice { ptr, len, map };
                }
            }
        }
        if self.shared_bytes > 0 {
            let base = self.fresh(Scalar::U32);
            self.ins(format!("mov.u32 {base}, {SHARED_SYMBOL}"));
            self.shared_base = Some(base);
        }
        self.staging_flags();
    }

    /// The body lines, with register declarations in front.
    pub fn finish(self) -> (Vec<String>, Vec<String>) {
        (self.regs.declarations(), self.lines)
    }
}
