//! What a dense GEMM launch asks for, shared by every dense GEMM family
//! (`gemm::gemm_f32`, the `gemm_tc` Tensor Core kernels, `gemm_wmma`): the
//! problem ([`GemmProblem`]: shape, layouts, strided batches, scales,
//! activation), the launcher every variant has ([`GemmVariant`], implemented
//! by each kernel's `Consts`), the checks it runs before a launch, and the
//! arguments every kernel takes in the same order (`KernelProblem::args`;
//! the epilogue is `crate::epilogue`).

use std::fmt::Debug;

use warpforge::{
    BufferMut, BufferRef, DeviceScalar, Error, Grid, KernelArg, KernelVariant, MatrixLayout,
    Runtime,
};

use crate::gemm::tile_grid;
use crate::gemm_wgmma::Workspace;

/// The elementwise function a GEMM's epilogue applies to each output, after
/// the bias.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Activation {
    /// None: the output is `alpha A B + beta C + bias`.
    #[default]
    Identity,
    /// `max(x, 0)`.
    Relu,
    /// GELU in its tanh approximation,
    /// `0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))`: the form of
    /// cuBLASLt's `CUBLASLT_EPILOGUE_GELU`, PyTorch's
    /// `gelu(approximate="tanh")`, JAX's `jax.nn.gelu` (its default) and the
    /// GPT-2 and BERT code. It differs from the exact `x Phi(x)` by up to
    /// about 3e-4 (hence a name of its own). The kernels evaluate it in f32
    /// with the target's `tanh` (`tanh.approx.f32` from sm_75 on).
    GeluTanh,
}

impl Activation {
    /// Every activation, for tests that try each.
    pub const ALL: [Activation; 3] = [Activation::Identity, Activation::Relu, Activation::GeluTanh];

    /// The function, in f64: what the kernels compute up to f32 rounding.
    pub fn apply(self, x: f64) -> f64 {
        match self {
            Activation::Identity => x,
            Activation::Relu => x.max(0.0),
            Activation::GeluTanh => {
                let inner = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
                0.5 * x * (1.0 + inner.tanh())
            }
        }
    }

    /// The largest |slope| of the function: an error in its argument grows
    /// by at most this factor. GELU's steepest point is near x = 1.42, slope
    /// 1.1290.
    pub fn max_slope(self) -> f64 {
        match self {
            Activation::Identity | Activation::Relu => 1.0,
            Activation::GeluTanh => 1.13,
        }
    }

    /// The kernels' `activation` parameter (see [`crate::epilogue`]).
    fn code(self) -> u32 {
        match self {
            Activation::Identity => 0,
            Activation::Relu => 1,
            Activation::GeluTanh => 2,
        }
    }
}

/// The float64 reference of one output element of a GEMM (see
/// [`GemmProblem`]), from the exact `product` (sum over p of `a_ip b_pj`) and
/// its `magnitude` (sum of `|a_ip b_pj|`) at that element, C's old value
/// there and the bias of its column (0 without one): the value
/// `activation(alpha * product + beta * c + bias)`, and the magnitude of what
/// was summed before the activation, `|alpha| magnitude + |beta c| + |bias|`,
/// which rounding errors grow with. C is not read where beta is 0 (as in
/// BLAS: a NaN there vanishes). The references of the tuner's verification
/// (`crate::tuned::GemmWorkload`) and of the GPU tier (`warpforge-tests`)
/// both end in this.
pub fn reference_epilogue(
    (alpha, beta): (f64, f64),
    activation: Activation,
    (product, magnitude): (f64, f64),
    c: f64,
    bias: f64,
) -> (f64, f64) {
    let scaled_c = if beta == 0.0 { 0.0 } else { beta * c };
    let pre_activation = alpha * product + scaled_c + bias;
    (
        activation.apply(pre_activation),
        alpha.abs() * magnitude + scaled_c.abs() + bias.abs(),
    )
}

/// Strided batches of a GEMM: batch `i`'s A, B and C start at `i * stride_a`,
/// `i * stride_b` and `i * stride_c` elements into their buffers (as in
/// cuBLAS's strided-batched GEMMs). A and B strides may be 0 (one matrix
/// shared by every batch); C's batches must not overlap. The bias is shared
/// by every batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GemmBatch {
    /// The number of batches.
    pub count: u32,
    /// Elements from one batch's A to the next.
    pub stride_a: u32,
    /// Elements from one batch's B to the next.
    pub stride_b: u32,
    /// Elements from one batch's C to the next.
    pub stride_c: u32,
}

impl GemmBatch {
    /// `count` batches stored back to back.
    pub fn packed(count: u32, (m, n, k): (u32, u32, u32)) -> GemmBatch {
        // A matrix of 2^32 elements or more has no u32 stride: saturated, and
        // the launch's checks refuse it (the kernels index with 32 bits).
        GemmBatch {
            count,
            stride_a: m.saturating_mul(k),
            stride_b: k.saturating_mul(n),
            stride_c: m.saturating_mul(n),
        }
    }
}

