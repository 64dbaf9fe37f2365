//! `cargo xtask build-ptx`: every variant of every stock kernel, for every
//! arch it targets, compiled to PTX, assembled by ptxas, and recorded in
//! `generated/`: a manifest of every variant's resource use and the reference
//! PTX of each kernel's first variant per arch.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use rayon::prelude::*;
use serde::Serialize;
use sha2::{Digest, Sha256};
use warpforge_codegen::back::ptx::PtxModule;
use warpforge_codegen::{Arch, KernelDef};

use crate::ptxas::{Ptxas, ResourceUsage};

/// The committed outputs, relative to the repository root.
const GENERATED_DIR: &str = "generated";
const MANIFEST_FILE: &str = "manifest.json";
const REFERENCE_PTX_DIR: &str = "ptx";
/// Where every variant's PTX and cubin are written to be assembled (not committed).
const SCRATCH_DIR: &str = "target/ptx";

/// One variant of one kernel for one arch, compiled and ready to assemble.
#[derive(Clone, Debug)]
pub struct Job {
    pub kernel: String,
    pub variant: String,
    /// In `ir.const_params` order.
    pub consts: Vec<i64>,
    pub arch: Arch,
    /// Whether this is the kernel's first variant, whose PTX is committed.
    pub reference: bool,
    /// Where its PTX goes, under `generated/ptx/` or the scratch folder.
    pub path: PathBuf,
    pub module: PtxModule,
}

/// Prints the PTX of one variant: `consts` is `NAME=value,..` for every const param.
pub fn print_variant(kernel: &str, consts: &str, arch: &str) -> Result<()> {
    let defs = warpforge_kernels::all();
    let Some(def) = defs.iter().find(|d| d.ir.name == kernel) else {
        let names: Vec<&str> = defs.iter().map(|d| d.ir.name.as_str()).collect();
        bail!(
            "no stock kernel is named `{kernel}`: the kernels are {}",
            names.join(", ")
        );
    };
    let Some(arch) = Arch::from_name(arch) else {
        bail!("unknown arch `{arch}`: use sm_70, sm_80, sm_90 or sm_90a");
    };
    let given: BTreeMap<&str, &str> = consts
        .split(',')
        .filter(|part| !part.is_empty())
        .map(|part| {
            part.split_once('=')
                .with_context(|| format!("`{part}` is not NAME=value"))
        })
        .collect::<Result<_>>()?;
    let mut values = Vec::new();
    for param in &def.ir.const_params {
        let Some(text) = given.get(param.name.as_str()) else {
            bail!(
                "give a value for every const param of `{kernel}`: `{}` is missing",
                param.name
            );
        };
        values.push(match *text {
            "true" => 1,
            "false" => 0,
            number => number
                .parse()
                .with_context(|| format!("`{}={number}` is not an integer", param.name))?,
        });
    }
    let module = warpforge_codegen::compile_ptx(def, &values, arch)?;
    print!("{}", module.text);
    Ok(())
}

/// `<kernel>/<arch>/<kernel>.BM=64.BN=128.ptx`: readable, stable, one file per variant.
fn ptx_path(def: &KernelDef, consts: &[i64], arch: Arch) -> PathBuf {
    let mut file = def.ir.name.clone();
    for (param, value) in def.ir.const_params.iter().zip(consts) {
        file.push_str(&format!(".{}={value}", param.name));
    }
    file.push_str(".ptx");
    [&def.ir.name, arch.name(), &file].iter().collect()
}

/// One line of `generated/manifest.json`.
#[derive(Clone, Debug, PartialEq, Serialize)]
struct ManifestEntry {
    kernel: String,
    variant: String,
    consts: Vec<i64>,
    arch: &'static str,
    ptx_version: String,
    registers: u32,
    /// Static shared memory (ptxas) plus the dynamic shared memory the launch asks for.
    shared_bytes: u32,
    stack_frame_bytes: u32,
    spill_store_bytes: u32,
    spill_load_bytes: u32,
    ptx_sha256: String,
}

