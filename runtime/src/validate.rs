//! Launch checks that need no GPU: which target runs on a device, and whether
//! a call (const values, arguments, `requires`, grid, block, shared memory)
//! is valid. The runtime runs them before any driver call of a launch.

use warpforge_codegen::eval::{self, HostValue};
use warpforge_codegen::ir::{
    Block, Expr, ExprKind, Kernel, Literal, Param, ParamType, Place, Requirement, Scalar,
};
use warpforge_codegen::specialize::specialize;
use warpforge_codegen::{Arch, KernelDef};

use crate::buffer::{ArgInfo, Grid};
use crate::device::{DeviceBackend, DeviceInfo};
use crate::tensor_map::{plan_maps, TensorMapPlan};
use crate::Error;

/// What the compiled variant fixes about its launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VariantFacts {
    /// The block shape the kernel declares, evaluated for this variant.
    pub block: Option<[u32; 3]>,
    /// The cluster shape the kernel declares (`cluster(..)`), evaluated for
    /// this variant: a launch's grid is a whole number of clusters.
    pub cluster: Option<[u32; 3]>,
    /// Dynamic shared memory per block, in bytes.
    pub shared_bytes: u32,
}

/// The dimensions a checked launch uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchDims {
    /// Blocks per grid, x y z.
    pub blocks: [u32; 3],
    /// Threads per block, x y z: the grid's, or the kernel's declared block.
    pub threads: [u32; 3],
    /// Dynamic shared memory per block, in bytes.
    pub shared_bytes: u32,
}

/// The arch to load: the highest PTX target of `def` that the device runs
/// (`sm_90a` above `sm_90`, on compute capability 9.0 only).
pub fn select_arch(def: &KernelDef, device: &DeviceInfo) -> Result<Arch, Error> {
    let best = def
        .targets
        .iter()
        .filter_map(|target| target.arch())
        .filter(|&arch| device.supports(arch))
        .max();
    best.ok_or_else(|| {
        let built: Vec<&str> = def.targets.iter().map(|t| t.name()).collect();
        let built = if built.is_empty() { "no target".to_string() } else { built.join(", ") };
        let specific = def
            .targets
            .iter()
            .filter_map(|target| target.arch())
            .find(|arch| arch.is_arch_specific());
        let specific = match specific {
            Some(arch) => format!(
                " ({} runs only on compute capability {}.{})",
                arch.name(),
                arch.compute_capability().0,
                arch.compute_capability().1
            ),
            None => String::new(),
        };
        invalid(
            &def.ir.name,
            format!(
                "it is built for {built}, and none runs on {} (compute capability {}.{}, {}){specific}: add an \
                 arch at or below {} to the kernel's `arch(..)`, or run on a newer GPU",
                device.name,
                device.compute_capability.0,
                device.compute_capability.1,
                device.sm_name(),
                device.sm_name()
            ),
        )
    })
}

/// Every check of one launch; on success, the dimensions to launch with.
/// `consts` are in `def.ir.const_params` order, `args` in `def.ir.params` order.
pub fn validate_launch(
    def: &KernelDef,
    consts: &[i64],
    facts: &VariantFacts,
    grid: &Grid,
    args: &[ArgInfo],
    device: &DeviceInfo,
) -> Result<LaunchDims, Error> {
    check_consts(def, consts)?;
    let (dims, _) = checks_as_written(def, consts).validate_launch(facts, grid, args, device)?;
    Ok(dims)
}

/// Whether the variant `consts` of `def` can take a call with these
/// arguments: the const values, the argument types, every `requires`
/// clause and the tensor maps. The part of [`validate_launch`] that needs neither the compiled
/// variant nor a device; the tuner and the dispatcher use it to rule out
/// variants that cannot take a problem (alignment, divisibility).
pub fn check_call(def: &KernelDef, consts: &[i64], args: &[ArgInfo]) -> Result<(), Error> {
    check_consts(def, consts)?;
    checks_as_written(def, consts).check_call(args)
}