/// One GEMM for the launchers of every dense family: for each of
/// `batch.count` batches, `C = activation(alpha * A B + beta * C + bias)`,
/// where A is `m x k` and B is `k x n`, each in its layout, C is `m x n` in
/// its layout, and `bias` (when the launch is given one) is a row of `n`
/// values added to every row of C (a linear layer's bias). Matrices are
/// dense: the leading dimension of each is its row or column length. Where
/// beta is 0, C is not read (it may hold anything, NaN included).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemmProblem<S> {
    /// Rows of A and C.
    pub m: u32,
    /// Columns of B and C.
    pub n: u32,
    /// Columns of A, rows of B: the reduction length.
    pub k: u32,
    /// How A lies in its buffer.
    pub a_layout: MatrixLayout,
    /// How B lies in its buffer.
    pub b_layout: MatrixLayout,
    /// How C lies in its buffer.
    pub c_layout: MatrixLayout,
    /// The batches and their strides.
    pub batch: GemmBatch,
    /// The scale of the product.
    pub alpha: S,
    /// The scale of C's old value (0: C is not read).
    pub beta: S,
    /// The function applied to each output element last.
    pub activation: Activation,
}

impl<S: Copy> GemmProblem<S> {
    /// `C = alpha * A B + beta * C` for row-major A, column-major B (the
    /// Tensor Core kernels' native form, "TN") and row-major C, one batch, no
    /// activation; change the rest with struct update syntax
    /// (`GemmProblem { activation: Activation::Relu, ..GemmProblem::new(dims, 1.0, 0.0) }`).
    pub fn new((m, n, k): (u32, u32, u32), alpha: S, beta: S) -> GemmProblem<S> {
        GemmProblem {
            m,
            n,
            k,
            a_layout: MatrixLayout::RowMajor,
            b_layout: MatrixLayout::ColMajor,
            c_layout: MatrixLayout::RowMajor,
            batch: GemmBatch::packed(1, (m, n, k)),
            alpha,
            beta,
            activation: Activation::Identity,
        }
    }

    /// Elements A's buffer must hold: up to the end of the last batch's matrix.
    pub fn a_len(&self) -> u64 {
        self.buffer_len(self.batch.stride_a, self.m, self.k)
    }

    /// Elements B's buffer must hold: up to the end of the last batch's matrix.
    pub fn b_len(&self) -> u64 {
        self.buffer_len(self.batch.stride_b, self.k, self.n)
    }

    /// Elements C's buffer must hold: up to the end of the last batch's matrix.
    pub fn c_len(&self) -> u64 {
        self.buffer_len(self.batch.stride_c, self.m, self.n)
    }

    fn buffer_len(&self, stride: u32, rows: u32, cols: u32) -> u64 {
        match self.batch.count {
            0 => 0,
            count => u64::from(count - 1) * u64::from(stride) + u64::from(rows) * u64::from(cols),
        }
    }

    /// The problem as a kernel takes it: C row-major. A column-major C is
    /// computed as `C^T = B^T A^T`, a row-major `n x m` product of the
    /// operands swapped with their layouts flipped (the transpose of a
    /// row-major matrix is the same buffer read column-major), the bias added
    /// along its rows.
    pub(crate) fn for_kernel(&self) -> KernelProblem<S> {
        let flip = |layout| match layout {
            MatrixLayout::RowMajor => MatrixLayout::ColMajor,
            MatrixLayout::ColMajor => MatrixLayout::RowMajor,
        };
        let GemmBatch {
            count,
            stride_a,
            stride_b,
            stride_c,
        } = self.batch;
        let swapped = self.c_layout == MatrixLayout::ColMajor;
        let (m, n, a_layout, b_layout, stride_a, stride_b) = if swapped {
            let (a, b) = (flip(self.b_layout), flip(self.a_layout));
            (self.n, self.m, a, b, stride_b, stride_a)
        } else {
            let (a, b) = (self.a_layout, self.b_layout);
            (self.m, self.n, a, b, stride_a, stride_b)
        };
        KernelProblem {
            m,
            n,
            k: self.k,
            a_layout,
            b_layout,
            swapped,
            batch: GemmBatch {
                count,
                stride_a,
                stride_b,
                stride_c,
            },
            alpha: self.alpha,
            beta: self.beta,
            activation: self.activation,
        }
    }
}

impl<S: Copy> GemmProblem<S> {
    /// The problem as a kernel that stores C in either layout takes it (the
    /// sparse GEMM, whose A cannot trade places with B): operands and layouts
    /// as given.
    pub(crate) fn as_given(&self) -> KernelProblem<S> {
        KernelProblem {
            m: self.m,
            n: self.n,
            k: self.k,
            a_layout: self.a_layout,
            b_layout: self.b_layout,
            swapped: false,
            batch: self.batch,
            alpha: self.alpha,
            beta: self.beta,
            activation: self.activation,
        }
    }
}

/// A problem as a kernel takes it (row-major C), after every check of
/// [`GemmVariant::check`]: the kernels' scalar parameters. Made only by the
/// checks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KernelProblem<S> {
    pub(crate) m: u32,
    pub(crate) n: u32,
    pub(crate) k: u32,
    a_layout: MatrixLayout,
    b_layout: MatrixLayout,
    /// Whether the kernel's A is the caller's B and its B the caller's A
    /// (C column-major).
    swapped: bool,
    pub(crate) batch: GemmBatch,
    pub(crate) alpha: S,
    pub(crate) beta: S,
    activation: Activation,
}

impl<S: Copy> KernelProblem<S> {
    /// The grid of a variant with `bm x bn` block tiles: one block per tile of
    /// C, x along n, y along m, z along the batches.
    pub(crate) fn grid(&self, tile: (u32, u32)) -> Grid {
        let mut grid = tile_grid(tile, self.m, self.n);
        grid.blocks[2] = self.batch.count;
        grid
    }

