//! The emitter of one module: names, what the body needs (atomic variables,
//! hoisted declarations, helpers, features), the lines of `main`, and the
//! assembly of the module's text.

use std::collections::BTreeSet;
use std::fmt;

use super::helpers::Helper;
use super::names::Names;
use super::support::{storage_type, value_type};
use super::{WgslParam, ENTRY};
use crate::ir::{Block, Expr, ExprKind, Kernel, LocalId, ParamType, Place, Scalar, Space, Stmt};
use crate::Error;

/// The names of `main`'s built-in inputs.
pub struct Builtins {
    pub thread_id: String,
    pub block_id: String,
    pub grid_dim: String,
    pub lane: String,
    /// The `let` of the block's shape, when the body reads `block_dim()`.
    pub block_dim: String,
}

pub struct Emitter<'k> {
    pub kernel: &'k Kernel,
    pub block: [u32; 3],
    params: &'k [WgslParam],
    pub names: Names,
    /// Per parameter: its `Params` field (a scalar's value, a slice's length).
    pub fields: Vec<String>,
    /// Per parameter: the storage buffer of a slice.
    pub buffers: Vec<Option<String>>,
    /// Per local: its WGSL name.
    pub locals: Vec<String>,
    /// Per local: declared more than once in the body (an `#[unroll]`ed
    /// copy), so declared once at the top of `main` and assigned at each `let`.
    pub hoisted: Vec<bool>,
    /// Per parameter / local: updated atomically, so declared atomic.
    pub atomic_params: Vec<bool>,
    pub atomic_locals: Vec<bool>,
    /// Per local: declared in the body (shared arrays become module variables).
    declared: Vec<bool>,
    pub builtins: Builtins,
    pub helpers: BTreeSet<Helper>,
    pub needs_f16: bool,
    pub needs_subgroups: bool,
    pub needs_block_dim: bool,
    lines: Vec<String>,
    depth: usize,
}

/// `array<array<T, inner>, outer>` for dims `[outer, inner]`.
pub fn array_type(elem: &str, dims: &[u32]) -> String {
    dims.iter()
        .rev()
        .fold(elem.to_string(), |t, d| format!("array<{t}, {d}>"))
}

