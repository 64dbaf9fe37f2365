//! Register staging: the sm_70 form of `cp_async`, which has no `cp.async`.
//!
//! A copy loads its bytes into fresh registers where it is issued (one
//! vector load; bytes past `src_bytes` are cleared in the registers, and an
//! empty copy loads nothing) and stores them to shared memory later. A
//! pipelined kernel issues the copies of a later tile before the math on the
//! current one, so the loads are in flight during the math, as `cp.async`
//! would be.
//!
//! Where the store goes. A `cp.async` may land at any time between its issue
//! and the `cp.async.wait_group` that covers it, and a correct kernel neither
//! reads nor writes the destination in between, so a store anywhere in that
//! window gives the same results. A copy is stored at the first of:
//! - the next `cp_async_wait`, whatever its count (every pending copy: a
//!   simpler rule than keeping the `N` youngest groups, and still inside the
//!   window);
//! - the end of the iteration of the innermost loop that issued it: the end
//!   of the body, a `continue` or a `break`. No copy is thus pending when its
//!   own statement runs again, so its registers are never overwritten before
//!   their store; and in the usual pipeline (wait, barrier, copies of tile
//!   `t + S - 1`, math on tile `t`) the loads come before the math and the
//!   stores after it.
//!
//! A copy still pending at a `return` or at the end of the kernel is never
//! stored: no wait covers it, so no thread may read its destination.
//!
//! A copy that may or may not be pending where it is stored (it sat in an
//! `if`, or it precedes a loop that stores it) gets a flag: a predicate,
//! false at entry, that the copy sets and every store of it clears. Its
//! stores where it may be pending are predicated on the flag. Sites and
//! flags are planned over the whole kernel before emission ([`StagingPlan`]).

use std::collections::{BTreeMap, HashMap};

use super::function::{Emitter, Operand};
use super::memory::Address;
use super::regs::Reg;
use super::warp::brace;
use crate::ir::{Expr, Kernel, Place, Scalar, Stmt};
use crate::Error;

/// A statement's identity during one emission: its address in the kernel,
/// which the emitter borrows unchanged. Used for look-ups only, never
/// iterated, so the output does not depend on addresses.
type Site = *const Stmt;

/// One store of a staged copy at a site.
#[derive(Clone, Copy, Debug, PartialEq)]
struct StagedStore {
    /// The copy's number: copies are numbered in the order of the text.
    copy: usize,
    /// Whether the copy may not be pending here: the store is predicated on its flag.
    predicated: bool,
}

/// Where each copy of a kernel is stored, decided before emission.
#[derive(Default)]
pub struct StagingPlan {
    copies: HashMap<Site, usize>,
    /// Per copy: whether it has a flag (some store of it is predicated).
    flagged: Vec<bool>,
    /// The stores at each site that has some: a `cp_async_wait`, a `break`
    /// or `continue`, or a loop (the end of its body), in copy order.
    stores: HashMap<Site, Vec<StagedStore>>,
}

/// The copies that may be pending at a point, each with whether it surely is.
type Pending = BTreeMap<usize, bool>;

impl StagingPlan {
    pub fn of(kernel: &Kernel) -> StagingPlan {
        let mut planner = Planner {
            plan: StagingPlan::default(),
            loop_starts: Vec::new(),
        };
        planner.block(&kernel.body, &mut Pending::new());
        planner.plan
    }
}

struct Planner {
    plan: StagingPlan,
    /// Per enclosing loop, innermost last: the number of its first copy.
    /// Copies numbered from it on are the loop's own: numbers follow the
    /// text, and a copy pending in a loop but issued outside it comes before.
    loop_starts: Vec<usize>,
}

impl Planner {
    /// Plans a block; returns whether it never ends normally (it leaves by
    /// `break`, `continue` or `return` on every path).
    fn block(&mut self, block: &[Stmt], pending: &mut Pending) -> bool {
        let mut diverges = false;
        for stmt in block {
            diverges |= self.stmt(stmt, pending);
        }
        diverges
    }