    /// The kernels' `bias_mode` (see [`crate::epilogue`]): 0 without a bias, 1
    /// for one value per column of the kernel's C, 2 per row (C column-major).
    pub(crate) fn bias_mode(&self, with_bias: bool) -> u32 {
        match (with_bias, self.swapped) {
            (false, _) => 0,
            (true, false) => 1,
            (true, true) => 2,
        }
    }

    /// The arguments of every dense GEMM kernel, in the order each declares
    /// them (`gemm::gemm_f32`, `gemm_wmma::gemm_f16_wmma`, `gemm_tc::gemm_tc`):
    /// `a`, `b`, `c`, `bias`, then the scalars ([`KernelProblem::scalar_args`]).
    pub(crate) fn args<'a, T: DeviceScalar, O: DeviceScalar>(
        &self,
        a: BufferRef<'a, T>,
        b: BufferRef<'a, T>,
        c: BufferMut<'a, O>,
        bias: BufferRef<'a, O>,
        bias_mode: u32,
    ) -> Vec<KernelArg<'a>>
    where
        S: DeviceScalar,
    {
        let mut args = vec![
            KernelArg::buffer(a),
            KernelArg::buffer(b),
            KernelArg::buffer_mut(c),
            KernelArg::buffer(bias),
        ];
        args.extend(self.scalar_args(bias_mode));
        args
    }

    /// The scalar arguments of every dense GEMM kernel, after the buffers:
    /// `m`, `n`, `k`, `batches`, `stride_a`, `stride_b`, `stride_c`,
    /// `alpha`, `beta`, `bias_mode`, `activation`, `a_col_major`,
    /// `b_row_major`.
    pub(crate) fn scalar_args<'a>(&self, bias_mode: u32) -> [KernelArg<'a>; 13]
    where
        S: DeviceScalar,
    {
        [
            KernelArg::scalar(self.m),
            KernelArg::scalar(self.n),
            KernelArg::scalar(self.k),
            KernelArg::scalar(self.batch.count),
            KernelArg::scalar(self.batch.stride_a),
            KernelArg::scalar(self.batch.stride_b),
            KernelArg::scalar(self.batch.stride_c),
            KernelArg::scalar(self.alpha),
            KernelArg::scalar(self.beta),
            KernelArg::scalar(bias_mode),
            KernelArg::scalar(self.activation.code()),
            KernelArg::scalar(self.a_layout == MatrixLayout::ColMajor),
            KernelArg::scalar(self.b_layout == MatrixLayout::RowMajor),
        ]
    }

    /// The caller's A and B (or what belongs to each) in the order the
    /// kernel reads them.
    pub(crate) fn operands<T>(&self, a: T, b: T) -> (T, T) {
        if self.swapped {
            (b, a)
        } else {
            (a, b)
        }
    }
}

/// The layouts of A and B a variant reads (C row-major).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VariantLayouts {
    /// Any: the kernel takes them as run-time parameters.
    Any,
    /// These, fixed when the variant was built; `other` says where the
    /// others are.
    Fixed {
        /// A's layout.
        a: MatrixLayout,
        /// B's layout.
        b: MatrixLayout,
        /// Where problems in other layouts go, for the refusal's message.
        other: &'static str,
    },
}

/// What one variant of a dense GEMM family computes, beyond the shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VariantTakes {
    /// The layouts of A and B it reads.
    pub layouts: VariantLayouts,
    /// Whether the variant copies A and B in 16-byte chunks, which need
    /// leading dimensions and batch strides that are multiples of a chunk.
    pub chunks: Option<Chunks>,
    /// Whether the kernel has the GELU epilogue (not on integer outputs).
    pub gelu: bool,
}

/// The 16-byte copies of a variant: elements per chunk, and what to do when
/// a leading dimension or batch stride is not a multiple of it. (Buffers are
/// whole allocations, so their starts are always aligned: what a launch can
/// get wrong is the offset of each row, column and batch.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunks {
    /// Elements per 16-byte chunk.
    pub elements: u32,
    /// What to do instead, for the refusal's message (e.g. which variants copy
    /// element by element).
    pub otherwise: &'static str,
}

/// One variant of a dense GEMM family, implemented by each kernel's
/// `Consts` (its [`KernelVariant`]: the kernel, its variants, their names):
/// a tuner picks one for a problem with [`GemmVariant::variants_for`] and
/// launches it with [`GemmVariant::run`]. A kernel takes the arguments of
/// `KernelProblem::args` and runs one block per `tile()` of C and batch.
pub trait GemmVariant: KernelVariant {
    /// The element type of A and B.
    type Elem: DeviceScalar;
    /// The element type of C and of the bias.
    type Out: DeviceScalar;
    /// The type of alpha and beta.
    type Scale: DeviceScalar;

    /// What this variant takes.
    fn takes(&self) -> VariantTakes;

    /// The `BM x BN` tile of C a block computes.
    fn tile(&self) -> (u32, u32);

