//! One input through what the macro and a program do with it: the front
//! (`parse_item`, the kernel's instances or the device function's check,
//! the stubs the macro emits for a rejected kernel), and for each accepted
//! kernel the trip through JSON, then specialization, validation and
//! emission of some of its variants for each of its targets, the WGSL
//! validated by naga here and the PTX handed back for ptxas.

use proc_macro2::TokenStream;
use warpforge_codegen::front::{self, Linked};
use warpforge_codegen::{compile_ptx, compile_wgsl, Arch, KernelDef, Target};

use crate::common::naga_check;
use crate::corpus::Corpus;
use crate::mutate::{Input, Rng};

/// The variants compiled per kernel: the first, the last and one between,
/// so that a large tune space does not take the input's time.
const MAX_VARIANTS: usize = 3;

/// The block a kernel without `block(..)` is compiled for as WGSL.
const WGSL_LAUNCH_BLOCK: [u32; 3] = [64, 1, 1];

/// What one input came to.
#[derive(Default)]
pub struct Outcome {
    /// The front accepted it (every item of it).
    pub accepted: bool,
    /// Variants built for a target without error.
    pub built: usize,
    /// Failures: an error of specialization, validation or a backend on
    /// input the front accepted, naga rejecting WGSL the backend emitted
    /// without error, a definition that does not survive its trip through
    /// JSON.
    pub failures: Vec<String>,
    /// The PTX emitted without error, for ptxas.
    pub ptx: Vec<(Arch, String)>,
}

pub fn run(corpus: &Corpus, input: &Input, rng: &mut Rng) -> Outcome {
    let mut outcome = Outcome::default();
    let mut linked = match &input.device {
        None => None,
        Some((slot, source)) => {
            let Ok(item) = parse_item(source) else {
                return outcome;
            };
            let linked = corpus.linked_with(*slot, item);
            if front::check_device(&linked, &linked.functions[*slot].id).is_err() {
                return outcome;
            }
            Some(linked)
        }
    };
    let Some((attr, source)) = &input.kernel else {
        outcome.accepted = true;
        return outcome;
    };
    let (Ok(attr), Ok(item)) = (attr.parse::<TokenStream>(), parse_item(source)) else {
        return outcome;
    };
    let linked = linked.get_or_insert_with(|| Linked {
        functions: corpus.linked.functions.clone(),
        calls: Vec::new(),
    });
    linked.calls = front::calls_by_name(&item, linked);
    let instances = match front::parse_kernel_instances(attr.clone(), &item, linked) {
        Ok(instances) => instances,
        Err(_) => {
            // What the macro expands a rejected kernel to.
            front::stub_instances(attr, &item);
            return outcome;
        }
    };
    outcome.accepted = true;
    for (_, def) in &instances {
        build(def, rng, &mut outcome);
    }
    outcome
}

fn parse_item(source: &str) -> Result<syn::ItemFn, ()> {
    let tokens: TokenStream = source.parse().map_err(drop)?;
    front::parse_item(tokens).map_err(drop)
}

fn build(def: &KernelDef, rng: &mut Rng, outcome: &mut Outcome) {
    def.ir_digest();
    // Compared as JSON: a NaN literal is unequal to itself as a value.
    let json = def.to_json();
    match KernelDef::from_json(&json) {
        Ok(back) if back.to_json() == json => {}
        Ok(_) => outcome.failures.push(format!(
            "{}: its JSON reads back as another definition",
            def.ir.name
        )),
        Err(e) => outcome
            .failures
            .push(format!("{}: its JSON does not read back: {e}", def.ir.name)),
    }
    let variants = def.variants();
    let mut chosen: Vec<&Vec<i64>> = variants.iter().take(1).collect();
    if variants.len() > 1 {
        chosen.push(&variants[variants.len() - 1]);
    }
    if variants.len() > 2 {
        chosen.push(&variants[1 + rng.below(variants.len() - 2)]);
    }
    for consts in chosen.into_iter().take(MAX_VARIANTS) {
        for target in &def.targets {
            let name = format!("{} for {}", def.variant_name(consts), target.name());
            match *target {
                Target::Ptx(arch) => match compile_ptx(def, consts, arch) {
                    Ok(module) => {
                        outcome.built += 1;
                        outcome.ptx.push((arch, module.text));
                    }
                    Err(e) => outcome.failures.push(refused(&name, &e.message)),
                },
                Target::Wgsl => {
                    let block = def.ir.block.is_none().then_some(WGSL_LAUNCH_BLOCK);
                    match compile_wgsl(def, consts, block) {
                        Ok(module) => {
                            outcome.built += 1;
                            if let Err(e) = naga_check(&module.text) {
                                outcome.failures.push(format!(
                                    "{name}: naga rejects the WGSL:\n{e}\n{}",
                                    module.text
                                ));
                            }
                        }
                        Err(e) => outcome.failures.push(refused(&name, &e.message)),
                    }
                }
            }
        }
    }
}

/// The failure of codegen refusing a variant the front accepted: the front
/// specializes and validates every variant, and its target checks cover
/// the backends, so such an error would reach the user at build or launch
/// time instead of at its span.
fn refused(variant: &str, message: &str) -> String {
    format!("{variant}: the front accepted it, but codegen refuses it: {message}")
}