#[derive(Serialize)]
struct Manifest<'a> {
    /// Resource counts depend on the ptxas release; kept so a diff can be explained.
    ptxas: &'a str,
    variants: Vec<ManifestEntry>,
}

/// Everything under `generated/` that build-ptx owns, by path relative to
/// `generated/`, and the variants that spill.
pub struct Outputs {
    pub files: BTreeMap<PathBuf, String>,
    pub spilling: Vec<String>,
}

/// `cargo xtask build-ptx`: writes `generated/`, removing stale reference PTX.
pub fn build(repo: &Path, ptxas: &Ptxas) -> Result<()> {
    let outputs = generate(repo, ptxas, &warpforge_kernels::all())?;
    let generated = repo.join(GENERATED_DIR);
    for stale in committed_files(&generated)?.difference(&outputs.files.keys().cloned().collect()) {
        std::fs::remove_file(generated.join(stale)).with_context(|| {
            format!("could not remove stale {}", generated.join(stale).display())
        })?;
        println!("removed generated/{}", stale.display());
        // Drop the folders that held only stale files; remove_dir refuses non-empty ones.
        for folder in stale
            .ancestors()
            .skip(1)
            .take_while(|f| f.starts_with(REFERENCE_PTX_DIR))
        {
            if std::fs::remove_dir(generated.join(folder)).is_err() {
                break;
            }
        }
    }
    for (relative, text) in &outputs.files {
        let path = generated.join(relative);
        if std::fs::read_to_string(&path).ok().as_deref() == Some(text.as_str()) {
            continue;
        }
        std::fs::create_dir_all(path.parent().expect("generated files have a parent"))
            .with_context(|| format!("could not create the folder of {}", path.display()))?;
        std::fs::write(&path, text)
            .with_context(|| format!("could not write {}", path.display()))?;
        println!("wrote generated/{}", relative.display());
    }
    report_spills(&outputs.spilling);
    println!(
        "build-ptx: generated/ is up to date ({} file(s))",
        outputs.files.len()
    );
    Ok(())
}

/// `cargo xtask build-ptx --check`: regenerates and compares with `generated/`
/// without touching it.
pub fn check(repo: &Path, ptxas: &Ptxas) -> Result<()> {
    let outputs = generate(repo, ptxas, &warpforge_kernels::all())?;
    report_spills(&outputs.spilling);
    let generated = repo.join(GENERATED_DIR);
    let problems = compare(&generated, &outputs.files)?;
    if !problems.is_empty() {
        bail!(
            "generated/ is out of date:\n  {}\n{}run `cargo xtask build-ptx` and commit the result",
            problems.join("\n  "),
            ptxas_mismatch_hint(&generated, ptxas)
        );
    }
    println!(
        "build-ptx --check: generated/ is up to date ({} file(s))",
        outputs.files.len()
    );
    Ok(())
}

/// Resource counts change with the ptxas release: when the committed manifest
/// was made with another one, say so, since that alone makes it stale.
fn ptxas_mismatch_hint(generated: &Path, ptxas: &Ptxas) -> String {
    let committed = std::fs::read_to_string(generated.join(MANIFEST_FILE))
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .and_then(|manifest| manifest["ptxas"].as_str().map(str::to_string));
    match committed {
        Some(version) if version != ptxas.version => format!(
            "generated/manifest.json was made with ptxas {version}, this is ptxas {} ({}): \
             point PTXAS at that release, or\n",
            ptxas.version,
            ptxas.path.display()
        ),
        _ => String::new(),
    }
}

fn report_spills(spilling: &[String]) {
    if !spilling.is_empty() {
        println!(
            "warning: {} variant(s) spill registers to local memory: {}",
            spilling.len(),
            spilling.join(", ")
        );
    }
}