    /// The buffer a launch without a bias passes as `bias`, which the kernel
    /// then never reads: A where it has C's element type; `None` for a
    /// one-element buffer made for the launch (s8: i8 A, i32 C).
    fn bias_stand_in(a: BufferRef<'_, Self::Elem>) -> Option<BufferRef<'_, Self::Out>>;

    /// The grid of a launch on `problem`: one block per [`GemmVariant::tile`]
    /// and batch, unless the kernel's blocks walk the tiles themselves.
    fn grid(&self, _rt: &Runtime, problem: &KernelProblem<Self::Scale>) -> Result<Grid, Error> {
        Ok(problem.grid(self.tile()))
    }

    /// Launches this variant on a checked problem: `a` and `b` in the order
    /// the kernel reads them, `bias` as the caller gave it.
    fn launch(
        &self,
        rt: &Runtime,
        problem: &KernelProblem<Self::Scale>,
        a: BufferRef<'_, Self::Elem>,
        b: BufferRef<'_, Self::Elem>,
        c: BufferMut<'_, Self::Out>,
        bias: Option<BufferRef<'_, Self::Out>>,
    ) -> Result<(), Error> {
        let grid = self.grid(rt, problem)?;
        launch_with(self, rt, problem, grid, (a, b, c, bias), None)
    }

    /// Whether this variant computes `problem`: its layouts (after a
    /// column-major C's swap), the alignment of its 16-byte copies, its
    /// activation. The `Err` names the constraint and what to do.
    fn check(
        &self,
        problem: &GemmProblem<Self::Scale>,
    ) -> Result<KernelProblem<Self::Scale>, Error> {
        let kernel = problem.for_kernel();
        let takes = self.takes();
        let refuse = |message: String| {
            Err(Error::InvalidLaunch {
                kernel: self.name(),
                message,
            })
        };
        if let VariantLayouts::Fixed { a, b, other } = takes.layouts {
            if (kernel.a_layout, kernel.b_layout) != (a, b) {
                let swap = if kernel.swapped {
                    " (C column-major is computed as C^T = B^T A^T, which swaps the operands \
                     and flips their layouts)"
                } else {
                    ""
                };
                return refuse(format!(
                    "it reads A {a} and B {b}, and this problem gives it A {} and B {}{swap}: \
                     {other}",
                    kernel.a_layout, kernel.b_layout
                ));
            }
        }
        if problem.activation == Activation::GeluTanh && !takes.gelu {
            return refuse(
                "GELU needs a floating-point output, and this kernel's C is integer: use no \
                 activation or ReLU, or convert the output and apply GELU in a kernel of its own"
                    .to_string(),
            );
        }
        if let Some(chunks) = takes.chunks {
            if let Err(message) = check_chunks(problem, chunks, Operands::AAndB) {
                return refuse(message);
            }
        }
        Ok(kernel)
    }

    /// Checks `problem` against this variant and the buffers, then launches
    /// it: for each batch, `C = activation(alpha * A B + beta * C + bias)`
    /// (see [`GemmProblem`]). Every input the variant cannot take is an `Err`
    /// naming the constraint, before anything runs; a problem with no output
    /// element does nothing.
    ///
    /// A, B, C and the bias may be whole buffers or views
    /// ([`DeviceBuffer::slice`](warpforge::DeviceBuffer::slice), [`DeviceBuffer::slice_mut`](warpforge::DeviceBuffer::slice_mut)): a view holds
    /// the matrix from its first element, and its length is what the
    /// problem's checks see.
    fn run<'a>(
        &self,
        rt: &Runtime,
        problem: &GemmProblem<Self::Scale>,
        a: impl Into<BufferRef<'a, Self::Elem>>,
        b: impl Into<BufferRef<'a, Self::Elem>>,
        c: impl Into<BufferMut<'a, Self::Out>>,
        bias: Option<BufferRef<'a, Self::Out>>,
    ) -> Result<(), Error> {
        let (a, b, c) = (a.into(), b.into(), c.into());
        let kernel = self.check(problem)?;
        let lengths = (Some(a.len()), b.len(), c.len(), bias.map(|bias| bias.len()));
        check_lengths(problem, lengths).map_err(|message| Error::InvalidLaunch {
            kernel: self.name(),
            message,
        })?;
        if problem.m == 0 || problem.n == 0 || problem.batch.count == 0 {
            return Ok(());
        }
        let (a, b) = kernel.operands(a, b);
        self.launch(rt, &kernel, a, b, c, bias)
    }

    /// The variants that compute `problem`: the search space of a tuner.
    ///
    /// They come in the order of `Consts::variants()`, filtered by
    /// [`GemmVariant::check`]: the cartesian product of the kernel's
    /// `tune(..)` values, the first const parameter varying slowest and each
    /// one's values in the order `tune(..)` lists them, without the
    /// combinations `constrain(..)` rules out. The order says nothing about
    /// speed, and the first variant is no default: to get the fastest for a
    /// problem, call [`TunedGemm::gemm`](crate::tuned::TunedGemm::gemm),
    /// which tunes among the family's variants that take it.
    fn variants_for(problem: &GemmProblem<Self::Scale>) -> Vec<Self> {
        Self::variants()
            .into_iter()
            .filter(|variant| variant.check(problem).is_ok())
            .collect()
    }
}

/// A launch's buffers: A and B in the order the kernel reads them, C, and
/// the bias as the caller gave it.
pub(crate) type GemmBuffers<'a, V> = (
    BufferRef<'a, <V as GemmVariant>::Elem>,
    BufferRef<'a, <V as GemmVariant>::Elem>,
    BufferMut<'a, <V as GemmVariant>::Out>,
    Option<BufferRef<'a, <V as GemmVariant>::Out>>,
);

