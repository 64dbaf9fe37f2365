//! Vector memory accesses: what LLVM's load-store vectorizer does for the
//! cases that matter to tiled kernels. Two or four adjacent statements that
//! move consecutive elements of one shared array or one global slice between
//! memory and registers become one `ld.v{2,4}` / `st.v{2,4}` (an LDS.128, an
//! STG.64, ..), so the DSL needs no vector types.
//!
//! A group is `width` (4 or 2) adjacent statements of one block, all loads
//! (`reg = mem[..]`, or `let x = mem[..]`) or all stores (`mem[..] = v`),
//! where
//! - every load's destination is a scalar register local or a
//!   register-array element, every stored value an expression that reads
//!   registers only, and every memory side an element of the same shared
//!   array or the same slice (indexed by a 32-bit integer), of 2-, 4- or
//!   8-byte elements, at most 16 bytes in all;
//! - the element offsets (for shared arrays flattened row-major) are
//!   `f, f + 1, .., f + width - 1`, and `f` is provably a multiple of
//!   `width`, so the address is `width * size`-byte aligned, as `.v2`/`.v4`
//!   require;
//! - every index reads registers only (no memory, no atomics, no warp
//!   shuffles), and for loads none of the group's destination locals.
//!
//! Why the vector access means what the statements mean: the statements are
//! adjacent, so nothing else runs between them. A load group writes only its
//! destination registers, which no index reads, and reads memory the group
//! does not write; a store group writes only memory, which no index and no
//! stored value reads. So every index (and stored value) has the same value
//! whether computed at its own statement or before the group, each statement
//! touches the element its offset names, the elements are distinct, and
//! doing all the reads (or writes) at once at the first statement's address
//! is the same as doing them one by one, for this thread; other threads see
//! plain stores in no promised order anyway, as in CUDA C. Loads land in
//! fresh registers and are moved to their destinations in statement order,
//! so a destination written twice ends with the later value, as it would.
//!
//! The offsets are affine forms (`sum of coefficient * opaque term +
//! constant`) taken modulo 2^32: the emitter computes shared addresses in
//! 32-bit arithmetic that wraps (`Emitter::address`: 64-bit indices are
//! truncated, `mul.lo.u32`/`mad.lo.u32` over the indices), and `+`, `-`, `*`,
//! `<<` by a literal and the truncation or extension between 32- and 64-bit
//! integers all commute with reduction modulo 2^32. Wrapping therefore
//! cannot break the proof: "offset k is offset 0 plus k" holds modulo 2^32,
//! so the byte addresses (also modulo 2^32) are consecutive, and since the
//! widths (2, 4) and alignments (up to 16) divide 2^32, "a multiple of the
//! width" modulo 2^32 is a multiple in the address too (and an aligned
//! vector cannot straddle the wrap). A global index is a 32-bit value that
//! the emitter widens (zero- or sign-extends) before scaling it to a 64-bit
//! address; `width` consecutive 32-bit values starting at a multiple of
//! `width` cross neither 2^32 nor 2^31, so the widened indices are
//! consecutive too. (A 64-bit index is known modulo 2^32 only: those stay
//! scalar.) 8-bit integer arithmetic wraps at 2^8 instead, so 8-bit
//! subexpressions stay opaque.
//! Opaque terms are compared exactly (by their serialized IR, so float
//! literals compare by their bits); equal pure expressions over unchanged
//! registers have equal values.
//!
//! Each shared array starts at a 16-byte aligned offset of a block declared
//! `.align 16` (`Emitter::new`); the group checks its array's offset
//! anyway. A slice parameter points at the start of a buffer the runtime
//! allocated (a `DeviceBuffer` is a whole `cuMemAlloc` allocation, aligned to
//! 256 bytes), so element offsets alone decide a global vector's alignment.
//! When any of this cannot be shown, the statements are emitted one by one,
//! exactly as without this pass.

use super::function::{mem_type, Emitter, Operand};
use super::regs::Reg;
use crate::ir::{
    BinaryOp, Expr, ExprKind, Intrinsic, Kernel, LocalId, ParamType, Place, Scalar, Space, Stmt,
};
use crate::Error;

/// The widest vector access, in bytes (`.v4` of 32-bit elements).
const MAX_VECTOR_BYTES: u32 = 16;

/// `sum of coefficient * term + constant`, modulo 2^32.
#[derive(Clone, Debug, PartialEq)]
struct Affine {
    /// Opaque terms as their serialized IR, each once, with a non-zero
    /// coefficient, sorted: equal forms compare equal whatever the order
    /// of the operands.
    terms: Vec<(String, u32)>,
    constant: u32,
}