/// Lines naming every file that differs between `generated` and `expected`.
fn compare(generated: &Path, expected: &BTreeMap<PathBuf, String>) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    for (relative, text) in expected {
        match std::fs::read_to_string(generated.join(relative)) {
            Ok(committed) if committed == *text => {}
            Ok(_) => problems.push(format!("stale: generated/{}", relative.display())),
            Err(_) => problems.push(format!("missing: generated/{}", relative.display())),
        }
    }
    for extra in committed_files(generated)?
        .iter()
        .filter(|p| !expected.contains_key(*p))
    {
        problems.push(format!("extra: generated/{}", extra.display()));
    }
    Ok(problems)
}

/// The files build-ptx owns that exist now: the manifest and everything under `ptx/`.
fn committed_files(generated: &Path) -> Result<BTreeSet<PathBuf>> {
    let mut files = BTreeSet::new();
    if generated.join(MANIFEST_FILE).is_file() {
        files.insert(PathBuf::from(MANIFEST_FILE));
    }
    let mut folders = vec![PathBuf::from(REFERENCE_PTX_DIR)];
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(generated.join(&folder)) else {
            continue;
        };
        for entry in entries {
            let entry =
                entry.with_context(|| format!("could not list generated/{}", folder.display()))?;
            let relative = folder.join(entry.file_name());
            if entry.path().is_dir() {
                folders.push(relative);
            } else {
                files.insert(relative);
            }
        }
    }
    Ok(files)
}

/// Compiles, assembles and renders every variant of `defs`.
pub fn generate(repo: &Path, ptxas: &Ptxas, defs: &[&KernelDef]) -> Result<Outputs> {
    let mut names = BTreeSet::new();
    for def in defs {
        if !names.insert(&def.ir.name) {
            bail!(
                "two stock kernels are named `{}`; rename one (generated/ is laid out by kernel name)",
                def.ir.name
            );
        }
    }
    let jobs = compile(defs)?;
    let usages = assemble(ptxas, &jobs, &repo.join(SCRATCH_DIR))?;
    Ok(render(ptxas, &jobs, &usages))
}

/// Builds the PTX of every (kernel, variant, arch), in parallel. Fails with
/// every variant that does not compile.
fn compile(defs: &[&KernelDef]) -> Result<Vec<Job>> {
    let specs: Vec<(&KernelDef, Vec<i64>, Arch, bool)> = defs
        .iter()
        .flat_map(|def| {
            def.variants()
                .into_iter()
                .enumerate()
                .flat_map(move |(index, consts)| {
                    def.targets
                        .iter()
                        .filter_map(|target| target.arch())
                        .map(move |arch| (*def, consts.clone(), arch, index == 0))
                })
        })
        .collect();
    let results: Vec<Result<Job, String>> = specs
        .into_par_iter()
        .map(|(def, consts, arch, reference)| {
            let variant = def.variant_name(&consts);
            match warpforge_codegen::compile_ptx(def, &consts, arch) {
                Ok(module) => Ok(Job {
                    kernel: def.ir.name.clone(),
                    variant,
                    path: ptx_path(def, &consts, arch),
                    consts,
                    arch,
                    reference,
                    module,
                }),
                Err(error) => Err(format!("{variant} for {}: {error}", arch.name())),
            }
        })
        .collect();
    collect_failures(results, "compile to PTX")
}

/// Writes each job's PTX to `scratch/<path>` and assembles it with ptxas, in
/// parallel. Fails with every variant that ptxas rejects and ptxas's message.
pub fn assemble(ptxas: &Ptxas, jobs: &[Job], scratch: &Path) -> Result<Vec<ResourceUsage>> {
    let results: Vec<Result<ResourceUsage, String>> = jobs
        .par_iter()
        .map(|job| {
            let ptx_file = scratch.join(&job.path);
            let written =
                std::fs::create_dir_all(ptx_file.parent().expect("PTX paths have a parent"))
                    .and_then(|()| std::fs::write(&ptx_file, &job.module.text));
            if let Err(error) = written {
                return Err(format!("could not write {}: {error}", ptx_file.display()));
            }
            ptxas
                .assemble(
                    &ptx_file,
                    &ptx_file.with_extension("cubin"),
                    job.arch,
                    &job.module.entry,
                )
                .map_err(|error| {
                    format!(
                        "{} for {} ({}): {error:#}",
                        job.variant,
                        job.arch.name(),
                        ptx_file.display()
                    )
                })
        })
        .collect();
    collect_failures(results, "assemble with ptxas")
}

