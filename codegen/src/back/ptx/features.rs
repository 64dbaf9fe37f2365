//! What each PTX construct needs: the lowest `.version` and the lowest
//! target architecture, in ONE table. The emitter asks [`FeatureUse::require`]
//! before emitting a construct; the module's `.version` is the highest
//! version any used construct needs (at least the target's own base version).
//! Tensor Core, ldmatrix and cp.async constructs enter as new rows.
//!
//! Facts from the PTX ISA (docs/ptx.md, "Versions and targets"), each
//! confirmed by ptxas 12.9 refusing the construct one version or one target
//! below.

use crate::ir::{Arch, MmaKind, SparseMmaKind, WgmmaKind};

/// A PTX construct that not every target or version has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Feature {
    /// `cvt.f32.bf16`: widening bf16.
    Bf16ToF32,
    /// `cvt.rn.bf16.f32`: rounding to bf16 (every bf16 arithmetic result).
    F32ToBf16,
    /// `fma.rn.bf16`.
    FmaBf16,
    /// `tanh.approx.f32` (the emitter builds tanh from `ex2` without it).
    TanhApprox,
    /// `atom.add.noftz.f16`.
    AtomAddF16,
    /// `atom.add.noftz.bf16`.
    AtomAddBf16,
    /// `atom.cas.b16` (compare-exchange of f16/bf16).
    AtomCasB16,
    /// `fence.acq_rel.gpu`.
    GpuFence,
    /// `ldmatrix.sync.aligned.m8n8`.
    Ldmatrix,
    /// `mma.sync.aligned` of one sm_80 shape and type.
    Mma(MmaKind),
    /// `mma.sp.sync.aligned.m16n8k32` of one type, `::ordered_metadata` when `true`.
    MmaSparse(SparseMmaKind, bool),
    /// `wmma` m16n16k16 f16 loads, products and stores.
    Wmma,
    /// `cp.async` with `commit_group` and `wait_group` (sm_70 copies synchronously).
    CpAsync,
    /// `cvt.rn.f16x2.f32` (sm_70 packs two `cvt.rn.f16.f32` results).
    CvtF16x2,
    /// `cvt.rn.bf16x2.f32`.
    CvtBf16x2,
    /// `cvt.rna.tf32.f32`.
    CvtTf32,
    /// `mbarrier.init`.
    MbarrierInit,
    /// `mbarrier.arrive`.
    MbarrierArrive,
    /// `mbarrier.arrive.expect_tx`.
    MbarrierExpectTx,
    /// `mbarrier.try_wait.parity`.
    MbarrierTryWait,
    /// `fence.mbarrier_init.release.cluster`.
    MbarrierInitFence,
    /// `fence.proxy.async.shared::cta`.
    ProxyFence,
    /// `wgmma.fence`, `wgmma.commit_group` and `wgmma.wait_group`.
    WgmmaSync,
    /// `wgmma.mma_async` m64nNk of one input type.
    Wgmma(WgmmaKind),
    /// A `.param` tensor map (`#[tensor_map(..)]`), read through `cvta.param`.
    TensorMap,
    /// `cp.async.bulk.tensor` global to shared, completing on an mbarrier.
    TmaLoad,
    /// `cp.async.bulk.tensor` shared to global, its bulk groups and waits.
    TmaStore,
    /// `setmaxnreg.{inc,dec}`.
    SetMaxRegisters,
    /// `.reqnctapercluster` (`#[kernel(cluster(..))]`) and `%cluster_ctarank`.
    Cluster,
    /// `barrier.cluster.arrive` and `.wait`.
    ClusterBarrier,
    /// `mapa` and `mbarrier.arrive.shared::cluster`.
    MbarrierArriveCluster,
    /// `cp.async.bulk.tensor` global to shared with `.multicast::cluster`.
    TmaMulticast,
}

/// One row of the table.
pub struct FeatureInfo {
    /// What the user wrote that needs it, for messages.
    pub construct: &'static str,
    /// Lowest PTX ISA version, (major, minor).
    pub min_version: (u32, u32),
    /// Lowest compute capability, (major, minor).
    pub min_arch: (u32, u32),
    /// Whether only the arch-specific target of `min_arch` has it
    /// (`sm_90a`: ptxas refuses wgmma for plain `sm_90`).
    pub arch_specific: bool,
}