impl Affine {
    fn constant(constant: u32) -> Affine {
        Affine {
            terms: Vec::new(),
            constant,
        }
    }

    fn term(e: &Expr) -> Affine {
        let key = serde_json::to_string(e).expect("the IR serializes");
        Affine {
            terms: vec![(key, 1)],
            constant: 0,
        }
    }

    /// `self + factor * other`.
    fn plus(mut self, other: Affine, factor: u32) -> Affine {
        for (key, coefficient) in other.terms {
            let scaled = coefficient.wrapping_mul(factor);
            match self.terms.iter_mut().find(|(k, _)| *k == key) {
                Some((_, c)) => *c = c.wrapping_add(scaled),
                None => self.terms.push((key, scaled)),
            }
        }
        self.terms.retain(|(_, c)| *c != 0);
        self.terms.sort();
        self.constant = self
            .constant
            .wrapping_add(other.constant.wrapping_mul(factor));
        self
    }

    fn scaled(self, factor: u32) -> Affine {
        Affine::constant(0).plus(self, factor)
    }

    /// The constant, when there are no terms.
    fn as_constant(&self) -> Option<u32> {
        self.terms.is_empty().then_some(self.constant)
    }

    /// The affine form of an integer expression's value modulo 2^32.
    fn of(e: &Expr) -> Affine {
        // 8-bit values are re-extended after each operation: not modulo 2^32.
        let wide_int = |ty: Scalar| ty.is_int() && ty.size_bytes() >= 4;
        if !wide_int(e.ty) {
            return Affine::term(e);
        }
        match &e.kind {
            // Literals hold their bits extended to 64: the low 32 are the value.
            ExprKind::Literal(_) => match e.as_int() {
                Some(v) => Affine::constant(v as u32),
                None => Affine::term(e),
            },
            ExprKind::Binary(BinaryOp::Add, a, b) => Affine::of(a).plus(Affine::of(b), 1),
            ExprKind::Binary(BinaryOp::Sub, a, b) => Affine::of(a).plus(Affine::of(b), u32::MAX),
            ExprKind::Binary(BinaryOp::Mul, a, b) => {
                let (a, b) = (Affine::of(a), Affine::of(b));
                match (a.as_constant(), b.as_constant()) {
                    (_, Some(factor)) => a.scaled(factor),
                    (Some(factor), _) => b.scaled(factor),
                    _ => Affine::term(e),
                }
            }
            // The emitter masks a literal amount to the bit width; a negative
            // literal is not decomposed (its mask is not `& (bits - 1)`).
            ExprKind::Binary(BinaryOp::Shl, a, b) => match b.as_int() {
                Some(amount) if amount >= 0 => {
                    let amount = amount as u64 & (e.ty.size_bytes() as u64 * 8 - 1);
                    let factor = if amount < 32 { 1u32 << amount } else { 0 };
                    Affine::of(a).scaled(factor)
                }
                _ => Affine::term(e),
            },
            // Between 32- and 64-bit integers: the low 32 bits are kept.
            ExprKind::Cast(a) if wide_int(a.ty) => Affine::of(a),
            _ => Affine::term(e),
        }
    }

    /// The row-major element offset of `indices` into an array of `dims`.
    fn flattened(indices: &[Expr], dims: &[Expr]) -> Option<Affine> {
        let mut offset = Affine::constant(0);
        let mut stride = 1u32;
        for (index, dim) in indices.iter().zip(dims).rev() {
            offset = offset.plus(Affine::of(index), stride);
            stride = stride.wrapping_mul(u32::try_from(dim.as_int()?).ok()?);
        }
        Some(offset)
    }

    fn is_multiple_of(&self, width: u32) -> bool {
        self.constant.is_multiple_of(width)
            && self.terms.iter().all(|(_, c)| c.is_multiple_of(width))
    }
}

/// One statement's move between registers and a memory element.
#[derive(Debug)]
enum Move<'s> {
    /// Memory into this register place.
    Load(Place),
    /// This value (an expression over registers) into memory.
    Store(&'s Expr),
}

/// One statement's part in a group: its move and the memory element.
struct Access<'s> {
    kind: Move<'s>,
    memory: &'s Place,
}

/// A group of statements that one vector access replaces.
#[derive(Debug)]
pub struct MemoryVector<'s> {
    ty: Scalar,
    /// The first element, whose address is the vector's.
    first: &'s Place,
    /// Per element, in statement order.
    moves: Vec<Move<'s>>,
}

impl MemoryVector<'_> {
    /// How many statements the group replaces.
    pub fn len(&self) -> usize {
        self.moves.len()
    }
}