/// The checks of one variant's calls, with what depends only on the kernel
/// and its const values done once: [`check_consts`], and the `requires(..)`
/// clauses and tensor maps specialized for the values as the variant's code
/// is (const parameters substituted, constants folded), less the clauses
/// that then hold for every call. The runtime makes one when it compiles a
/// variant, so that each launch evaluates only what its arguments decide;
/// [`validate_launch`] and [`check_call`], which run once per call, take
/// the kernel's clauses as written instead. Its methods take the `def` it
/// was made from, whose names and source text their messages quote.
#[derive(Debug)]
pub struct VariantChecks {
    consts: Vec<i64>,
    /// The clauses a call can fail: the index into `def.ir.requires`, and
    /// the condition to evaluate.
    requirements: Vec<(usize, Expr)>,
    /// The `#[tensor_map(..)]` slice parameters, with their index into `def.ir.params`.
    tensor_maps: Vec<(usize, Param)>,
}

impl VariantChecks {
    /// Checks the const values ([`check_consts`]) and specializes the rest.
    pub fn new(def: &KernelDef, consts: &[i64]) -> Result<VariantChecks, Error> {
        check_consts(def, consts)?;
        // The parameters and clauses alone: the body is the code generator's.
        let declared = Kernel {
            name: def.ir.name.clone(),
            const_params: def.ir.const_params.clone(),
            params: def.ir.params.clone(),
            locals: Vec::new(),
            block: None,
            cluster: None,
            min_blocks_per_sm: None,
            requires: def.ir.requires.clone(),
            body: Block::new(),
        };
        // A fold that fails (an overflow among constants) also fails the
        // variant's compilation; unspecialized, a launch that reaches it
        // reports it as the clause's or tensor map's evaluation error.
        let specialized = specialize(&declared, consts).unwrap_or(declared);
        let requirements = specialized
            .requires
            .into_iter()
            .enumerate()
            .filter(|(_, r)| !matches!(r.cond.kind, ExprKind::Literal(Literal::Bool(true))))
            .map(|(index, r)| (index, r.cond))
            .collect();
        let tensor_maps = specialized
            .params
            .into_iter()
            .enumerate()
            .filter(|(_, p)| p.tensor_map.is_some())
            .collect();
        Ok(VariantChecks {
            consts: consts.to_vec(),
            requirements,
            tensor_maps,
        })
    }

    /// [`validate_launch`] of this variant: on success, the dimensions to
    /// launch with and the tensor maps to encode.
    pub fn validate_launch(
        &self,
        def: &KernelDef,
        facts: &VariantFacts,
        grid: &Grid,
        args: &[ArgInfo],
        device: &DeviceInfo,
    ) -> Result<(LaunchDims, Vec<TensorMapPlan>), Error> {
        self.of(def).validate_launch(facts, grid, args, device)
    }

    /// [`check_call`] of this variant.
    pub fn check_call(&self, def: &KernelDef, args: &[ArgInfo]) -> Result<(), Error> {
        self.of(def).check_call(args)
    }

    fn of<'a>(
        &'a self,
        def: &'a KernelDef,
    ) -> CallChecks<
        'a,
        impl Iterator<Item = (&'a Requirement, &'a Expr)>,
        impl Iterator<Item = (usize, &'a Param)>,
    > {
        CallChecks {
            def,
            consts: &self.consts,
            requirements: self
                .requirements
                .iter()
                .map(|(index, cond)| (&def.ir.requires[*index], cond)),
            tensor_maps: self
                .tensor_maps
                .iter()
                .map(|(index, param)| (*index, param)),
        }
    }
}

/// The checks of one call after its const values, over the `requires(..)`
/// clauses and tensor maps of either the kernel as written or a variant
/// ([`VariantChecks`]).
struct CallChecks<'a, R, M> {
    def: &'a KernelDef,
    consts: &'a [i64],
    /// Each clause to check: as written (which messages quote), and the
    /// condition to evaluate.
    requirements: R,
    /// The `#[tensor_map(..)]` slice parameters, with their index into `def.ir.params`.
    tensor_maps: M,
}