impl Feature {
    /// The construct's name (for messages) and the version and arch it needs.
    pub fn info(self) -> FeatureInfo {
        let (construct, min_version, min_arch) = match self {
            Feature::Bf16ToF32 => ("bf16 conversions (`cvt.f32.bf16`)", (7, 1), (8, 0)),
            Feature::F32ToBf16 => (
                "bf16 arithmetic and conversions (`cvt.rn.bf16.f32`)",
                (7, 0),
                (8, 0),
            ),
            Feature::FmaBf16 => ("`mul_add` on bf16 (`fma.rn.bf16`)", (7, 0), (8, 0)),
            Feature::TanhApprox => ("`tanh.approx.f32`", (7, 0), (7, 5)),
            Feature::AtomAddF16 => ("`atomic_add` on f16 (`atom.add.noftz.f16`)", (6, 3), (7, 0)),
            Feature::AtomAddBf16 => (
                "`atomic_add` on bf16 (`atom.add.noftz.bf16`)",
                (7, 8),
                (9, 0),
            ),
            Feature::AtomCasB16 => (
                "`atomic_compare_exchange` on 16-bit types (`atom.cas.b16`)",
                (6, 3),
                (7, 0),
            ),
            Feature::GpuFence => ("`fence_gpu` (`fence.acq_rel.gpu`)", (6, 0), (7, 0)),
            Feature::Ldmatrix => ("`ldmatrix_*` (`ldmatrix`)", (6, 5), (7, 5)),
            Feature::Mma(kind) => {
                let construct = match kind {
                    MmaKind::F16 => "`mma_m16n8k16_f16` (`mma.sync.aligned.m16n8k16` f16)",
                    MmaKind::Bf16 => "`mma_m16n8k16_bf16` (`mma.sync.aligned.m16n8k16` bf16)",
                    MmaKind::Tf32 => "`mma_m16n8k8_tf32` (`mma.sync.aligned.m16n8k8` tf32)",
                    MmaKind::S8 => "`mma_m16n8k32_s8` (`mma.sync.aligned.m16n8k32` s8)",
                    MmaKind::U8 => "`mma_m16n8k32_u8` (`mma.sync.aligned.m16n8k32` u8)",
                };
                (construct, (7, 0), (8, 0))
            }
            Feature::MmaSparse(kind, ordered) => match (kind, ordered) {
                (SparseMmaKind::F16, false) => (
                    "`mma_sp_m16n8k32_f16` (`mma.sp.sync.aligned.m16n8k32` f16)",
                    (7, 1),
                    (8, 0),
                ),
                (SparseMmaKind::Bf16, false) => (
                    "`mma_sp_m16n8k32_bf16` (`mma.sp.sync.aligned.m16n8k32` bf16)",
                    (7, 1),
                    (8, 0),
                ),
                (SparseMmaKind::F16, true) => (
                    "`mma_sp_ordered_m16n8k32_f16` (`mma.sp::ordered_metadata` m16n8k32 f16)",
                    (8, 5),
                    (8, 0),
                ),
                (SparseMmaKind::Bf16, true) => (
                    "`mma_sp_ordered_m16n8k32_bf16` (`mma.sp::ordered_metadata` m16n8k32 bf16)",
                    (8, 5),
                    (8, 0),
                ),
            },
            // `.aligned`, which every wmma form here carries, needs PTX 6.3.
            Feature::Wmma => ("`wmma_*` (`wmma` m16n16k16 f16)", (6, 3), (7, 0)),
            Feature::CpAsync => ("`cp_async` (`cp.async`)", (7, 0), (8, 0)),
            Feature::CvtF16x2 => ("`pack_f16x2` (`cvt.rn.f16x2.f32`)", (7, 0), (8, 0)),
            Feature::CvtBf16x2 => ("`pack_bf16x2` (`cvt.rn.bf16x2.f32`)", (7, 0), (8, 0)),
            Feature::CvtTf32 => ("`to_tf32` (`cvt.rna.tf32.f32`)", (7, 0), (8, 0)),
            Feature::MbarrierInit => ("`mbarrier_init` (`mbarrier.init`)", (7, 0), (8, 0)),
            Feature::MbarrierArrive => ("`mbarrier_arrive` (`mbarrier.arrive`)", (7, 0), (8, 0)),
            Feature::MbarrierExpectTx => (
                "`mbarrier_arrive_expect_tx` (`mbarrier.arrive.expect_tx`)",
                (8, 0),
                (9, 0),
            ),
            Feature::MbarrierTryWait => (
                "`mbarrier_wait` (`mbarrier.try_wait.parity`)",
                (7, 8),
                (9, 0),
            ),
            Feature::MbarrierInitFence => (
                "`fence_mbarrier_init` (`fence.mbarrier_init`)",
                (8, 0),
                (9, 0),
            ),
            Feature::ProxyFence => (
                "`fence_proxy_async` (`fence.proxy.async.shared::cta`)",
                (8, 0),
                (9, 0),
            ),
            Feature::WgmmaSync => (
                "`wgmma_fence`, `wgmma_commit` and `wgmma_wait` (`wgmma`)",
                (8, 0),
                (9, 0),
            ),
            Feature::Wgmma(kind) => {
                let construct = match kind {
                    WgmmaKind::F16 => "`wgmma_m64k16_f16` (`wgmma.mma_async` f16)",
                    WgmmaKind::Bf16 => "`wgmma_m64k16_bf16` (`wgmma.mma_async` bf16)",
                    WgmmaKind::Tf32 => "`wgmma_m64k8_tf32` (`wgmma.mma_async` tf32)",
                    WgmmaKind::S8 => "`wgmma_m64k32_s8` (`wgmma.mma_async` s8)",
                    WgmmaKind::U8 => "`wgmma_m64k32_u8` (`wgmma.mma_async` u8)",
                    WgmmaKind::E4m3 => "`wgmma_m64k32_e4m3` (`wgmma.mma_async` e4m3)",
                    WgmmaKind::E5m2 => "`wgmma_m64k32_e5m2` (`wgmma.mma_async` e5m2)",
                };
                (construct, (8, 0), (9, 0))
            }
            Feature::TensorMap => ("`#[tensor_map(..)]` (a TMA tensor map)", (8, 0), (9, 0)),
            Feature::TmaLoad => (
                "`tma_load` (`cp.async.bulk.tensor` global to shared)",
                (8, 0),
                (9, 0),
            ),
            Feature::TmaStore => (
                "`tma_store` and its waits (`cp.async.bulk.tensor` shared to global)",
                (8, 0),
                (9, 0),
            ),
            Feature::SetMaxRegisters => (
                "`setmaxnreg_inc`/`setmaxnreg_dec` (`setmaxnreg`)",
                (8, 0),
                (9, 0),
            ),
            Feature::Cluster => (
                "`cluster(..)` and `cluster_rank` (thread block clusters)",
                (7, 8),
                (9, 0),
            ),
            Feature::ClusterBarrier => ("`cluster_sync` (`barrier.cluster`)", (7, 8), (9, 0)),
            Feature::MbarrierArriveCluster => (
                "`mbarrier_arrive_cluster` (`mapa` and `mbarrier.arrive` at cluster scope)",
                (8, 0),
                (9, 0),
            ),
            Feature::TmaMulticast => (
                "`tma_load_multicast` (`cp.async.bulk.tensor` `.multicast::cluster`)",
                (8, 0),
                (9, 0),
            ),
        };
        FeatureInfo {
            construct,
            min_version,
            min_arch,
            arch_specific: matches!(
                self,
                Feature::WgmmaSync
                    | Feature::Wgmma(_)
                    | Feature::SetMaxRegisters
                    // ptxas advises sm_90a for multicast: the copy engine's
                    // multicast is not in the portable sm_90 set.
                    | Feature::TmaMulticast
            ),
        }
    }
}