/// A register local or register-array element with literal indices.
fn is_register(kernel: &Kernel, place: &Place) -> bool {
    match place {
        Place::Local { local, indices } => {
            let decl = kernel.local(*local);
            decl.space == Space::Register
                && indices.len() == decl.dims.len()
                && indices.iter().all(|i| i.as_int().is_some())
        }
        Place::Global { .. } => false,
    }
}

/// Where a group's elements live.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Memory {
    /// A shared array.
    Shared(LocalId),
    /// A slice parameter.
    Global(u32),
}

/// The memory of a shared-array element or of a slice element with a
/// 32-bit index (see the module documentation).
fn memory_element(kernel: &Kernel, place: &Place) -> Option<Memory> {
    match place {
        Place::Local { local, indices }
            if kernel.local(*local).space == Space::Shared
                && indices.len() == kernel.local(*local).dims.len() =>
        {
            Some(Memory::Shared(*local))
        }
        Place::Global { param, index } if index.ty.size_bytes() == 4 => {
            Some(Memory::Global(*param))
        }
        _ => None,
    }
}

/// A memory element's offset in elements from the start of its array or
/// slice, and the indices it reads.
fn element_offset<'p>(kernel: &Kernel, place: &'p Place) -> Option<(Affine, Vec<&'p Expr>)> {
    match place {
        Place::Local { local, indices } => Some((
            Affine::flattened(indices, &kernel.local(*local).dims)?,
            indices.iter().collect(),
        )),
        Place::Global { index, .. } => Some((Affine::of(index), vec![index])),
    }
}

/// The statement as a register <-> memory element move, if it is one.
fn access<'s>(kernel: &Kernel, stmt: &'s Stmt) -> Option<Access<'s>> {
    let load = |dest: Place, value: &'s Expr| match &value.kind {
        ExprKind::Load(source)
            if is_register(kernel, &dest) && memory_element(kernel, source).is_some() =>
        {
            Some(Access {
                kind: Move::Load(dest),
                memory: source.as_ref(),
            })
        }
        _ => None,
    };
    match stmt {
        Stmt::Assign { place, value } if memory_element(kernel, place).is_some() => {
            reads_registers_only(kernel, value, &[]).then_some(Access {
                kind: Move::Store(value),
                memory: place,
            })
        }
        Stmt::Assign { place, value } => load(place.clone(), value),
        Stmt::Let {
            local,
            init: Some(init),
        } => load(
            Place::Local {
                local: *local,
                indices: Vec::new(),
            },
            init,
        ),
        _ => None,
    }
}

/// The expression reads registers only, none of `excluded`: no memory, no
/// atomics, no warp shuffles (which other lanes take part in).
fn reads_registers_only(kernel: &Kernel, e: &Expr, excluded: &[LocalId]) -> bool {
    let only = |e: &Expr| reads_registers_only(kernel, e, excluded);
    match &e.kind {
        ExprKind::Literal(_) | ExprKind::Param(_) | ExprKind::Len(_) | ExprKind::Special(_) => true,
        ExprKind::Load(place) => match place.as_ref() {
            Place::Local { local, indices } => {
                kernel.local(*local).space == Space::Register
                    && !excluded.contains(local)
                    && indices.iter().all(only)
            }
            Place::Global { .. } => false,
        },
        ExprKind::Unary(_, a) | ExprKind::Cast(a) => only(a),
        ExprKind::Binary(_, a, b) => only(a) && only(b),
        ExprKind::Select(c, a, b) => only(c) && only(a) && only(b),
        ExprKind::Call(Intrinsic::ShflXor | Intrinsic::ShflDown, _) => false,
        ExprKind::Call(_, args) => args.iter().all(only),
        ExprKind::Const(_) | ExprKind::Atomic { .. } => false,
    }
}