/// All the values, or one error that lists every failure.
fn collect_failures<T>(results: Vec<Result<T, String>>, what: &str) -> Result<Vec<T>> {
    let mut values = Vec::new();
    let mut failures = Vec::new();
    for result in results {
        match result {
            Ok(value) => values.push(value),
            Err(failure) => failures.push(failure),
        }
    }
    if !failures.is_empty() {
        bail!(
            "{} variant(s) failed to {what}:\n{}",
            failures.len(),
            failures.join("\n\n")
        );
    }
    Ok(values)
}

/// The manifest and the reference PTX files, by path relative to `generated/`.
pub fn render(ptxas: &Ptxas, jobs: &[Job], usages: &[ResourceUsage]) -> Outputs {
    let mut files = BTreeMap::new();
    let mut variants = Vec::new();
    let mut spilling = Vec::new();
    for (job, usage) in jobs.iter().zip(usages) {
        if job.reference {
            files.insert(
                Path::new(REFERENCE_PTX_DIR).join(&job.path),
                job.module.text.clone(),
            );
        }
        if usage.spill_store_bytes > 0 || usage.spill_load_bytes > 0 {
            spilling.push(format!("{} for {}", job.variant, job.arch.name()));
        }
        let (major, minor) = job.module.version;
        variants.push(ManifestEntry {
            kernel: job.kernel.clone(),
            variant: job.variant.clone(),
            consts: job.consts.clone(),
            arch: job.arch.name(),
            ptx_version: format!("{major}.{minor}"),
            registers: usage.registers,
            shared_bytes: usage.static_shared_bytes + job.module.shared_bytes,
            stack_frame_bytes: usage.stack_frame_bytes,
            spill_store_bytes: usage.spill_store_bytes,
            spill_load_bytes: usage.spill_load_bytes,
            ptx_sha256: sha256_hex(&job.module.text),
        });
    }
    variants.sort_by(|a, b| (&a.kernel, a.arch, &a.consts).cmp(&(&b.kernel, b.arch, &b.consts)));
    spilling.sort();
    let manifest = Manifest {
        ptxas: &ptxas.version,
        variants,
    };
    let mut json = serde_json::to_string_pretty(&manifest).expect("the manifest always serializes");
    json.push('\n');
    files.insert(PathBuf::from(MANIFEST_FILE), json);
    Outputs { files, spilling }
}

fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::OnceLock;

    use super::*;

    /// Hand-written PTX in the shape the backend emits: one entry, dynamic
    /// shared memory declared extern, a static shared array.
    fn saxpy_ptx(arch: Arch, body_fma: &str) -> String {
        format!(
            ".version 7.8
.target {arch}
.address_size 64

.extern .shared .align 16 .b8 dynamic_smem[];

.visible .entry saxpy(
	.param .f32 saxpy_param_0,
	.param .u64 saxpy_param_1,
	.param .u64 saxpy_param_2,
	.param .u32 saxpy_param_3
)
{{
	.reg .pred 	%p<2>;
	.reg .f32 	%f<5>;
	.reg .b32 	%r<6>;
	.reg .b64 	%rd<8>;
	.shared .align 4 .b8 tile[1024];

	ld.param.f32 	%f1, [saxpy_param_0];
	ld.param.u64 	%rd1, [saxpy_param_1];
	ld.param.u64 	%rd2, [saxpy_param_2];
	ld.param.u32 	%r2, [saxpy_param_3];
	mov.u32 	%r3, %ctaid.x;
	mov.u32 	%r4, %ntid.x;
	mov.u32 	%r5, %tid.x;
	mad.lo.s32 	%r1, %r3, %r4, %r5;
	setp.ge.u32 	%p1, %r1, %r2;
	@%p1 bra 	$L__BB0_2;
	cvta.to.global.u64 	%rd3, %rd1;
	mul.wide.u32 	%rd4, %r1, 4;
	add.s64 	%rd5, %rd3, %rd4;
	ld.global.f32 	%f2, [%rd5];
	cvta.to.global.u64 	%rd6, %rd2;
	add.s64 	%rd7, %rd6, %rd4;
	ld.global.f32 	%f3, [%rd7];
	{body_fma} 	%f4, %f2, %f1, %f3;
	st.global.f32 	[%rd7], %f4;
	st.shared.f32 	[tile], %f4;
	st.shared.f32 	[dynamic_smem], %f4;
$L__BB0_2:
	ret;
}}
",
            arch = arch.name()
        )
    }

    /// A kernel with an empty body: enough for naming.
    fn kernel_def(name: &str, const_names: &[&str]) -> KernelDef {
        use warpforge_codegen::ir::{ConstParam, Kernel, Scalar};
        KernelDef::new(
            Kernel {
                name: name.into(),
                const_params: const_names
                    .iter()
                    .map(|name| ConstParam {
                        name: name.to_string(),
                        ty: Scalar::U32,
                    })
                    .collect(),
                params: Vec::new(),
                locals: Vec::new(),
                block: None,
                cluster: None,
                min_blocks_per_sm: None,
                requires: Vec::new(),
                body: Vec::new(),
            },
            Arch::ALL
                .into_iter()
                .map(warpforge_codegen::Target::Ptx)
                .collect(),
            Vec::new(),
            Vec::new(),
        )
    }

    fn saxpy_job(arch: Arch, block: u32, fma: &str) -> Job {
        let def = kernel_def("saxpy", &["BLOCK"]);
        let consts = vec![i64::from(block)];
        Job {
            kernel: "saxpy".into(),
            variant: def.variant_name(&consts),
            consts: consts.clone(),
            arch,
            reference: block == 128,
            path: ptx_path(&def, &consts, arch),
            module: PtxModule {
                text: saxpy_ptx(arch, fma),
                entry: "saxpy".into(),
                shared_bytes: 512,
                block: Some([block, 1, 1]),
                cluster: None,
                version: (7, 8),
            },
        }
    }

    /// Found once per test binary, so that parallel tests never install it twice at once.
    fn ptxas() -> Ptxas {
        static PTXAS: OnceLock<Ptxas> = OnceLock::new();
        PTXAS
            .get_or_init(|| {
                Ptxas::find(&crate::repo_root())
                    .expect("the pipeline test needs ptxas: run `cargo xtask ptxas` or set PTXAS")
            })
            .clone()
    }

    #[test]
    fn assembles_every_arch_and_renders_the_manifest() {
        let ptxas = ptxas();
        let scratch = tempfile::tempdir().unwrap();
        // Deliberately out of order: the manifest sorts by kernel, arch, consts.
        let jobs: Vec<Job> = [
            (Arch::Sm90, 256),
            (Arch::Sm70, 128),
            (Arch::Sm80, 128),
            (Arch::Sm90, 128),
        ]
        .into_iter()
        .map(|(arch, block)| saxpy_job(arch, block, "fma.rn.f32"))
        .collect();
        let usages = assemble(&ptxas, &jobs, scratch.path()).unwrap();
        assert!(scratch
            .path()
            .join("saxpy/sm_70/saxpy.BLOCK=128.cubin")
            .is_file());
        let outputs = render(&ptxas, &jobs, &usages);

        let names: Vec<String> = outputs
            .files
            .keys()
            .map(|p| p.display().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "manifest.json",
                "ptx/saxpy/sm_70/saxpy.BLOCK=128.ptx",
                "ptx/saxpy/sm_80/saxpy.BLOCK=128.ptx",
                "ptx/saxpy/sm_90/saxpy.BLOCK=128.ptx",
            ]
        );
        assert!(outputs.spilling.is_empty());

        let manifest: serde_json::Value =
            serde_json::from_str(&outputs.files[Path::new("manifest.json")]).unwrap();
        assert_eq!(manifest["ptxas"], ptxas.version.as_str());
        let variants = manifest["variants"].as_array().unwrap();
        let order: Vec<(&str, i64)> = variants
            .iter()
            .map(|v| {
                (
                    v["arch"].as_str().unwrap(),
                    v["consts"][0].as_i64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            order,
            [
                ("sm_70", 128),
                ("sm_80", 128),
                ("sm_90", 128),
                ("sm_90", 256)
            ]
        );
        for variant in variants {
            // 1024 static bytes from ptxas plus the module's 512 dynamic ones.
            assert_eq!(variant["shared_bytes"], 1536, "{variant}");
            assert_eq!(variant["ptx_version"], "7.8");
            assert_eq!(variant["spill_store_bytes"], 0);
            assert!(variant["registers"].as_u64().unwrap() > 0, "{variant}");
            assert_eq!(variant["ptx_sha256"].as_str().unwrap().len(), 64);
        }
    }

    #[test]
    fn ptxas_failures_name_kernel_variant_arch_and_message() {
        let ptxas = ptxas();
        let scratch = tempfile::tempdir().unwrap();
        let jobs = vec![
            saxpy_job(Arch::Sm80, 128, "fma.rn.f32"),
            saxpy_job(Arch::Sm70, 128, "fmaa.rn.f32"),
        ];
        let error = assemble(&ptxas, &jobs, scratch.path())
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("1 variant(s) failed to assemble with ptxas"),
            "{error}"
        );
        assert!(error.contains("saxpy[BLOCK=128] for sm_70"), "{error}");
        assert!(
            error.contains("Not a name of any known instruction: 'fmaa'"),
            "{error}"
        );
    }

    #[test]
    fn ptx_paths_name_the_kernel_arch_and_every_const() {
        let def = kernel_def("gemm_f32", &["BM", "BK"]);
        assert_eq!(
            ptx_path(&def, &[64, -8], Arch::Sm80),
            Path::new("gemm_f32/sm_80/gemm_f32.BM=64.BK=-8.ptx")
        );
        let def = kernel_def("saxpy", &[]);
        assert_eq!(
            ptx_path(&def, &[], Arch::Sm90),
            Path::new("saxpy/sm_90/saxpy.ptx")
        );
    }

    #[test]
    fn check_lists_stale_missing_and_extra_files() {
        let generated = tempfile::tempdir().unwrap();
        let root = generated.path();
        std::fs::create_dir_all(root.join("ptx/old/sm_80")).unwrap();
        std::fs::write(root.join("ptx/old/sm_80/old.ptx"), "x").unwrap();
        std::fs::write(root.join("manifest.json"), "{}\n").unwrap();
        std::fs::write(root.join("README.md"), "not owned by build-ptx").unwrap();
        let expected = BTreeMap::from([
            (
                PathBuf::from("manifest.json"),
                "{ \"variants\": [] }\n".to_string(),
            ),
            (PathBuf::from("ptx/new/sm_80/new.ptx"), "y".to_string()),
        ]);
        assert_eq!(
            compare(root, &expected).unwrap(),
            [
                "stale: generated/manifest.json",
                "missing: generated/ptx/new/sm_80/new.ptx",
                "extra: generated/ptx/old/sm_80/old.ptx",
            ]
        );
        std::fs::write(
            root.join("manifest.json"),
            &expected[Path::new("manifest.json")],
        )
        .unwrap();
        std::fs::remove_dir_all(root.join("ptx/old")).unwrap();
        std::fs::create_dir_all(root.join("ptx/new/sm_80")).unwrap();
        std::fs::write(root.join("ptx/new/sm_80/new.ptx"), "y").unwrap();
        assert!(compare(root, &expected).unwrap().is_empty());
    }
}