impl<'k> Emitter<'k> {
    pub fn new(
        kernel: &'k Kernel,
        block: [u32; 3],
        params: &'k [WgslParam],
    ) -> Result<Emitter<'k>, Error> {
        let mut names = Names::new(&[ENTRY, "Params", "params"]);
        let mut fields_ns = Names::new(&["_pad"]);
        let mut fields = Vec::new();
        let mut buffers = Vec::new();
        for param in &kernel.params {
            match param.ty {
                ParamType::Scalar(_) => {
                    fields.push(fields_ns.fresh(&param.name));
                    buffers.push(None);
                }
                ParamType::Slice { .. } => {
                    fields.push(fields_ns.fresh(&format!("{}_len", param.name)));
                    buffers.push(Some(names.fresh(&param.name)));
                }
            }
        }
        let mut count = Count {
            declarations: vec![0; kernel.locals.len()],
            atomic_params: vec![false; kernel.params.len()],
            atomic_locals: vec![false; kernel.locals.len()],
        };
        count.block(&kernel.body);
        // Module variables (buffers, shared arrays) first, then `main`'s.
        let mut locals = vec![String::new(); kernel.locals.len()];
        let in_space = |space: Space| {
            (0..kernel.locals.len()).filter(move |&id| kernel.locals[id].space == space)
        };
        for id in in_space(Space::Shared) {
            locals[id] = names.fresh(&kernel.locals[id].name);
        }
        let builtins = Builtins {
            thread_id: names.fresh("local_id"),
            block_id: names.fresh("workgroup_id"),
            grid_dim: names.fresh("num_workgroups"),
            lane: names.fresh("subgroup_lane"),
            block_dim: names.fresh("block_dim"),
        };
        for id in in_space(Space::Register) {
            locals[id] = names.fresh(&kernel.locals[id].name);
        }
        Ok(Emitter {
            kernel,
            block,
            params,
            names,
            fields,
            buffers,
            locals,
            hoisted: count.declarations.iter().map(|&n| n > 1).collect(),
            declared: count.declarations.iter().map(|&n| n > 0).collect(),
            atomic_params: count.atomic_params,
            atomic_locals: count.atomic_locals,
            builtins,
            helpers: BTreeSet::new(),
            needs_f16: false,
            needs_subgroups: false,
            needs_block_dim: false,
            lines: Vec::new(),
            depth: 1,
        })
    }

    /// An error about this kernel on this target.
    pub fn error(&self, message: impl fmt::Display) -> Error {
        Error::new(format!("kernel `{}` (wgsl): {message}", self.kernel.name))
    }

    /// The WGSL type of a value of `ty`.
    pub fn ty(&mut self, ty: Scalar) -> Result<&'static str, Error> {
        self.needs_f16 |= ty == Scalar::F16;
        value_type(ty).ok_or_else(|| self.error(format!("WGSL has no {}", ty.name())))
    }

    /// The dimensions of an array local, evaluated.
    pub fn dims(&self, local: LocalId) -> Result<Vec<u32>, Error> {
        let decl = self.kernel.local(local);
        decl.dims
            .iter()
            .map(|d| {
                d.as_int()
                    .and_then(|v| u32::try_from(v).ok())
                    .ok_or_else(|| {
                        self.error(format!(
                            "the size of `{}` is not constant: specialize the kernel first",
                            decl.name
                        ))
                    })
            })
            .collect()
    }

    /// The WGSL type of a local (a scalar or a nested array).
    pub fn local_type(&mut self, local: LocalId) -> Result<String, Error> {
        let elem = self.ty(self.kernel.local(local).ty)?;
        let elem = if self.atomic_locals[local as usize] {
            format!("atomic<{elem}>")
        } else {
            elem.to_string()
        };
        Ok(array_type(&elem, &self.dims(local)?))
    }

    pub fn line(&mut self, text: impl AsRef<str>) {
        self.lines
            .push(format!("{}{}", "    ".repeat(self.depth), text.as_ref()));
    }

    /// Emits `head {`, the lines `inner` emits one level deeper, and `}`.
    pub fn nested(
        &mut self,
        head: String,
        inner: impl FnOnce(&mut Self) -> Result<(), Error>,
    ) -> Result<(), Error> {
        self.line(format!("{head} {{"));
        self.nested_lines(inner)?;
        self.line("}");
        Ok(())
    }

    /// The lines `inner` emits, one level deeper.
    pub fn nested_lines(
        &mut self,
        inner: impl FnOnce(&mut Self) -> Result<(), Error>,
    ) -> Result<(), Error> {
        self.depth += 1;
        let result = inner(self);
        self.depth -= 1;
        result
    }

    pub fn body(&mut self) -> Result<(), Error> {
        let kernel = self.kernel;
        self.block(&kernel.body)
    }

    /// The whole module: header, `Params`, bindings, workgroup arrays,
    /// helpers and `main`.
    pub fn module_text(&mut self) -> Result<String, Error> {
        let kernel = self.kernel;
        let mut out = Vec::new();
        let mut bindings = Vec::new();
        let mut fields = Vec::new();
        for (index, param) in kernel.params.iter().enumerate() {
            let field = self.fields[index].clone();
            match (param.ty, self.params[index]) {
                (ParamType::Scalar(ty), _) => {
                    let stored = match ty {
                        Scalar::Bool => "u32",
                        Scalar::F16 => "f32",
                        _ => self.ty(ty)?,
                    };
                    fields.push(format!("    {field}: {stored},"));
                }
                (
                    ParamType::Slice { elem, .. },
                    WgslParam::Slice {
                        binding, read_only, ..
                    },
                ) => {
                    fields.push(format!("    {field}: u32,"));
                    self.needs_f16 |= elem == Scalar::F16;
                    let elem_type = storage_type(elem).ok_or_else(|| {
                        self.error(format!("WGSL has no {} buffers", elem.name()))
                    })?;
                    let elem_type = if self.atomic_params[index] {
                        format!("atomic<{elem_type}>")
                    } else {
                        elem_type.to_string()
                    };
                    let access = if read_only { "read" } else { "read_write" };
                    let name = self.buffers[index].as_deref().unwrap_or_default();
                    bindings.push(format!(
                        "@group(0) @binding({binding}) var<storage, {access}> {name}: array<{elem_type}>;"
                    ));
                }
                (ParamType::Slice { .. }, WgslParam::Scalar { .. }) => {
                    return Err(self.error(format!("slice `{}` has no binding", param.name)))
                }
            }
        }
        if fields.is_empty() {
            fields.push("    _pad: u32,".to_string());
        }
        let mut workgroup = Vec::new();
        for id in 0..kernel.locals.len() {
            if kernel.locals[id].space == Space::Shared && self.declared[id] {
                let ty = self.local_type(id as LocalId)?;
                workgroup.push(format!("var<workgroup> {}: {ty};", self.locals[id]));
            }
        }
        let mut hoisted = Vec::new();
        for id in 0..kernel.locals.len() {
            if kernel.locals[id].space == Space::Register && self.hoisted[id] {
                let ty = self.local_type(id as LocalId)?;
                hoisted.push(format!("    var {}: {ty};", self.locals[id]));
            }
        }
        let helpers: Vec<Helper> = self.helpers.iter().cloned().collect();
        let mut helper_texts = Vec::new();
        for helper in helpers {
            helper_texts.push(self.helper_text(&helper)?);
        }

        out.push(format!(
            "// `{}`, generated by warpforge-codegen {}",
            kernel.name,
            env!("CARGO_PKG_VERSION")
        ));
        if self.needs_f16 {
            out.push("enable f16;".into());
        }
        out.push(String::new());
        out.push("struct Params {".into());
        out.extend(fields);
        out.push("}".into());
        out.push(String::new());
        out.push("@group(0) @binding(0) var<uniform> params: Params;".into());
        out.extend(bindings);
        if !workgroup.is_empty() {
            out.push(String::new());
            out.extend(workgroup);
        }
        for text in helper_texts {
            out.push(String::new());
            out.push(text);
        }
        out.push(String::new());
        let [x, y, z] = self.block;
        out.push(format!("@compute @workgroup_size({x}, {y}, {z})"));
        out.push(format!("fn {ENTRY}("));
        let b = &self.builtins;
        out.push(format!(
            "    @builtin(local_invocation_id) {}: vec3<u32>,",
            b.thread_id
        ));
        out.push(format!(
            "    @builtin(workgroup_id) {}: vec3<u32>,",
            b.block_id
        ));
        out.push(format!(
            "    @builtin(num_workgroups) {}: vec3<u32>,",
            b.grid_dim
        ));
        if self.needs_subgroups {
            out.push(format!(
                "    @builtin(subgroup_invocation_id) {}: u32,",
                b.lane
            ));
        }
        out.push(") {".into());
        if self.needs_block_dim {
            // A `let`, not the literals: naga evaluates an expression of
            // constants when it creates the shader and refuses one that
            // divides by zero or overflows (`n / (block_dim().x - 32)` in a
            // block of 32), which Rust and PTX leave to run time.
            out.push(format!(
                "    let {} = vec3<u32>({x}u, {y}u, {z}u);",
                b.block_dim
            ));
        }
        out.extend(hoisted);
        out.append(&mut self.lines);
        out.push("}".into());
        let mut text = out.join("\n");
        text.push('\n');
        Ok(text)
    }
}