/// The vector access that replaces the first statements of `stmts`, if
/// they form a group (see the module documentation). `shared_offsets` are
/// the arrays' byte offsets in the shared block.
pub fn memory_vector<'s>(
    kernel: &Kernel,
    shared_offsets: &[Option<u32>],
    stmts: &'s [Stmt],
) -> Option<MemoryVector<'s>> {
    let first = access(kernel, stmts.first()?)?;
    let memory = memory_element(kernel, first.memory)?;
    let (ty, start) = match memory {
        Memory::Shared(array) => (kernel.local(array).ty, shared_offsets[array as usize]?),
        Memory::Global(param) => match kernel.params[param as usize].ty {
            // A slice starts at its allocation, aligned past any vector.
            ParamType::Slice { elem, .. } => (elem, MAX_VECTOR_BYTES),
            ParamType::Scalar(_) => return None,
        },
    };
    let size = ty.size_bytes();
    if ![2, 4, 8].contains(&size) {
        return None;
    }
    [4u32, 2].into_iter().find_map(|width| {
        let bytes = width * size;
        if bytes > MAX_VECTOR_BYTES || !start.is_multiple_of(bytes) {
            return None;
        }
        let accesses = stmts
            .get(..width as usize)?
            .iter()
            .map(|s| access(kernel, s))
            .collect::<Option<Vec<_>>>()?;
        let same_kind = |a: &Access| {
            matches!(
                (&a.kind, &first.kind),
                (Move::Load(_), Move::Load(_)) | (Move::Store(_), Move::Store(_))
            )
        };
        if accesses
            .iter()
            .any(|a| !same_kind(a) || memory_element(kernel, a.memory) != Some(memory))
        {
            return None;
        }
        // A load group writes its destination locals: no index may read them.
        let destinations: Vec<LocalId> = accesses
            .iter()
            .filter_map(|a| match &a.kind {
                Move::Load(Place::Local { local, .. }) => Some(*local),
                _ => None,
            })
            .collect();
        let mut offsets = Vec::with_capacity(accesses.len());
        for a in &accesses {
            let register_ty = match &a.kind {
                Move::Load(dest) => kernel.local(local_of(dest)?).ty,
                Move::Store(value) => value.ty,
            };
            if register_ty != ty {
                return None;
            }
            let (offset, indices) = element_offset(kernel, a.memory)?;
            if !indices
                .iter()
                .all(|i| reads_registers_only(kernel, i, &destinations))
            {
                return None;
            }
            offsets.push(offset);
        }
        let base = &offsets[0];
        let consecutive = offsets
            .iter()
            .enumerate()
            .all(|(k, o)| *o == base.clone().plus(Affine::constant(k as u32), 1));
        (consecutive && base.is_multiple_of(width)).then(|| MemoryVector {
            ty,
            first: first.memory,
            moves: accesses.into_iter().map(|a| a.kind).collect(),
        })
    })
}

fn local_of(place: &Place) -> Option<LocalId> {
    match place {
        Place::Local { local, .. } => Some(*local),
        Place::Global { .. } => None,
    }
}

impl Emitter<'_> {
    /// One `ld.<space>.v{n}` or `st.<space>.v{n}` for a group of statements.
    pub fn memory_vector(&mut self, vector: &MemoryVector) -> Result<(), Error> {
        let (ty, n) = (vector.ty, vector.len());
        let t = mem_type(ty);
        if let Move::Load(_) = vector.moves[0] {
            let addr = self.address(vector.first)?;
            let (space, nc) = (addr.space, self.read_only_cache(vector.first));
            let loaded: Vec<Reg> = (0..n).map(|_| self.fresh(ty)).collect();
            self.ins(format!(
                "ld.{space}{nc}.v{n}.{t} {{{}}}, {addr}",
                join(&loaded)
            ));
            for (m, reg) in vector.moves.iter().zip(loaded) {
                if let Move::Load(dest) = m {
                    self.store(dest, Operand::Reg(reg))?;
                }
            }
        } else {
            let mut stored = Vec::with_capacity(n);
            for m in &vector.moves {
                if let Move::Store(value) = m {
                    let value = self.expr(value)?;
                    stored.push(self.in_reg(value, ty));
                }
            }
            let addr = self.address(vector.first)?;
            let space = addr.space;
            self.ins(format!("st.{space}.v{n}.{t} {addr}, {{{}}}", join(&stored)));
        }
        Ok(())
    }
}