impl FeatureInfo {
    /// Whether PTX for `arch` may use the construct.
    pub fn on(&self, arch: Arch) -> bool {
        let cc = arch.compute_capability();
        if self.arch_specific {
            arch.is_arch_specific() && cc == self.min_arch
        } else {
            cc >= self.min_arch
        }
    }

    /// The targets that have the construct, for messages: `sm_80 or newer`, `sm_90a`.
    pub fn targets(&self) -> String {
        let (major, minor) = self.min_arch;
        if self.arch_specific {
            format!("sm_{major}{minor}a")
        } else {
            format!("sm_{major}{minor} or newer")
        }
    }
}

/// The lowest `.version` that knows the target itself.
pub fn base_version(arch: Arch) -> (u32, u32) {
    match arch {
        Arch::Sm70 => (6, 0),
        Arch::Sm80 => (7, 0),
        Arch::Sm90 => (7, 8),
        Arch::Sm90a => (8, 0),
    }
}

/// The most shared memory one block may use on the target (with the
/// opt-in attribute above 48 KB), in bytes: 96 KB on sm_70, 163 KB on
/// sm_80, 227 KB on sm_90 (CUDA C Programming Guide, compute capabilities).
pub fn max_shared_bytes(arch: Arch) -> u32 {
    match arch {
        Arch::Sm70 => 96 * 1024,
        Arch::Sm80 => 163 * 1024,
        Arch::Sm90 | Arch::Sm90a => 227 * 1024,
    }
}