    /// Plans a statement; returns whether it never ends normally.
    fn stmt(&mut self, stmt: &Stmt, pending: &mut Pending) -> bool {
        match stmt {
            Stmt::AsyncCopy { .. } => {
                let copy = self.plan.flagged.len();
                self.plan.flagged.push(false);
                self.plan.copies.insert(stmt, copy);
                pending.insert(copy, true);
            }
            Stmt::AsyncWait { .. } => self.store(stmt, pending, 0),
            Stmt::Break | Stmt::Continue => {
                if let Some(&first) = self.loop_starts.last() {
                    self.store(stmt, pending, first);
                }
                return true;
            }
            Stmt::Return => return true,
            Stmt::If {
                then_body,
                else_body,
                ..
            } => {
                let mut then_pending = pending.clone();
                let then_diverges = self.block(then_body, &mut then_pending);
                let else_diverges = self.block(else_body, pending);
                // A branch that never ends normally adds nothing after the `if`.
                match (then_diverges, else_diverges) {
                    (true, true) => return true,
                    (true, false) => {}
                    (false, true) => *pending = then_pending,
                    (false, false) => *pending = merge(then_pending, std::mem::take(pending)),
                }
            }
            Stmt::For { body, .. } | Stmt::While { body, .. } => {
                // Copies pending before the loop stay pending through it, unless
                // a wait in it stores them: then they are pending at the head on
                // the first iteration only.
                if has_wait(body) {
                    for sure in pending.values_mut() {
                        *sure = false;
                    }
                }
                let head = pending.clone();
                let first = self.plan.flagged.len();
                self.loop_starts.push(first);
                self.block(body, pending);
                self.loop_starts.pop();
                self.store(stmt, pending, first);
                // The loop is left from its head (after the end-of-body stores)
                // or from a `break` (after its stores): what is pending then is
                // what was pending at the head.
                *pending = head;
            }
            _ => {}
        }
        false
    }

    /// Stores, at `site`, every pending copy numbered `first` or later.
    fn store(&mut self, site: &Stmt, pending: &mut Pending, first: usize) {
        let stores: Vec<StagedStore> = pending
            .split_off(&first)
            .into_iter()
            .map(|(copy, sure)| StagedStore {
                copy,
                predicated: !sure,
            })
            .collect();
        for store in &stores {
            self.plan.flagged[store.copy] |= store.predicated;
        }
        if !stores.is_empty() {
            self.plan.stores.insert(site, stores);
        }
    }
}

/// What is pending after one of two paths: sure only if sure on both.
fn merge(mut a: Pending, b: Pending) -> Pending {
    for (copy, sure) in a.iter_mut() {
        *sure &= b.get(copy) == Some(&true);
    }
    for copy in b.into_keys() {
        a.entry(copy).or_insert(false);
    }
    a
}

/// Whether a block holds a `cp_async_wait`, at any depth.
fn has_wait(block: &[Stmt]) -> bool {
    block.iter().any(|stmt| match stmt {
        Stmt::AsyncWait { .. } => true,
        Stmt::If {
            then_body,
            else_body,
            ..
        } => has_wait(then_body) || has_wait(else_body),
        Stmt::For { body, .. } | Stmt::While { body, .. } => has_wait(body),
        _ => false,
    })
}

/// The state of staging during one emission.
pub struct Staging {
    plan: StagingPlan,
    /// Per copy: its flag, allocated by the prologue.
    flags: Vec<Option<Reg>>,
    /// Per copy: its registers and destination, from its (last emitted) load.
    loaded: Vec<Option<StagedCopy>>,
}

impl Staging {
    pub fn new(kernel: &Kernel) -> Staging {
        let plan = StagingPlan::of(kernel);
        let copies = plan.flagged.len();
        Staging {
            plan,
            flags: vec![None; copies],
            loaded: (0..copies).map(|_| None).collect(),
        }
    }
}

/// A copy's loaded words and where they go.
struct StagedCopy {
    words: Vec<Reg>,
    dst: Address,
}

/// The type suffix and operand of a move of 32-bit words: `b32 %r1` or
/// `v4.b32 {%r1, %r2, %r3, %r4}`.
fn words_operand(words: &[Reg]) -> (String, String) {
    match words {
        [word] => ("b32".to_string(), word.to_string()),
        _ => (format!("v{}.b32", words.len()), brace(words)),
    }
}