/// Launches `variant` on a checked problem and `grid` with the arguments
/// every dense GEMM kernel takes ([`KernelProblem::args`]), then, for the
/// wgmma kernels, their `workspace`'s.
pub(crate) fn launch_with<V: GemmVariant>(
    variant: &V,
    rt: &Runtime,
    problem: &KernelProblem<V::Scale>,
    grid: Grid,
    (a, b, c, bias): GemmBuffers<'_, V>,
    workspace: Option<&mut Workspace<'_, V::Scale>>,
) -> Result<(), Error> {
    let bias_mode = problem.bias_mode(bias.is_some());
    let fresh;
    let bias = match bias.or_else(|| V::bias_stand_in(a)) {
        Some(bias) => bias,
        None => {
            fresh = rt.alloc_zeroed(1)?;
            BufferRef::from(&fresh)
        }
    };
    let mut args = problem.args(a, b, c, bias, bias_mode);
    if let Some(workspace) = workspace {
        args.extend(workspace.args());
    }
    rt.launch(V::def(), &variant.values(), grid, &mut args)
}

/// `C = alpha * A B + beta * C` (A row-major, B column-major, C row-major,
/// one batch, no bias or activation) with the given variant: shorthand for
/// [`GemmVariant::run`] on `GemmProblem::new((m, n, k), alpha, beta)`.
#[allow(clippy::too_many_arguments)]
pub fn gemm_with<'a, V: GemmVariant>(
    rt: &Runtime,
    consts: V,
    a: impl Into<BufferRef<'a, V::Elem>>,
    b: impl Into<BufferRef<'a, V::Elem>>,
    c: impl Into<BufferMut<'a, V::Out>>,
    dims: (u32, u32, u32),
    alpha: V::Scale,
    beta: V::Scale,
) -> Result<(), Error> {
    consts.run(rt, &GemmProblem::new(dims, alpha, beta), a, b, c, None)
}

/// The operands a variant copies in 16-byte chunks from the caller's
/// matrices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Operands {
    AAndB,
    /// B only: the sparse GEMM's A is compressed into rows of whole chunks.
    B,
}

/// That the leading dimensions and (with several batches) batch strides of
/// the `operands` copied in 16-byte chunks are multiples of a chunk; the
/// `Err` says which is not and what to do (`chunks.otherwise`).
pub(crate) fn check_chunks<S: Copy>(
    problem: &GemmProblem<S>,
    Chunks {
        elements,
        otherwise,
    }: Chunks,
    operands: Operands,
) -> Result<(), String> {
    // A is m x k: its rows hold k elements, its columns m; B is k x n. C
    // column-major swaps the operands but leaves each one's leading dimension
    // and stride as they are.
    let a_leading = match problem.a_layout {
        MatrixLayout::RowMajor => ("k", problem.k),
        MatrixLayout::ColMajor => ("m", problem.m),
    };
    let b_leading = match problem.b_layout {
        MatrixLayout::RowMajor => ("n", problem.n),
        MatrixLayout::ColMajor => ("k", problem.k),
    };
    let batched = problem.batch.count > 1;
    let with_a = operands == Operands::AAndB;
    let requirements = [
        ("A's leading dimension", a_leading, with_a),
        ("B's leading dimension", b_leading, true),
        (
            "A's batch stride",
            ("stride_a", problem.batch.stride_a),
            with_a && batched,
        ),
        (
            "B's batch stride",
            ("stride_b", problem.batch.stride_b),
            batched,
        ),
    ];
    let copied = if with_a { "A and B" } else { "B" };
    for (what, (name, value), applies) in requirements {
        if applies && value % elements != 0 {
            return Err(format!(
                "it copies {copied} in 16-byte chunks, so {what} must be a multiple of \
                 {elements} elements, and it is {name} = {value}: {otherwise}"
            ));
        }
    }
    Ok(())
}

/// The most batches one launch takes: the grid's z extent (CUDA and WebGPU
/// both allow 65535 blocks there).
pub const MAX_BATCHES: u32 = 65535;

/// The most elements a buffer of a GEMM launch may span: the kernels index
/// with `u32`.
pub const MAX_ELEMENTS: u64 = 1 << 32;