/// The features one module uses so far, and the `.version` they need.
pub struct FeatureUse {
    arch: Arch,
    version: (u32, u32),
}

impl FeatureUse {
    /// Nothing used yet on `arch`: the version is the lowest that knows the target.
    pub fn new(arch: Arch) -> FeatureUse {
        FeatureUse {
            arch,
            version: base_version(arch),
        }
    }

    /// Whether the target has `feature` (without using it).
    pub fn available(&self, feature: Feature) -> bool {
        feature.info().on(self.arch)
    }

    /// Records a use of `feature`, or says why the target lacks it.
    pub fn require(&mut self, feature: Feature) -> Result<(), String> {
        let info = feature.info();
        if !self.available(feature) {
            return Err(format!(
                "{}: needs {}, and this variant targets {}; \
                 drop {} from `arch(..)` or avoid the construct on it",
                info.construct,
                info.targets(),
                self.arch.name(),
                self.arch.name()
            ));
        }
        self.version = self.version.max(info.min_version);
        Ok(())
    }

    /// The `.version` the module must declare: the highest any recorded use needs.
    pub fn version(&self) -> (u32, u32) {
        self.version
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn using_a_feature_raises_the_version_only_as_far_as_needed() {
        let mut sm70 = FeatureUse::new(Arch::Sm70);
        assert_eq!(sm70.version(), (6, 0));
        sm70.require(Feature::AtomAddF16).unwrap();
        assert_eq!(sm70.version(), (6, 3));
        let mut sm80 = FeatureUse::new(Arch::Sm80);
        sm80.require(Feature::F32ToBf16).unwrap();
        assert_eq!(sm80.version(), (7, 0));
        sm80.require(Feature::Bf16ToF32).unwrap();
        assert_eq!(sm80.version(), (7, 1));
        let mut sm90 = FeatureUse::new(Arch::Sm90);
        sm90.require(Feature::Bf16ToF32).unwrap();
        assert_eq!(
            sm90.version(),
            (7, 8),
            "never below the target's own base version"
        );
        // sm_90a has everything sm_90 has, from PTX 8.0, which introduced it.
        let mut sm90a = FeatureUse::new(Arch::Sm90a);
        sm90a.require(Feature::AtomAddBf16).unwrap();
        assert_eq!(sm90a.version(), (8, 0));
    }

    #[test]
    fn sparse_mma_needs_ptx_7_1_and_ordered_metadata_8_5() {
        let mut plain = FeatureUse::new(Arch::Sm80);
        plain
            .require(Feature::MmaSparse(SparseMmaKind::F16, false))
            .unwrap();
        assert_eq!(plain.version(), (7, 1));
        let mut ordered = FeatureUse::new(Arch::Sm90);
        ordered
            .require(Feature::MmaSparse(SparseMmaKind::Bf16, true))
            .unwrap();
        assert_eq!(ordered.version(), (8, 5));
        assert!(
            !FeatureUse::new(Arch::Sm70).available(Feature::MmaSparse(SparseMmaKind::F16, true))
        );
    }

    #[test]
    fn a_missing_feature_names_the_construct_and_the_arch() {
        let mut sm80 = FeatureUse::new(Arch::Sm80);
        assert_eq!(
            sm80.require(Feature::AtomAddBf16).unwrap_err(),
            "`atomic_add` on bf16 (`atom.add.noftz.bf16`): needs sm_90 or newer, and this variant targets sm_80; \
             drop sm_80 from `arch(..)` or avoid the construct on it"
        );
        assert_eq!(sm80.version(), (7, 0), "a refused feature does not count");
    }
}