/// The checks of a call of the variant `consts` over the kernel's clauses
/// and tensor maps as written.
fn checks_as_written<'a>(
    def: &'a KernelDef,
    consts: &'a [i64],
) -> CallChecks<
    'a,
    impl Iterator<Item = (&'a Requirement, &'a Expr)>,
    impl Iterator<Item = (usize, &'a Param)>,
> {
    CallChecks {
        def,
        consts,
        requirements: def.ir.requires.iter().map(|r| (r, &r.cond)),
        tensor_maps: def.ir.params.iter().enumerate(),
    }
}

impl<'a, R, M> CallChecks<'a, R, M>
where
    R: Iterator<Item = (&'a Requirement, &'a Expr)>,
    M: Iterator<Item = (usize, &'a Param)>,
{
    fn validate_launch(
        self,
        facts: &VariantFacts,
        grid: &Grid,
        args: &[ArgInfo],
        device: &DeviceInfo,
    ) -> Result<(LaunchDims, Vec<TensorMapPlan>), Error> {
        let (def, consts) = (self.def, self.consts);
        check_args(def, consts, args)?;
        check_binding_limits(def, consts, args, device)?;
        let host_values: Vec<HostValue> = args.iter().map(ArgInfo::host_value).collect();
        check_requirements(def, consts, self.requirements, &host_values)?;
        let maps = plan_maps(def, consts, self.tensor_maps, &host_values)?;
        let dims = launch_dims(def, consts, facts, grid, device)?;
        Ok((dims, maps))
    }

    fn check_call(self, args: &[ArgInfo]) -> Result<(), Error> {
        let (def, consts) = (self.def, self.consts);
        check_args(def, consts, args)?;
        let host_values: Vec<HostValue> = args.iter().map(ArgInfo::host_value).collect();
        check_requirements(def, consts, self.requirements, &host_values)?;
        plan_maps(def, consts, self.tensor_maps, &host_values).map(drop)
    }
}

/// The number of const values and that each fits its parameter's type. The
/// tune lists are only the search space: any value of the type is allowed.
pub(crate) fn check_consts(def: &KernelDef, consts: &[i64]) -> Result<(), Error> {
    let params = &def.ir.const_params;
    if consts.len() != params.len() {
        let names: Vec<String> = params
            .iter()
            .map(|p| format!("{}: {}", p.name, p.ty.name()))
            .collect();
        return Err(invalid(
            &def.ir.name,
            format!(
                "it takes {} const parameter(s) [{}], got {} value(s) {consts:?}: pass one value per \
                 const parameter, in declaration order",
                params.len(),
                names.join(", "),
                consts.len()
            ),
        ));
    }
    for (param, &value) in params.iter().zip(consts) {
        if !fits(param.ty, value) {
            return Err(invalid(
                &def.variant_name(consts),
                format!(
                    "const parameter {} is a {}, and {value} is out of its range: pass a value of that type",
                    param.name,
                    param.ty.name()
                ),
            ));
        }
    }
    Ok(())
}

/// Whether an integer value (bits as `ir::Literal` holds them) is a value of `ty`.
fn fits(ty: Scalar, value: i64) -> bool {
    match ty {
        Scalar::Bool => value == 0 || value == 1,
        Scalar::I8 => i8::try_from(value).is_ok(),
        Scalar::U8 => u8::try_from(value).is_ok(),
        Scalar::I32 => i32::try_from(value).is_ok(),
        Scalar::U32 => u32::try_from(value).is_ok(),
        // Every i64 is the bits of some i64 or u64; floats are never const params.
        Scalar::I64
        | Scalar::U64
        | Scalar::F16
        | Scalar::Bf16
        | Scalar::F32
        | Scalar::F64
        | Scalar::E4m3
        | Scalar::E5m2 => true,
    }
}

fn check_args(def: &KernelDef, consts: &[i64], args: &[ArgInfo]) -> Result<(), Error> {
    // Named only in a refusal: the name costs more to format than the checks.
    let kernel = || def.variant_name(consts);
    let params = &def.ir.params;
    if args.len() != params.len() {
        let signature: Vec<String> = params
            .iter()
            .map(|p| format!("{}: {}", p.name, param_type_name(p.ty)))
            .collect();
        return Err(invalid(
            &kernel(),
            format!(
                "it takes {} argument(s) ({}), got {}",
                params.len(),
                signature.join(", "),
                args.len()
            ),
        ));
    }
    for (index, (param, arg)) in params.iter().zip(args).enumerate() {
        let wrong = |what: String| {
            invalid(
                &kernel(),
                format!(
                    "argument {index} `{}` is {}, {what}",
                    param.name,
                    param_type_name(param.ty)
                ),
            )
        };
        match (param.ty, *arg) {
            (ParamType::Scalar(want), ArgInfo::Scalar { ty, .. }) if want != ty => {
                return Err(wrong(format!(
                    "got {}: convert it with `as {}`",
                    ty.name(),
                    want.name()
                )));
            }
            (ParamType::Scalar(want), ArgInfo::Buffer { .. }) => {
                return Err(wrong(format!(
                    "got a buffer {}: pass a {} value with KernelArg::scalar",
                    arg.describe(),
                    want.name()
                )));
            }
            (ParamType::Slice { .. }, ArgInfo::Scalar { ty, .. }) => {
                return Err(wrong(format!(
                    "got a {} scalar: pass a DeviceBuffer",
                    ty.name()
                )));
            }
            (ParamType::Slice { elem: want, .. }, ArgInfo::Buffer { elem, .. }) if want != elem => {
                return Err(wrong(format!(
                    "got a buffer of {}: pass a DeviceBuffer<{}>",
                    elem.name(),
                    want.name()
                )));
            }
            (ParamType::Slice { mutable: true, .. }, ArgInfo::Buffer { mutable: false, .. }) => {
                return Err(wrong(
                    "got a shared borrow: the kernel writes it, so pass it with KernelArg::buffer_mut(&mut buffer)"
                        .into(),
                ));
            }
            (ParamType::Slice { .. }, ArgInfo::Buffer { len, .. }) if len > u64::from(u32::MAX) => {
                return Err(wrong(format!(
                    "got a buffer of {len} elements: kernels index slices with u32, so a slice holds at \
                     most {} elements; split the data into smaller buffers",
                    u32::MAX
                )));
            }
            _ => {}
        }
    }
    Ok(())
}

/// wgpu binds each slice as a storage buffer: their number and sizes are
/// limited per adapter. CUDA passes pointers and has no such limits.
fn check_binding_limits(
    def: &KernelDef,
    consts: &[i64],
    args: &[ArgInfo],
    device: &DeviceInfo,
) -> Result<(), Error> {
    let DeviceBackend::Wgpu(wgpu) = &device.backend else {
        return Ok(());
    };
    // Named only in a refusal: the name costs more to format than the checks.
    let kernel = || def.variant_name(consts);
    let slices = def
        .ir
        .params
        .iter()
        .filter(|p| matches!(p.ty, ParamType::Slice { .. }))
        .count();
    if slices > wgpu.max_storage_buffers_per_shader_stage as usize {
        return Err(invalid(
            &kernel(),
            format!(
                "it takes {slices} slices, and {} binds at most {} storage buffers per kernel: run \
                 it on CUDA or on an adapter with a higher limit",
                device.name, wgpu.max_storage_buffers_per_shader_stage
            ),
        ));
    }
    for (index, (param, arg)) in def.ir.params.iter().zip(args).enumerate() {
        if let ArgInfo::Buffer { elem, len, .. } = *arg {
            let bytes = len.saturating_mul(elem.size_bytes() as u64);
            if bytes > wgpu.max_storage_buffer_binding_size {
                return Err(invalid(
                    &kernel(),
                    format!(
                        "argument {index} `{}` is a buffer of {bytes} bytes, and {} binds at most \
                         {} bytes per storage buffer: split the data into smaller launches",
                        param.name, device.name, wgpu.max_storage_buffer_binding_size
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// A parameter's type as a kernel's signature spells it (`u32`, `&[f32]`,
/// `&mut [f32]`): in messages, and in the dtypes of a tuned launch's key.
pub(crate) fn param_type_name(ty: ParamType) -> String {
    match ty {
        ParamType::Scalar(s) => s.name().to_string(),
        ParamType::Slice {
            elem,
            mutable: false,
        } => format!("&[{}]", elem.name()),
        ParamType::Slice {
            elem,
            mutable: true,
        } => format!("&mut [{}]", elem.name()),
    }
}

/// Evaluates each clause of `requirements` (as written, and the condition
/// to evaluate) on the call's `host_values`.
fn check_requirements<'r>(
    def: &KernelDef,
    consts: &[i64],
    requirements: impl Iterator<Item = (&'r Requirement, &'r Expr)>,
    host_values: &[HostValue],
) -> Result<(), Error> {
    for (requirement, cond) in requirements {
        // Messages quote the clause as written, with the values it reads.
        let failed = |why: &str, advice: &str| {
            invalid(
                &def.variant_name(consts),
                format!(
                    "requirement `{}` {why}{}: {advice}",
                    requirement.text,
                    values_of(def, consts, host_values, &requirement.cond)
                ),
            )
        };
        match eval::eval(cond, consts, host_values) {
            Ok(Literal::Bool(true)) => {}
            Ok(Literal::Bool(false)) => {
                return Err(failed(
                    "does not hold",
                    "change the arguments so that it does",
                ));
            }
            Ok(other) => {
                return Err(failed(
                    &format!("is not a bool expression (it evaluated to {other:?})"),
                    "this is a bug in the kernel's IR; report the kernel",
                ));
            }
            Err(e) => {
                return Err(failed(
                    &format!("could not be checked ({e})"),
                    "change the arguments so that it can",
                ));
            }
        }
    }
    Ok(())
}

/// ` (with x.len() = 10, n = 12, BM = 64)`: the values a condition reads, in
/// order of first use.
fn values_of(def: &KernelDef, consts: &[i64], host_values: &[HostValue], cond: &Expr) -> String {
    let mut reads = Vec::new();
    collect_reads(cond, &mut reads);
    let shown: Vec<String> = reads
        .into_iter()
        .filter_map(|read| match read {
            Read::Param(id) => {
                let param = def.ir.params.get(id as usize)?;
                Some(match (param.ty, host_values.get(id as usize)?) {
                    (_, HostValue::Slice { len }) => format!("{}.len() = {len}", param.name),
                    (ty, HostValue::Scalar(lit)) => {
                        format!("{} = {}", param.name, show_literal(ty_of(ty), *lit))
                    }
                })
            }
            Read::Const(id) => {
                let param = def.ir.const_params.get(id as usize)?;
                let value = consts.get(id as usize)?;
                Some(format!(
                    "{} = {}",
                    param.name,
                    show_literal(param.ty, Literal::Int(*value))
                ))
            }
        })
        .collect();
    if shown.is_empty() {
        String::new()
    } else {
        format!(" (with {})", shown.join(", "))
    }
}

fn ty_of(ty: ParamType) -> Scalar {
    match ty {
        ParamType::Scalar(s) => s,
        ParamType::Slice { .. } => Scalar::U32,
    }
}

fn show_literal(ty: Scalar, lit: Literal) -> String {
    match lit {
        Literal::Int(v) if ty == Scalar::U64 => (v as u64).to_string(),
        Literal::Int(v) => v.to_string(),
        Literal::Bool(b) => b.to_string(),
        Literal::Float(f) => f.to_string(),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Read {
    Param(u32),
    Const(u32),
}

fn collect_reads(expr: &Expr, out: &mut Vec<Read>) {
    let mut push = |read: Read| {
        if !out.contains(&read) {
            out.push(read);
        }
    };
    match &expr.kind {
        ExprKind::Param(id) | ExprKind::Len(id) => push(Read::Param(*id)),
        ExprKind::Const(id) => push(Read::Const(*id)),
        ExprKind::Literal(_) | ExprKind::Special(_) => {}
        ExprKind::Load(place) => collect_place_reads(place, out),
        ExprKind::Unary(_, a) | ExprKind::Cast(a) => collect_reads(a, out),
        ExprKind::Binary(_, a, b) => {
            collect_reads(a, out);
            collect_reads(b, out);
        }
        ExprKind::Select(c, a, b) => {
            collect_reads(c, out);
            collect_reads(a, out);
            collect_reads(b, out);
        }
        ExprKind::Call(_, operands) => operands.iter().for_each(|e| collect_reads(e, out)),
        ExprKind::Atomic {
            place,
            value,
            compare,
            ..
        } => {
            collect_place_reads(place, out);
            collect_reads(value, out);
            if let Some(c) = compare {
                collect_reads(c, out);
            }
        }
    }
}

fn collect_place_reads(place: &Place, out: &mut Vec<Read>) {
    match place {
        Place::Local { indices, .. } => indices.iter().for_each(|e| collect_reads(e, out)),
        Place::Global { index, .. } => collect_reads(index, out),
    }
}

fn launch_dims(
    def: &KernelDef,
    consts: &[i64],
    facts: &VariantFacts,
    grid: &Grid,
    device: &DeviceInfo,
) -> Result<LaunchDims, Error> {
    // Named only in a refusal: the name costs more to format than the checks.
    let kernel = || def.variant_name(consts);
    let threads = match (facts.block, grid.threads) {
        (Some(declared), Some(given)) if declared != given => {
            return Err(invalid(
                &kernel(),
                format!(
                    "the kernel declares block({}) but the grid gives {} threads per block: leave \
                     the threads out (Grid::blocks) or give exactly the declared shape",
                    dims(declared),
                    dims(given)
                ),
            ));
        }
        (Some(shape), _) | (None, Some(shape)) => shape,
        (None, None) => return Err(missing_block(&kernel())),
    };
    if threads.contains(&0) {
        return Err(invalid(
            &kernel(),
            format!(
                "a block of {} threads is empty: every block dimension must be at least 1",
                dims(threads)
            ),
        ));
    }
    // u128: three u32 extents multiply past u64 (a block of [u32::MAX; 3]).
    let per_block: u128 = threads.iter().map(|&t| u128::from(t)).product();
    if per_block > u128::from(device.max_threads_per_block) {
        return Err(invalid(
            &kernel(),
            format!(
                "a block of {} = {per_block} threads is more than {} allows ({} per block): use \
                 smaller blocks",
                dims(threads),
                device.name,
                device.max_threads_per_block
            ),
        ));
    }
    for (axis, (&t, &max)) in AXES.iter().zip(threads.iter().zip(&device.max_block_dims)) {
        if t > max {
            return Err(invalid(
                &kernel(),
                format!(
                    "a block of {} threads has {t} along {axis}, more than {} allows ({max}): \
                     reshape the block",
                    dims(threads),
                    device.name
                ),
            ));
        }
    }
    if grid.blocks.contains(&0) {
        return Err(invalid(
            &kernel(),
            format!(
                "the grid of {} blocks is empty: every grid dimension must be at least 1 (skip the \
                 launch when there is no work)",
                dims(grid.blocks)
            ),
        ));
    }
    for (axis, (&b, &max)) in AXES
        .iter()
        .zip(grid.blocks.iter().zip(&device.max_grid_dims))
    {
        if b > max {
            return Err(invalid(
                &kernel(),
                format!(
                    "the grid of {} blocks has {b} along {axis}, more than {} allows ({max}): \
                     spread the blocks over more grid dimensions or give each thread more work",
                    dims(grid.blocks),
                    device.name
                ),
            ));
        }
    }
    if let Some(cluster) = facts.cluster {
        if grid.blocks.iter().zip(&cluster).any(|(&b, &c)| b % c != 0) {
            return Err(invalid(
                &kernel(),
                format!(
                    "the kernel runs in clusters of {} blocks (`cluster(..)`) and the grid of {} \
                     blocks is not a whole number of them: round each grid dimension up to a \
                     multiple of the cluster's",
                    dims(cluster),
                    dims(grid.blocks)
                ),
            ));
        }
    }
    if facts.shared_bytes > device.shared_mem_per_block_optin {
        return Err(invalid(
            &kernel(),
            format!(
                "this variant needs {} bytes of shared memory per block, more than {} allows ({} \
                 bytes): pick a variant with smaller tiles or fewer stages",
                facts.shared_bytes, device.name, device.shared_mem_per_block_optin
            ),
        ));
    }
    Ok(LaunchDims {
        blocks: grid.blocks,
        threads,
        shared_bytes: facts.shared_bytes,
    })
}

/// The refusal of a launch that gives no block shape to a kernel that declares none.
pub(crate) fn missing_block(kernel: &str) -> Error {
    invalid(
        kernel,
        "the kernel declares no block shape and the grid gives no threads per block: use \
         Grid::new(blocks, threads) or Grid::linear(n, threads)"
            .into(),
    )
}

const AXES: [&str; 3] = ["x", "y", "z"];

fn dims(d: [u32; 3]) -> String {
    format!("{}, {}, {}", d[0], d[1], d[2])
}

fn invalid(kernel: &str, message: String) -> Error {
    Error::InvalidLaunch {
        kernel: kernel.to_string(),
        message,
    }
}