fn join(regs: &[Reg]) -> String {
    regs.iter()
        .map(|r| r.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Literal, Local, Param};

    fn u32_lit(v: u32) -> Expr {
        Expr::u32(v)
    }

    fn bin(op: BinaryOp, a: Expr, b: Expr) -> Expr {
        Expr {
            ty: a.ty,
            kind: ExprKind::Binary(op, Box::new(a), Box::new(b)),
        }
    }

    fn cast(e: Expr, ty: Scalar) -> Expr {
        Expr {
            ty,
            kind: ExprKind::Cast(Box::new(e)),
        }
    }

    fn param(id: u32, ty: Scalar) -> Expr {
        Expr {
            ty,
            kind: ExprKind::Param(id),
        }
    }

    fn terms(pairs: &[(&Expr, u32)], constant: u32) -> Affine {
        pairs
            .iter()
            .fold(Affine::constant(constant), |acc, (e, c)| {
                acc.plus(Affine::term(e), *c)
            })
    }

    #[test]
    fn affine_forms_of_integer_arithmetic() {
        let (x, y) = (param(0, Scalar::U32), param(1, Scalar::U32));
        // (x * 4 + 3) - x = 3x + 3
        let e = bin(
            BinaryOp::Sub,
            bin(
                BinaryOp::Add,
                bin(BinaryOp::Mul, x.clone(), u32_lit(4)),
                u32_lit(3),
            ),
            x.clone(),
        );
        assert_eq!(Affine::of(&e), terms(&[(&x, 3)], 3));
        // 2 * (x << 3) + y - y = 16x: cancelled terms disappear
        let e = bin(
            BinaryOp::Sub,
            bin(
                BinaryOp::Add,
                bin(
                    BinaryOp::Mul,
                    u32_lit(2),
                    bin(BinaryOp::Shl, x.clone(), u32_lit(3)),
                ),
                y.clone(),
            ),
            y.clone(),
        );
        assert_eq!(Affine::of(&e), terms(&[(&x, 16)], 0));
        // The order of the operands does not matter.
        let xy = bin(BinaryOp::Add, x.clone(), y.clone());
        let yx = bin(BinaryOp::Add, y.clone(), x.clone());
        assert_eq!(Affine::of(&xy), Affine::of(&yx));
        // x * y is one opaque term
        let product = bin(BinaryOp::Mul, x.clone(), y.clone());
        assert_eq!(Affine::of(&product), terms(&[(&product, 1)], 0));
        // Division is opaque, even by a literal.
        let quotient = bin(BinaryOp::Div, x.clone(), u32_lit(4));
        assert_eq!(Affine::of(&quotient), terms(&[(&quotient, 1)], 0));
    }

    #[test]
    fn affine_forms_wrap_modulo_2_pow_32() {
        let x = param(0, Scalar::U32);
        // x * 2^31 * 2 wraps to 0 in u32, so the form is constant 0.
        let e = bin(
            BinaryOp::Mul,
            bin(BinaryOp::Mul, x.clone(), u32_lit(1 << 31)),
            u32_lit(2),
        );
        assert_eq!(Affine::of(&e), Affine::constant(0));
        // x - 1 is x + 0xffff_ffff.
        let e = bin(BinaryOp::Sub, x.clone(), u32_lit(1));
        assert_eq!(Affine::of(&e), terms(&[(&x, 1)], u32::MAX));
        // A 64-bit index keeps its low 32 bits: (x as u64) << 33 is 0 there,
        // and a cast between 32- and 64-bit integers is transparent.
        let wide = cast(x.clone(), Scalar::U64);
        let shifted = bin(
            BinaryOp::Shl,
            wide.clone(),
            Expr::literal(Scalar::U32, Literal::Int(33)),
        );
        assert_eq!(Affine::of(&shifted), Affine::constant(0));
        let e = cast(
            bin(
                BinaryOp::Add,
                wide,
                Expr::literal(Scalar::U64, Literal::Int(1 << 32 | 5)),
            ),
            Scalar::U32,
        );
        assert_eq!(Affine::of(&e), terms(&[(&x, 1)], 5));
        // The emitter masks a shift amount to the bit width: x << 34 is x << 2.
        let e = bin(BinaryOp::Shl, x.clone(), u32_lit(34));
        assert_eq!(Affine::of(&e), terms(&[(&x, 4)], 0));
    }

    #[test]
    fn affine_forms_keep_what_does_not_wrap_at_2_pow_32_opaque() {
        // u8 arithmetic wraps at 256: (b + 1) is one term.
        let b = param(0, Scalar::U8);
        let sum = bin(
            BinaryOp::Add,
            b.clone(),
            Expr::literal(Scalar::U8, Literal::Int(1)),
        );
        assert_eq!(Affine::of(&sum), terms(&[(&sum, 1)], 0));
        let widened = cast(sum.clone(), Scalar::U32);
        assert_eq!(Affine::of(&widened), terms(&[(&widened, 1)], 0));
        // A negative literal shift amount is not decomposed.
        let x = param(1, Scalar::I32);
        let shifted = bin(
            BinaryOp::Shl,
            x,
            Expr::literal(Scalar::I32, Literal::Int(-1)),
        );
        assert_eq!(Affine::of(&shifted), terms(&[(&shifted, 1)], 0));
        // Float literals compare by their bits: -0.0 and 0.0 are different terms.
        let f = |v: f64| {
            cast(
                bin(
                    BinaryOp::Div,
                    Expr::literal(Scalar::F32, Literal::Float(1.0)),
                    Expr::literal(Scalar::F32, Literal::Float(v)),
                ),
                Scalar::U32,
            )
        };
        assert_ne!(Affine::of(&f(0.0)), Affine::of(&f(-0.0)));
        assert_eq!(Affine::of(&f(0.0)), Affine::of(&f(0.0)));
    }

    #[test]
    fn flattening_is_row_major() {
        let (s, c) = (param(0, Scalar::U32), param(1, Scalar::U32));
        let indices = [
            s.clone(),
            u32_lit(3),
            bin(
                BinaryOp::Add,
                bin(BinaryOp::Mul, c.clone(), u32_lit(4)),
                u32_lit(1),
            ),
        ];
        let dims = [u32_lit(2), u32_lit(8), u32_lit(132)];
        let offset = Affine::flattened(&indices, &dims).unwrap();
        assert_eq!(offset, terms(&[(&s, 1056), (&c, 4)], 3 * 132 + 1));
        assert!(!offset.is_multiple_of(2));
        let aligned = offset.plus(Affine::constant(3), 1);
        assert!(aligned.is_multiple_of(4));
        assert!(!aligned.plus(Affine::term(&s), 1).is_multiple_of(2));
    }

    // Locals of the grouping tests.
    const TILE: LocalId = 0; // shared f32 [4][68]
    const OTHER: LocalId = 1; // shared f32 [4][68]
    const WIDE: LocalId = 2; // shared f64 [64]
    const IDX: LocalId = 3; // shared u32 [64]
    const V: LocalId = 4; // register f32 [4]
    const C: LocalId = 5; // register u32
    const W: LocalId = 6; // register f64 [4]
    const H: LocalId = 7; // register f16 [4]
    const B: LocalId = 8; // register u8 [4]

    // Params of the grouping tests.
    const OUT: u32 = 0; // &mut [f16]
    const WIDE_OUT: u32 = 1; // &mut [f64]
    const BYTES: u32 = 2; // &[u8]
    const N: u32 = 3; // u32

    fn kernel() -> Kernel {
        let local = |name: &str, ty, space, dims: &[u32]| Local {
            name: name.into(),
            ty,
            space,
            dims: dims.iter().map(|d| u32_lit(*d)).collect(),
            mutable: true,
        };
        let param = |name: &str, ty| Param {
            name: name.into(),
            ty,
            tensor_map: None,
        };
        let slice = |elem, mutable| ParamType::Slice { elem, mutable };
        Kernel {
            name: "k".into(),
            const_params: vec![],
            params: vec![
                param("out", slice(Scalar::F16, true)),
                param("wide_out", slice(Scalar::F64, true)),
                param("bytes", slice(Scalar::U8, false)),
                param("n", ParamType::Scalar(Scalar::U32)),
            ],
            locals: vec![
                local("tile", Scalar::F32, Space::Shared, &[4, 68]),
                local("other", Scalar::F32, Space::Shared, &[4, 68]),
                local("wide", Scalar::F64, Space::Shared, &[64]),
                local("idx", Scalar::U32, Space::Shared, &[64]),
                local("v", Scalar::F32, Space::Register, &[4]),
                local("c", Scalar::U32, Space::Register, &[]),
                local("w", Scalar::F64, Space::Register, &[4]),
                local("h", Scalar::F16, Space::Register, &[4]),
                local("b", Scalar::U8, Space::Register, &[4]),
            ],
            block: None,
            cluster: None,
            min_blocks_per_sm: None,
            requires: vec![],
            body: vec![],
        }
    }

    /// Byte offsets as the emitter lays the arrays out.
    const OFFSETS: [Option<u32>; 9] = [
        Some(0),
        Some(1088),
        Some(2176),
        Some(2688),
        None,
        None,
        None,
        None,
        None,
    ];

    fn place(local: LocalId, indices: Vec<Expr>) -> Place {
        Place::Local { local, indices }
    }

    fn load(place: Place, ty: Scalar) -> Expr {
        Expr {
            ty,
            kind: ExprKind::Load(Box::new(place)),
        }
    }

    fn c() -> Expr {
        load(place(C, vec![]), Scalar::U32)
    }

    /// `c * scale + offset`
    fn at(scale: u32, offset: u32) -> Expr {
        bin(
            BinaryOp::Add,
            bin(BinaryOp::Mul, c(), u32_lit(scale)),
            u32_lit(offset),
        )
    }

    /// `v[i] = array[1][index]` (`array` of f32).
    fn read(i: u32, array: LocalId, index: Expr) -> Stmt {
        Stmt::Assign {
            place: place(V, vec![u32_lit(i)]),
            value: load(place(array, vec![u32_lit(1), index]), Scalar::F32),
        }
    }

    /// `tile[1][index] = value`
    fn write(index: Expr, value: Expr) -> Stmt {
        Stmt::Assign {
            place: place(TILE, vec![u32_lit(1), index]),
            value,
        }
    }

    fn v(i: u32) -> Expr {
        load(place(V, vec![u32_lit(i)]), Scalar::F32)
    }

    fn width(stmts: &[Stmt]) -> Option<usize> {
        width_at(&OFFSETS, stmts)
    }

    fn width_at(offsets: &[Option<u32>], stmts: &[Stmt]) -> Option<usize> {
        memory_vector(&kernel(), offsets, stmts).map(|g| g.len())
    }

    #[test]
    fn groups_four_consecutive_aligned_loads() {
        let reads: Vec<Stmt> = (0..4).map(|i| read(i, TILE, at(4, i))).collect();
        assert_eq!(width(&reads), Some(4));
        // Only three left: a pair, then one on its own.
        assert_eq!(width(&reads[1..]), None);
        assert_eq!(width(&reads[2..]), Some(2));
        assert_eq!(width(&reads[3..]), None);
        // `let x = tile[..]` pairs too.
        let lets = [
            Stmt::Let {
                local: C,
                init: Some(load(place(IDX, vec![u32_lit(8)]), Scalar::U32)),
            },
            Stmt::Let {
                local: C,
                init: Some(load(place(IDX, vec![u32_lit(9)]), Scalar::U32)),
            },
        ];
        assert_eq!(width(&lets), Some(2));
    }

    #[test]
    fn alignment_decides_the_width() {
        // c * 4 + 2: a multiple of 2, not of 4.
        let reads: Vec<Stmt> = (0..4).map(|i| read(i, TILE, at(4, 2 + i))).collect();
        assert_eq!(width(&reads), Some(2));
        // c * 2: a multiple of 2 only.
        let reads: Vec<Stmt> = (0..4).map(|i| read(i, TILE, at(2, i))).collect();
        assert_eq!(width(&reads), Some(2));
        // c * 4 + 1: odd.
        let reads: Vec<Stmt> = (0..4).map(|i| read(i, TILE, at(4, 1 + i))).collect();
        assert_eq!(width(&reads), None);
        // c + i: unknown.
        let reads: Vec<Stmt> = (0..4).map(|i| read(i, TILE, at(1, i))).collect();
        assert_eq!(width(&reads), None);
        // An array at an offset that is 8- but not 16-byte aligned: pairs only.
        let mut offsets = OFFSETS;
        offsets[TILE as usize] = Some(8);
        let reads: Vec<Stmt> = (0..4).map(|i| read(i, TILE, at(4, i))).collect();
        assert_eq!(width_at(&offsets, &reads), Some(2));
        // 8-byte elements: at most a pair (16 bytes).
        let wide: Vec<Stmt> = (0..4)
            .map(|i| Stmt::Assign {
                place: place(W, vec![u32_lit(i)]),
                value: load(place(WIDE, vec![at(4, i)]), Scalar::F64),
            })
            .collect();
        assert_eq!(width(&wide), Some(2));
    }

    #[test]
    fn only_adjacent_consecutive_moves_of_one_array_group() {
        // Stride 2.
        let reads: Vec<Stmt> = (0..4).map(|i| read(i, TILE, at(4, 2 * i))).collect();
        assert_eq!(width(&reads), None);
        // Two arrays.
        let reads = [read(0, TILE, at(4, 0)), read(1, OTHER, at(4, 1))];
        assert_eq!(width(&reads), None);
        // A statement in between.
        let reads = [
            read(0, TILE, at(4, 0)),
            Stmt::Barrier,
            read(1, TILE, at(4, 1)),
        ];
        assert_eq!(width(&reads), None);
        // A load next to a store.
        let mixed = [read(0, TILE, at(4, 0)), write(at(4, 1), v(0))];
        assert_eq!(width(&mixed), None);
    }

    #[test]
    fn indices_must_not_see_the_group_change_anything() {
        // c = idx[c * 2]; c2 = idx[c * 2 + 1]: the second index reads the
        // first destination.
        let reads = [
            Stmt::Assign {
                place: place(C, vec![]),
                value: load(place(IDX, vec![at(2, 0)]), Scalar::U32),
            },
            Stmt::Assign {
                place: place(C, vec![]),
                value: load(place(IDX, vec![at(2, 1)]), Scalar::U32),
            },
        ];
        assert_eq!(width(&reads), None);
        // An index that reads shared memory.
        let from_memory = |k: u32| {
            bin(
                BinaryOp::Add,
                load(place(IDX, vec![u32_lit(0)]), Scalar::U32),
                u32_lit(k),
            )
        };
        let reads = [read(0, TILE, from_memory(0)), read(1, TILE, from_memory(1))];
        assert_eq!(width(&reads), None);
    }

    #[test]
    fn groups_stores_of_register_values() {
        let writes: Vec<Stmt> = (0..4).map(|i| write(at(4, i), v(i))).collect();
        assert_eq!(width(&writes), Some(4));
        // Computed values, and one value twice.
        let doubled = |i| {
            bin(
                BinaryOp::Mul,
                v(i),
                Expr::literal(Scalar::F32, Literal::Float(2.0)),
            )
        };
        let writes = [write(at(4, 0), doubled(0)), write(at(4, 1), doubled(0))];
        assert_eq!(width(&writes), Some(2));
        // A value read from shared memory may see an earlier store.
        let writes = [
            write(at(4, 0), v(0)),
            write(
                at(4, 1),
                load(place(TILE, vec![u32_lit(1), at(4, 0)]), Scalar::F32),
            ),
        ];
        assert_eq!(width(&writes), None);
    }

    /// `param[index] = value`
    fn global_write(param: u32, index: Expr, value: Expr) -> Stmt {
        Stmt::Assign {
            place: Place::Global { param, index },
            value,
        }
    }

    fn h(i: u32) -> Expr {
        load(place(H, vec![u32_lit(i)]), Scalar::F16)
    }

    /// `n * 4 * scale + c * 4 + offset`: a row of a matrix `n * 4` wide.
    fn row_at(scale: u32, offset: u32) -> Expr {
        bin(
            BinaryOp::Add,
            bin(BinaryOp::Mul, param(N, Scalar::U32), u32_lit(4 * scale)),
            at(4, offset),
        )
    }

    #[test]
    fn groups_stores_to_a_slice() {
        // Four f16 outputs at a multiple of 4: one 8-byte store.
        let writes: Vec<Stmt> = (0..4)
            .map(|i| global_write(OUT, row_at(3, i), h(i)))
            .collect();
        assert_eq!(width(&writes), Some(4));
        // At 2 modulo 4: two pairs of 4 bytes.
        let writes: Vec<Stmt> = (0..4)
            .map(|i| global_write(OUT, row_at(3, 2 + i), h(i)))
            .collect();
        assert_eq!(width(&writes), Some(2));
        // A row start that is not provably a multiple of 4 (`n` elements wide).
        let unknown_row = |i| bin(BinaryOp::Add, param(N, Scalar::U32), at(4, i));
        let writes: Vec<Stmt> = (0..4)
            .map(|i| global_write(OUT, unknown_row(i), h(i)))
            .collect();
        assert_eq!(width(&writes), None);
        // f64: pairs (16 bytes).
        let writes: Vec<Stmt> = (0..4)
            .map(|i| {
                let w = load(place(W, vec![u32_lit(i)]), Scalar::F64);
                global_write(WIDE_OUT, at(4, i), w)
            })
            .collect();
        assert_eq!(width(&writes), Some(2));
        // Two slices do not group, nor a slice and a shared array.
        let writes = [
            global_write(OUT, at(4, 0), h(0)),
            global_write(
                WIDE_OUT,
                at(4, 1),
                load(place(W, vec![u32_lit(1)]), Scalar::F64),
            ),
        ];
        assert_eq!(width(&writes), None);
        let writes = [write(at(4, 0), v(0)), global_write(OUT, at(4, 1), h(1))];
        assert_eq!(width(&writes), None);
    }

    #[test]
    fn global_groups_need_32_bit_indices_and_wide_elements() {
        // A 64-bit index is known modulo 2^32 only.
        let wide = |i| cast(at(4, i), Scalar::U64);
        let writes: Vec<Stmt> = (0..4).map(|i| global_write(OUT, wide(i), h(i))).collect();
        assert_eq!(width(&writes), None);
        // 8-bit elements stay scalar.
        let read_byte = |i| Stmt::Assign {
            place: place(B, vec![u32_lit(i)]),
            value: load(
                Place::Global {
                    param: BYTES,
                    index: at(4, i),
                },
                Scalar::U8,
            ),
        };
        let reads: Vec<Stmt> = (0..4).map(read_byte).collect();
        assert_eq!(width(&reads), None);
        // The same loads of f16 elements group.
        let reads: Vec<Stmt> = (0..4)
            .map(|i| Stmt::Assign {
                place: place(H, vec![u32_lit(i)]),
                value: load(
                    Place::Global {
                        param: OUT,
                        index: at(4, i),
                    },
                    Scalar::F16,
                ),
            })
            .collect();
        assert_eq!(width(&reads), Some(4));
        // A stored value that reads global memory may see an earlier store.
        let writes = [
            global_write(OUT, at(4, 0), h(0)),
            global_write(
                OUT,
                at(4, 1),
                load(
                    Place::Global {
                        param: OUT,
                        index: at(4, 0),
                    },
                    Scalar::F16,
                ),
            ),
        ];
        assert_eq!(width(&writes), None);
    }
}