/// The buffers against the problem: each holds its batches, the bias one
/// value per column of C, the batches fit one launch and C's do not overlap.
/// The `Err` is the message; the caller names the launch (only then, off the
/// path of launches that pass). A's length is `None` where the caller checks
/// A itself (a compressed sparse A, whose buffers are not `m x k` matrices).
pub(crate) fn check_lengths<S: Copy>(
    problem: &GemmProblem<S>,
    (a, b, c, bias): (Option<usize>, usize, usize, Option<usize>),
) -> Result<(), String> {
    let GemmProblem { m, n, k, batch, .. } = *problem;
    if batch.count > MAX_BATCHES {
        return Err(format!(
            "{} batches are more than one launch takes ({MAX_BATCHES}, the grid's z extent): \
             split the batch into launches of at most {MAX_BATCHES}",
            batch.count
        ));
    }
    for (name, (rows, cols)) in [("A", (m, k)), ("B", (k, n)), ("C", (m, n))] {
        let elements = u64::from(rows) * u64::from(cols);
        if elements > MAX_ELEMENTS {
            return Err(format!(
                "{name} is {rows} x {cols} = {elements} elements, and the kernels index each \
                 buffer with 32 bits (at most {MAX_ELEMENTS} elements): split the problem into \
                 launches of fewer rows or columns"
            ));
        }
    }
    if batch.count > 1 && u64::from(batch.stride_c) < u64::from(m) * u64::from(n) {
        return Err(format!(
            "C's batches overlap: stride_c = {} is less than the {m} x {n} = {} elements of each C: \
             give C a stride of at least m * n",
            batch.stride_c,
            u64::from(m) * u64::from(n)
        ));
    }
    let buffers = [
        (
            "A",
            a,
            problem.a_len(),
            "(batch.count - 1) * stride_a + m * k",
        ),
        (
            "B",
            Some(b),
            problem.b_len(),
            "(batch.count - 1) * stride_b + k * n",
        ),
        (
            "C",
            Some(c),
            problem.c_len(),
            "(batch.count - 1) * stride_c + m * n",
        ),
    ];
    for (name, len, needed, formula) in buffers {
        if needed > MAX_ELEMENTS {
            return Err(format!(
                "{name} spans {formula} = {needed} elements, and the kernels index each buffer \
                 with 32 bits (at most {MAX_ELEMENTS} elements): split the batch into launches \
                 of fewer batches"
            ));
        }
        let Some(len) = len else { continue };
        if (len as u64) < needed {
            return Err(format!(
                "{name} holds {len} elements and the problem ({m} x {n} x {k}, {} batches) needs \
                 {formula} = {needed}: pass a larger buffer or a smaller problem",
                batch.count
            ));
        }
    }
    match bias {
        Some(len) if len < n as usize => Err(format!(
            "the bias holds {len} values and C has {n} columns: pass one value per column of C \
             (it is added to every row)"
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm::gemm_f32;
    use crate::gemm_tc::{gemm_bf16, gemm_f16, gemm_s8, gemm_tf32};
    use crate::gemm_wmma::gemm_f16_wmma;
    use MatrixLayout::{ColMajor, RowMajor};

    #[test]
    fn every_consts_is_a_kernel_variant() {
        // What `#[kernel]` implements for `Consts`, seen through the trait.
        fn names<V: KernelVariant>() -> Vec<String> {
            V::variants().iter().map(V::name).collect()
        }
        let def = gemm_s8::def();
        let direct: Vec<String> = def.variants().iter().map(|v| def.variant_name(v)).collect();
        assert_eq!(names::<gemm_s8::Consts>(), direct);
        assert!(direct[0].starts_with("gemm_s8[BM="), "{}", direct[0]);
        let first = gemm_f16::variants()[0];
        assert_eq!(KernelVariant::values(&first), first.values());
        assert!(std::ptr::eq(
            <gemm_f16::Consts as KernelVariant>::def(),
            gemm_f16::def()
        ));
    }

    #[test]
    fn activations_and_their_slopes() {
        assert_eq!(Activation::Relu.apply(-2.0), 0.0);
        assert_eq!(Activation::Relu.apply(2.0), 2.0);
        assert_eq!(Activation::Identity.apply(-2.0), -2.0);
        let gelu = Activation::GeluTanh;
        assert_eq!(gelu.apply(0.0), 0.0);
        assert!((gelu.apply(1.0) - 0.841_191_990_608_276_8).abs() < 1e-15);
        assert!((gelu.apply(-1.0) + 0.158_808_009_391_723_2).abs() < 1e-15);
        assert!((gelu.apply(10.0) - 10.0).abs() < 1e-12 && gelu.apply(-10.0).abs() < 1e-12);
        // No slope on a fine grid exceeds the stated largest one.
        let h = 1e-6;
        let steepest = (-100_000..100_000)
            .map(|i| {
                let x = f64::from(i) / 10_000.0;
                ((gelu.apply(x + h) - gelu.apply(x - h)) / (2.0 * h)).abs()
            })
            .fold(0.0, f64::max);
        assert!(
            steepest <= gelu.max_slope() && steepest > 1.128,
            "{steepest}"
        );
        // The kernels' codes, which `crate::epilogue` branches on.
        let codes: Vec<u32> = Activation::ALL.iter().map(|a| a.code()).collect();
        assert_eq!(codes, [0, 1, 2]);
    }

    fn problem(dims: (u32, u32, u32), a: MatrixLayout, b: MatrixLayout) -> GemmProblem<f32> {
        GemmProblem {
            a_layout: a,
            b_layout: b,
            ..GemmProblem::new(dims, 1.0, 0.0)
        }
    }

    fn refusal<S: Copy>(result: Result<KernelProblem<S>, Error>) -> String {
        match result {
            Ok(_) => panic!("the variant took a problem it must refuse"),
            Err(e) => e.to_string(),
        }
    }

    fn f16_tn(aligned: bool) -> gemm_f16::Consts {
        let tn = gemm_f16::Consts::variants_for(&problem((64, 64, 64), RowMajor, ColMajor));
        let found = tn.into_iter().find(|c| c.ALIGNED == aligned);
        found.expect("TN has aligned and element-wise variants")
    }

    #[test]
    fn a_column_major_c_swaps_the_operands_and_flips_their_layouts() {
        let dims = (64, 32, 16);
        let tn = f16_tn(true);
        let kernel = tn.check(&problem(dims, RowMajor, ColMajor)).unwrap();
        assert_eq!((kernel.m, kernel.n, kernel.k), (64, 32, 16));
        assert_eq!(kernel.bias_mode(true), 1);
        // C column-major: C^T = B^T A^T, a TN product again for a TN problem,
        // n x m, with the bias along its rows.
        let tn_col_c = GemmProblem {
            c_layout: ColMajor,
            ..problem(dims, RowMajor, ColMajor)
        };
        let kernel = tn.check(&tn_col_c).unwrap();
        assert_eq!((kernel.m, kernel.n, kernel.k), (32, 64, 16));
        assert_eq!((kernel.a_layout, kernel.b_layout), (RowMajor, ColMajor));
        assert_eq!((kernel.bias_mode(true), kernel.bias_mode(false)), (2, 0));
        // Batch strides follow their operands.
        let batched = GemmProblem {
            batch: GemmBatch {
                count: 2,
                stride_a: 64 * 16,
                stride_b: 16 * 32 + 8,
                stride_c: 64 * 32,
            },
            ..tn_col_c
        };
        let kernel = tn.check(&batched).unwrap();
        assert_eq!(
            (kernel.batch.stride_a, kernel.batch.stride_b),
            (16 * 32 + 8, 64 * 16)
        );
        // Column-major A and C: B^T (a row-major B read column-major) times A^T
        // (row-major).
        let nn_col_c = GemmProblem {
            c_layout: ColMajor,
            ..problem(dims, ColMajor, ColMajor)
        };
        let message = refusal(tn.check(&nn_col_c));
        assert!(
            message.contains("this problem gives it A row-major and B row-major")
                && message.contains("swaps the operands"),
            "{message}"
        );
        let wmma = gemm_f16_wmma::variants()[0];
        let kernel = wmma.check(&nn_col_c).unwrap();
        assert_eq!((kernel.a_layout, kernel.b_layout), (RowMajor, RowMajor));
        // The wmma and SIMT GEMMs take every layout of A, B and C at run time.
        for a in MatrixLayout::ALL {
            for b in MatrixLayout::ALL {
                for c in MatrixLayout::ALL {
                    let p = GemmProblem {
                        c_layout: c,
                        ..problem(dims, a, b)
                    };
                    assert_eq!(
                        gemm_f16_wmma::Consts::variants_for(&p).len(),
                        gemm_f16_wmma::variants().len()
                    );
                    assert_eq!(
                        gemm_f32::Consts::variants_for(&p).len(),
                        gemm_f32::variants().len()
                    );
                }
            }
        }
    }

    #[test]
    fn sixteen_byte_copies_need_aligned_leading_dimensions_and_strides() {
        let aligned = f16_tn(true);
        let unaligned = f16_tn(false);
        let ragged = problem((64, 32, 63), RowMajor, ColMajor);
        let message = refusal(aligned.check(&ragged));
        assert!(
            message.contains("A's leading dimension must be a multiple of 8 elements")
                && message.contains("k = 63")
                && message.contains("ALIGNED = false"),
            "{message}"
        );
        assert!(unaligned.check(&ragged).is_ok());
        // A column-major A's leading dimension is m; a row-major B's is n.
        let wmma = gemm_f16_wmma::variants()[0];
        let message = refusal(wmma.check(&problem((60, 32, 64), ColMajor, ColMajor)));
        assert!(
            message.contains("m = 60") && message.contains("pad the matrices"),
            "{message}"
        );
        let message = refusal(wmma.check(&problem((64, 36, 64), RowMajor, RowMajor)));
        assert!(message.contains("B's leading dimension") && message.contains("n = 36"));
        let message = refusal(wmma.check(&problem((64, 32, 20), RowMajor, ColMajor)));
        assert!(message.contains("k = 20"), "{message}");
        // Batch strides, only when there are several batches.
        let mut batched = problem((64, 32, 64), RowMajor, ColMajor);
        batched.batch = GemmBatch {
            count: 2,
            stride_a: 64 * 64 + 4,
            stride_b: 64 * 32,
            stride_c: 64 * 32,
        };
        let message = refusal(aligned.check(&batched));
        assert!(message.contains("A's batch stride") && message.contains("stride_a = 4100"));
        batched.batch.count = 1;
        assert!(aligned.check(&batched).is_ok());
        // s8 copies 16 elements per chunk.
        let s8 = gemm_s8::variants().into_iter().find(|c| c.ALIGNED).unwrap();
        let message = refusal(s8.check(&GemmProblem::new((64, 64, 40), 1, 0)));
        assert!(message.contains("multiple of 16 elements"), "{message}");
        // The SIMT GEMM loads element by element: any shape.
        let simt = gemm_f32::variants()[0];
        assert!(simt.check(&problem((3, 5, 7), ColMajor, RowMajor)).is_ok());
    }

    #[test]
    fn integer_and_tf32_gemms_refuse_what_they_cannot_compute() {
        let s8 = gemm_s8::variants()[0];
        let gelu = GemmProblem {
            activation: Activation::GeluTanh,
            ..GemmProblem::new((64, 64, 64), 1, 0)
        };
        let message = refusal(s8.check(&gelu));
        assert!(
            message.contains("GELU needs a floating-point output"),
            "{message}"
        );
        let relu = GemmProblem {
            activation: Activation::Relu,
            ..gelu
        };
        assert!(s8.check(&relu).is_ok());
        let nn = GemmProblem {
            b_layout: RowMajor,
            ..relu
        };
        let message = refusal(s8.check(&nn));
        assert!(
            message.contains("`gemm_s8[")
                && message.contains("it reads A row-major and B column-major")
                && message.contains("16-bit elements: store A row-major and B column-major"),
            "{message}"
        );
        assert!(gemm_s8::Consts::variants_for(&nn).is_empty());
        let tf32 = gemm_tf32::variants()[0];
        let message = refusal(tf32.check(&problem((64, 64, 64), ColMajor, ColMajor)));
        assert!(
            message.contains("`gemm_tf32[") && message.contains("store A row-major"),
            "{message}"
        );
    }

    #[test]
    fn problems_past_32_bit_indices_are_refused_not_overflowed() {
        // Each of these overflowed u32 arithmetic (a panic in debug builds).
        let huge = GemmProblem::new((70000, 70000, 70000), 1.0f32, 0.0);
        assert_eq!(huge.batch.stride_a, u32::MAX);
        let message = check_lengths(&huge, (Some(1), 1, 1, None)).unwrap_err();
        assert!(
            message.starts_with("A is 70000 x 70000 = 4900000000 elements")
                && message.contains("32 bits"),
            "{message}"
        );
        let tall = GemmProblem {
            b_layout: RowMajor,
            ..GemmProblem::new((70000, 70000, 4), 1.0f32, 0.0)
        };
        let message = check_lengths(&tall, (Some(1), 1, 1, None)).unwrap_err();
        assert!(message.starts_with("C is 70000 x 70000"), "{message}");
        // 65535 batches of Cs of 2^32 - 1 elements: each C fits, their buffer does not.
        let mut batched = GemmProblem::new((65535, 65537, 1), 1.0f32, 0.0);
        batched.batch = GemmBatch::packed(65535, (65535, 65537, 1));
        let message = check_lengths(&batched, (None, usize::MAX, 1, None)).unwrap_err();
        assert!(
            message.starts_with("C spans") && message.contains("fewer batches"),
            "{message}"
        );
        let batch = GemmBatch::packed(65535, (65536, 65536, 1));
        assert_eq!(batch.stride_c, u32::MAX);
    }

    #[test]
    fn buffers_must_hold_every_batch_and_the_bias_every_column() {
        let mut p = problem((4, 3, 2), RowMajor, ColMajor);
        p.batch = GemmBatch {
            count: 3,
            stride_a: 10,
            stride_b: 0,
            stride_c: 12,
        };
        assert_eq!((p.a_len(), p.b_len(), p.c_len()), (28, 6, 36));
        assert!(check_lengths(&p, (Some(28), 6, 36, Some(3))).is_ok());
        let message = check_lengths(&p, (Some(27), 6, 36, None))
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("A holds 27 elements")
                && message.contains("(batch.count - 1) * stride_a + m * k = 28"),
            "{message}"
        );
        let message = check_lengths(&p, (Some(28), 6, 36, Some(2)))
            .unwrap_err()
            .to_string();
        assert!(message.contains("the bias holds 2 values and C has 3 columns"));
        p.batch.stride_c = 11;
        let message = check_lengths(&p, (Some(28), 6, 36, None))
            .unwrap_err()
            .to_string();
        assert!(message.contains("C's batches overlap"), "{message}");
        p.batch.count = MAX_BATCHES + 1;
        let message = check_lengths(&p, (Some(1 << 30), 6, 1 << 30, None))
            .unwrap_err()
            .to_string();
        assert!(message.contains("split the batch"), "{message}");
    }
    #[test]
    fn sixteen_bit_tensor_core_gemms_have_variants_for_every_layout() {
        let dims = (64, 32, 16);
        let variant = |a_col: bool, b_row: bool| {
            let all = gemm_f16::variants().into_iter();
            let mut found = all.filter(|c| c.A_COL_MAJOR == a_col && c.B_ROW_MAJOR == b_row);
            found
                .find(|c| c.ALIGNED)
                .expect("every layout has aligned variants")
        };
        let message = refusal(variant(false, false).check(&problem(dims, ColMajor, ColMajor)));
        assert!(
            message.contains("it reads A row-major and B column-major")
                && message.contains("this problem gives it A column-major and B column-major")
                && message.contains("A_COL_MAJOR"),
            "{message}"
        );
        assert!(variant(true, false)
            .check(&problem(dims, ColMajor, ColMajor))
            .is_ok());
        // Column-major A and C: the product of a row-major B^T and A^T.
        let nn_col_c = GemmProblem {
            c_layout: ColMajor,
            ..problem(dims, ColMajor, ColMajor)
        };
        assert!(variant(false, true).check(&nn_col_c).is_ok());
        // Alignment follows the layout: m for a column-major A, n for a row-major B.
        let message =
            refusal(variant(true, false).check(&problem((60, 32, 64), ColMajor, ColMajor)));
        assert!(message.contains("m = 60"), "{message}");
        let message =
            refusal(variant(false, true).check(&problem((64, 36, 64), RowMajor, RowMajor)));
        assert!(message.contains("n = 36"), "{message}");
        // Every layout of A, B and C has variants, and only fitting ones are listed.
        for a in MatrixLayout::ALL {
            for b in MatrixLayout::ALL {
                for c in MatrixLayout::ALL {
                    let p = GemmProblem {
                        c_layout: c,
                        ..problem(dims, a, b)
                    };
                    let fitting = gemm_f16::Consts::variants_for(&p);
                    assert!(!fitting.is_empty(), "{a} A, {b} B, {c} C");
                    assert!(fitting.iter().all(|v| v.check(&p).is_ok()));
                    assert!(fitting.len() < gemm_f16::variants().len());
                    let bf16 = gemm_bf16::Consts::variants_for(&p);
                    assert_eq!(bf16.len(), fitting.len(), "{a} A, {b} B, {c} C");
                }
            }
        }
    }
}