/// A pre-pass over the body: how often each local is declared, and which
/// slices and shared arrays are updated atomically.
struct Count {
    declarations: Vec<u32>,
    atomic_params: Vec<bool>,
    atomic_locals: Vec<bool>,
}

impl Count {
    fn block(&mut self, block: &Block) {
        for stmt in block {
            match stmt {
                Stmt::Let { local, init } => {
                    self.declarations[*local as usize] += 1;
                    init.iter().for_each(|e| self.expr(e));
                }
                Stmt::Assign { place, value } => {
                    self.place(place);
                    self.expr(value);
                }
                Stmt::If {
                    cond,
                    then_body,
                    else_body,
                } => {
                    self.expr(cond);
                    self.block(then_body);
                    self.block(else_body);
                }
                Stmt::For {
                    var,
                    start,
                    end,
                    step,
                    body,
                    ..
                } => {
                    self.declarations[*var as usize] += 1;
                    [start, end, step].into_iter().for_each(|e| self.expr(e));
                    self.block(body);
                }
                Stmt::While { cond, body } => {
                    self.expr(cond);
                    self.block(body);
                }
                Stmt::Expr(e) => self.expr(e),
                Stmt::Break | Stmt::Continue | Stmt::Return | Stmt::Barrier => {}
                // Rejected by `valid::targets::check` before anything is counted.
                Stmt::Matrix(_)
                | Stmt::AsyncCopy { .. }
                | Stmt::AsyncCommit
                | Stmt::AsyncWait { .. }
                | Stmt::Mbarrier(_)
                | Stmt::GpuFence
                | Stmt::ProxyFence
                | Stmt::ClusterBarrier
                | Stmt::Warpgroup(_)
                | Stmt::Tma(_)
                | Stmt::SetMaxRegisters { .. } => {}
            }
        }
    }

    fn place(&mut self, place: &Place) {
        match place {
            Place::Local { indices, .. } => indices.iter().for_each(|e| self.expr(e)),
            Place::Global { index, .. } => self.expr(index),
        }
    }

    fn expr(&mut self, e: &Expr) {
        match &e.kind {
            ExprKind::Load(place) => self.place(place),
            ExprKind::Unary(_, a) | ExprKind::Cast(a) => self.expr(a),
            ExprKind::Binary(_, a, b) => {
                self.expr(a);
                self.expr(b);
            }
            ExprKind::Select(c, a, b) => [c, a, b].into_iter().for_each(|e| self.expr(e)),
            ExprKind::Call(_, args) => args.iter().for_each(|a| self.expr(a)),
            ExprKind::Atomic {
                place,
                value,
                compare,
                ..
            } => {
                match place.as_ref() {
                    Place::Local { local, .. } => self.atomic_locals[*local as usize] = true,
                    Place::Global { param, .. } => self.atomic_params[*param as usize] = true,
                }
                self.place(place);
                self.expr(value);
                compare.iter().for_each(|c| self.expr(c));
            }
            ExprKind::Literal(_)
            | ExprKind::Param(_)
            | ExprKind::Const(_)
            | ExprKind::Len(_)
            | ExprKind::Special(_) => {}
        }
    }
}