impl Emitter<'_> {
    /// The flags of the staged copies that have one, false at entry.
    pub fn staging_flags(&mut self) {
        let Some(staging) = &self.staging else {
            return;
        };
        let flagged = staging.plan.flagged.clone();
        let mut flags = Vec::with_capacity(flagged.len());
        for has_flag in flagged {
            flags.push(has_flag.then(|| {
                let flag = self.fresh(Scalar::Bool);
                self.mov(flag, &Operand::Imm("0".into()));
                flag
            }));
        }
        if let Some(staging) = &mut self.staging {
            staging.flags = flags;
        }
    }

    /// The load half of a staged copy: `bytes` bytes from `src` into fresh
    /// words, cleared past `src_bytes`; the store comes at a later site.
    pub fn stage_copy(
        &mut self,
        site: &Stmt,
        dst: &Place,
        src: &Place,
        bytes: u32,
        src_bytes: &Expr,
    ) -> Result<(), Error> {
        let Some(&copy) = self
            .staging
            .as_ref()
            .and_then(|s| s.plan.copies.get(&(site as Site)))
        else {
            return Err(self.error("a copy to stage is missing from the staging plan"));
        };
        let nc = self.read_only_cache(src);
        let dst = self.address(dst)?;
        let src = self.address(src)?;
        let words: Vec<Reg> = (0..bytes / 4).map(|_| self.fresh(Scalar::U32)).collect();
        let (vector, operand) = words_operand(&words);
        if src_bytes.as_int() == Some(bytes as i64) {
            self.ins(format!("ld.global{nc}.{vector} {operand}, {src}"));
        } else {
            let n = self.expr(src_bytes)?;
            let n = self.in_reg(n, Scalar::U32);
            // An empty copy reads nothing (its source need not be valid); its
            // words keep stale bits, which the masks below clear.
            let any = self.fresh(Scalar::Bool);
            self.ins(format!("setp.ne.u32 {any}, {n}, 0"));
            self.ins(format!("@{any} ld.global{nc}.{vector} {operand}, {src}"));
            // Word `w` keeps its low `8 n - 32 w` bits, clamped to 0..=32:
            // `bfe` with a length of 32 or more keeps the whole word.
            let bits = self.fresh(Scalar::U32);
            self.ins(format!("shl.b32 {bits}, {n}, 3"));
            for (w, word) in words.iter().enumerate() {
                let keep = if w == 0 {
                    bits
                } else {
                    let keep = self.fresh(Scalar::U32);
                    self.ins(format!("max.u32 {keep}, {bits}, {}", 32 * w));
                    self.ins(format!("sub.u32 {keep}, {keep}, {}", 32 * w));
                    keep
                };
                self.ins(format!("bfe.u32 {word}, {word}, 0, {keep}"));
            }
        }
        let staging = self.staging.as_mut().expect("checked above");
        let flag = staging.flags[copy];
        staging.loaded[copy] = Some(StagedCopy { words, dst });
        if let Some(flag) = flag {
            self.mov(flag, &Operand::Imm("1".into()));
        }
        Ok(())
    }

    /// The stores of the staged copies planned at `site` (nothing when the
    /// target has `cp.async` or the site stores nothing).
    pub fn store_staged(&mut self, site: &Stmt) -> Result<(), Error> {
        let Some(stores) = self
            .staging
            .as_ref()
            .and_then(|s| s.plan.stores.get(&(site as Site)))
            .cloned()
        else {
            return Ok(());
        };
        for store in stores {
            let staging = self.staging.as_ref().expect("stores come from the plan");
            let flag = staging.flags[store.copy];
            let Some(loaded) = &staging.loaded[store.copy] else {
                return Err(self.error("a staged copy is stored before its load"));
            };
            let (vector, operand) = words_operand(&loaded.words);
            let guard = match flag {
                Some(flag) if store.predicated => format!("@{flag} "),
                _ => String::new(),
            };
            let text = format!(
                "{guard}st.{}.{vector} {}, {operand}",
                loaded.dst.space, loaded.dst
            );
            self.ins(text);
            if let Some(flag) = flag {
                self.mov(flag, &Operand::Imm("0".into()));
            }
        }
        Ok(())
    }
}
