//! IR passes and the one ordered pipeline that runs them.
//!
//! Each pass lives in its own file with its pre/postconditions and is run
//! through the [`Pass`] trait, which states the IR forms it accepts and
//! leaves. The program-level validator (layouts, schedule, views and every
//! kernel) runs after every pass when `PassOptions::validate` is set (tests
//! and debug builds set it), and otherwise (release) once, on the result:
//! every compile that hands IR to a backend has passed the validator, so
//! "valid IR never makes a code generator panic" is the contract backends
//! are held to, and `weft_codegen::guard`'s `catch_unwind` only a last
//! resort for a bug in a generator or a dependency. The order is the "lowering order" contract:
//! front end → inline → const-fold → simplify (and squared-norm comparisons) → optimize → autodiff → views
//! → schedule (explicit list steps; with `interkernel`, redundant clears, dead stores and list reuse) → access lowering
//! (and the sparse system kernels and struct-for) → fold, simplify and CSE
//! the address arithmetic, drop bounds checks proven by index ranges → store fusion → atomic demotion → legalize → CSE
//! → LICM → CSE → zero-fill detection → backend.

pub mod atomic_demotion;
pub mod autodiff;
pub mod block_loops;
pub mod bounds_elim;
pub mod const_fold;
pub mod cse;
pub mod half;
pub mod inline;
pub mod legalize;
pub mod licm;
pub mod lower_access;
pub mod norm_compare;
pub mod optimize;
pub mod simplify;
pub mod sparse_clear;
pub mod sparse_gc;
pub mod sparse_iter;
pub mod sparse_list;
pub mod store_fusion;
pub mod termination;
pub mod unroll;
pub mod views;
pub mod zero_fill;

use crate::ir::{validate_program, IrForm, Program, Span};

/// Runs a function pass on every kernel's entry and helper functions.
pub(crate) fn each_function(program: &mut Program, mut pass: impl FnMut(&mut crate::ir::Function)) {
    for k in program.kernels.handles().collect::<Vec<_>>() {
        let kernel = &mut program.kernels[k];
        pass(&mut kernel.entry);
        for fid in kernel.functions.handles().collect::<Vec<_>>() {
            pass(&mut kernel.functions[fid]);
        }
    }
}

#[derive(Clone, Debug)]
pub struct PassOptions {
    /// Insert bounds checks on field accesses (run-time errors instead of wrong memory).
    pub bounds_checks: bool,
    /// Run the IR validator after every pass (else only once, on the
    /// pipeline's result: see [`run_pipeline`]).
    pub validate: bool,
    /// Run `store_fusion` and `atomic_demotion` (they change no result;
    /// tests turn them off to show that).
    pub packed_word_rewrites: bool,
    /// How far short constant loops unroll (a backend's choice: results
    /// never depend on it).
    pub unroll: unroll::UnrollOptions,
    /// What the target backend has natively (`legalize` writes the rest in
    /// plain IR). The baseline compiles for every backend.
    pub target: legalize::TargetCaps,
    /// Run the inter-kernel optimiser over the schedule
    /// (`crate::schedule`: redundant clears, dead stores, list reuse);
    /// `--no-interkernel` turns it off. Results never depend on it.
    pub interkernel: bool,
}

impl Default for PassOptions {
    fn default() -> Self {
        PassOptions {
            bounds_checks: true,
            validate: cfg!(debug_assertions),
            packed_word_rewrites: true,
            unroll: unroll::UnrollOptions::default(),
            target: legalize::TargetCaps::BASELINE,
            interkernel: true,
        }
    }
}

/// One step of the pipeline.
pub trait Pass {
    fn name(&self) -> &'static str;
    /// Whether the pass may run on IR of this form (its precondition).
    fn accepts(&self, form: IrForm) -> bool;
    /// The form the pass leaves, given the form it got (its postcondition).
    fn output(&self, input: IrForm) -> IrForm {
        input
    }
    /// Runs the pass; only passes that can meet user-facing limits (autodiff)
    /// return an error.
    fn run(&self, program: &mut Program) -> Result<(), PassError>;
}

/// `half`: f16 compute values as f32 operations with binary16 rounding.
/// A pass that is one function over the program and cannot fail: its
/// name, the forms it accepts (leaving the form as it was) and the
/// function. Most passes, the schedule's included, are one.
#[derive(Clone, Copy)]
struct Simple {
    name: &'static str,
    accepts: fn(IrForm) -> bool,
    run: fn(&mut Program),
}

impl Pass for Simple {
    fn name(&self) -> &'static str {
        self.name
    }
    fn accepts(&self, form: IrForm) -> bool {
        (self.accepts)(form)
    }
    fn run(&self, program: &mut Program) -> Result<(), PassError> {
        (self.run)(program);
        Ok(())
    }
}

fn abstract_ir(form: IrForm) -> bool {
    form == IrForm::Abstract
}
fn lowered(form: IrForm) -> bool {
    form == IrForm::Lowered
}
fn legalized(form: IrForm) -> bool {
    form == IrForm::Legalized
}
fn not_legalized(form: IrForm) -> bool {
    form != IrForm::Legalized
}
fn any_form(_: IrForm) -> bool {
    true
}

const fn simple(name: &'static str, accepts: fn(IrForm) -> bool, run: fn(&mut Program)) -> Simple {
    Simple { name, accepts, run }
}

const INLINE: Simple = simple("inline", abstract_ir, inline::run);
const CONST_FOLD: Simple = simple("const_fold", not_legalized, const_fold::run);
const HALF: Simple = simple("half", abstract_ir, half::run);
const SIMPLIFY: Simple = simple("simplify", not_legalized, simplify::run);
const CSE: Simple = simple("cse", any_form, cse::run);
const LICM: Simple = simple("licm", any_form, licm::run);
const BOUNDS_ELIM: Simple = simple("bounds_elim", lowered, bounds_elim::run);
const STORE_FUSION: Simple = simple("store_fusion", lowered, store_fusion::run);
const ATOMIC_DEMOTION: Simple = simple("atomic_demotion", lowered, atomic_demotion::run);
const NORM_COMPARE: Simple = simple("norm_compare", any_form, norm_compare::run);
const ZERO_FILL_DETECT: Simple = simple("zero_fill", legalized, zero_fill::run);
const TERMINATION: Simple = simple("termination", lowered, termination::run);
const SPARSE_SYSTEM: Simple = simple("sparse_system", lowered, sparse_system);

struct LowerAccess {
    bounds_checks: bool,
    /// Activation demotion (part of the inter-kernel optimiser).
    demote: bool,
}
/// `legalize` for a target with these capabilities.
struct Legalize(legalize::TargetCaps);
struct Unroll(unroll::UnrollOptions);
/// `sparse_iter`, `sparse_list` then `sparse_gc`: struct-for over sparse
/// fields (over element lists), the list-generation and the
/// garbage-collection system kernels, all written in lowered IR.
fn sparse_system(program: &mut Program) {
    let users = sparse_iter::run(program);
    sparse_list::run(program, &users);
    sparse_gc::run(program);
}

struct Autodiff;

/// Views become system kernels and image fields (`views`), after the
/// schedule's kernels are final so that no tape differentiates them.
struct Views;

impl Pass for Views {
    fn name(&self) -> &'static str {
        "views"
    }
    fn accepts(&self, form: IrForm) -> bool {
        form == IrForm::Abstract
    }
    fn run(&self, program: &mut Program) -> Result<(), PassError> {
        views::run(program)
    }
}

/// `optimize` nodes become repeats of tapes and update kernels (before `Autodiff`).
struct Optimize;

impl Pass for Optimize {
    fn name(&self) -> &'static str {
        "optimize"
    }
    fn accepts(&self, form: IrForm) -> bool {
        form == IrForm::Abstract
    }
    fn run(&self, program: &mut Program) -> Result<(), PassError> {
        optimize::run(program)
    }
}

impl Pass for Autodiff {
    fn name(&self) -> &'static str {
        "autodiff"
    }
    fn accepts(&self, form: IrForm) -> bool {
        form == IrForm::Abstract
    }
    fn run(&self, program: &mut Program) -> Result<(), PassError> {
        autodiff::run(program).map_err(|e| PassError {
            pass: "autodiff",
            kernel: e.node,
            message: e.message,
            user: Some(e.span),
        })
    }
}

impl Pass for LowerAccess {
    fn name(&self) -> &'static str {
        "lower_access"
    }
    fn accepts(&self, form: IrForm) -> bool {
        form == IrForm::Abstract
    }
    fn output(&self, _: IrForm) -> IrForm {
        IrForm::Lowered
    }
    fn run(&self, program: &mut Program) -> Result<(), PassError> {
        lower_access::run(program, self.bounds_checks, self.demote);
        // `clear` steps become system kernels in lowered IR; no lowered
        // program ever holds one.
        sparse_clear::run(program);
        Ok(())
    }
}

impl Pass for Unroll {
    fn name(&self) -> &'static str {
        "unroll"
    }
    fn accepts(&self, form: IrForm) -> bool {
        form != IrForm::Legalized
    }
    fn run(&self, program: &mut Program) -> Result<(), PassError> {
        unroll::run(program, self.0);
        Ok(())
    }
}

impl Pass for Legalize {
    fn name(&self) -> &'static str {
        "legalize"
    }
    fn accepts(&self, form: IrForm) -> bool {
        form == IrForm::Lowered
    }
    fn output(&self, _: IrForm) -> IrForm {
        IrForm::Legalized
    }
    fn run(&self, program: &mut Program) -> Result<(), PassError> {
        legalize::run(program, &self.0);
        if !self.0.workgroups {
            block_loops::run(program);
        }
        Ok(())
    }
}

/// Pipeline stages in order; `weft ir --stage NAME` prints the IR after one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stage {
    /// As the front end built it.
    Front,
    Inline,
    ConstFold,
    Simplify,
    /// Optimize nodes and tapes expanded, adjoint and update kernels added,
    /// views turned into image fields and their system kernels.
    Autodiff,
    /// List steps made explicit, then the inter-kernel optimiser over the
    /// schedule's state-flow graph (`crate::schedule`).
    Schedule,
    LowerAccess,
    /// Address arithmetic folded, simplified and shared between accesses (CSE).
    Final,
    /// Stores into one packed word within a block merged into one
    /// read-modify-write.
    StoreFusion,
    /// Compare-exchange loops on words each iteration owns made plain.
    AtomicDemotion,
    /// What backends compile: legalized, then CSE, loop-invariant code
    /// motion and CSE again for what they expose.
    Legalize,
}

impl Stage {
    pub const ALL: [Stage; 11] = [
        Stage::Front,
        Stage::Inline,
        Stage::ConstFold,
        Stage::Simplify,
        Stage::Autodiff,
        Stage::Schedule,
        Stage::LowerAccess,
        Stage::Final,
        Stage::StoreFusion,
        Stage::AtomicDemotion,
        Stage::Legalize,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Stage::Front => "front",
            Stage::Inline => "inline",
            Stage::ConstFold => "const_fold",
            Stage::Simplify => "simplify",
            Stage::Autodiff => "autodiff",
            Stage::Schedule => "schedule",
            Stage::LowerAccess => "lower_access",
            Stage::Final => "final",
            Stage::StoreFusion => "store_fusion",
            Stage::AtomicDemotion => "atomic_demotion",
            Stage::Legalize => "legalize",
        }
    }
    pub fn parse(name: &str) -> Option<Stage> {
        Stage::ALL.into_iter().find(|s| s.name() == name)
    }
    /// The passes that take the program from the previous stage to this one.
    fn passes(self, opts: &PassOptions) -> Vec<Box<dyn Pass>> {
        match self {
            Stage::Front => vec![],
            Stage::Inline => vec![Box::new(INLINE)],
            Stage::ConstFold => vec![Box::new(CONST_FOLD)],
            Stage::Simplify => vec![Box::new(SIMPLIFY), Box::new(NORM_COMPARE)],
            // Adjoint kernels are folded with the address arithmetic (`Final`).
            // `half` after autodiff (which refuses f16) and before views.
            Stage::Autodiff => vec![
                Box::new(Optimize),
                Box::new(Autodiff),
                Box::new(HALF),
                Box::new(Views),
            ],
            Stage::Schedule => {
                let mut v: Vec<Box<dyn Pass>> = vec![Box::new(simple(
                    "list_gen",
                    abstract_ir,
                    crate::schedule::list_gen::run,
                ))];
                if opts.interkernel {
                    v.push(Box::new(simple(
                        "clear_elim",
                        abstract_ir,
                        crate::schedule::clear_elim::run,
                    )));
                    v.push(Box::new(simple(
                        "dead_store",
                        abstract_ir,
                        crate::schedule::dead_store::run,
                    )));
                    v.push(Box::new(simple(
                        "list_reuse",
                        abstract_ir,
                        crate::schedule::list_reuse::run,
                    )));
                    v.push(Box::new(simple(
                        "fusion",
                        abstract_ir,
                        crate::schedule::fusion::run,
                    )));
                    v.push(Box::new(simple(
                        "unlaunched",
                        abstract_ir,
                        crate::schedule::unlaunched::run,
                    )));
                }
                v
            }
            Stage::LowerAccess => vec![
                Box::new(LowerAccess {
                    bounds_checks: opts.bounds_checks,
                    demote: opts.interkernel,
                }),
                Box::new(SPARSE_SYSTEM),
            ],
            Stage::Final => vec![
                Box::new(Unroll(opts.unroll)),
                Box::new(CONST_FOLD),
                Box::new(SIMPLIFY),
                Box::new(CSE),
                Box::new(BOUNDS_ELIM),
            ],
            Stage::StoreFusion if opts.packed_word_rewrites => vec![Box::new(STORE_FUSION)],
            Stage::AtomicDemotion if opts.packed_word_rewrites => vec![Box::new(ATOMIC_DEMOTION)],
            Stage::StoreFusion | Stage::AtomicDemotion => vec![],
            Stage::Legalize => vec![
                // Before legalization, while range loops are still `RangeFor`.
                Box::new(TERMINATION),
                Box::new(Legalize(opts.target)),
                Box::new(CSE),
                Box::new(LICM),
                Box::new(CSE),
                Box::new(ZERO_FILL_DETECT),
            ],
        }
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The names of the pipeline's passes (`Pass::name`), in pipeline order,
/// each once: what [`run_pass`] accepts.
pub fn pass_names(opts: &PassOptions) -> Vec<&'static str> {
    let mut names = vec![];
    for stage in Stage::ALL {
        for pass in stage.passes(opts) {
            if !names.contains(&pass.name()) {
                names.push(pass.name());
            }
        }
    }
    names
}

/// Runs one pass of the pipeline, named as [`pass_names`] lists it, on a
/// program of form `form` (the pass's precondition is checked, and with
/// `PassOptions::validate` the validator runs on the result); returns the
/// form the pass leaves. The filetests (`tests/filetests/`) run passes
/// one at a time through this, on programs read by `ir::parse_program`.
pub fn run_pass(
    program: &mut Program,
    name: &str,
    opts: &PassOptions,
    form: IrForm,
) -> Result<IrForm, PassError> {
    let Some(pass) = Stage::ALL
        .into_iter()
        .flat_map(|s| s.passes(opts))
        .find(|p| p.name() == name)
    else {
        return Err(PassError {
            pass: "run_pass",
            kernel: String::new(),
            message: format!(
                "no pass '{}'; passes: {}",
                name,
                pass_names(opts).join(", ")
            ),
            user: None,
        });
    };
    if !pass.accepts(form) {
        return Err(PassError {
            pass: pass.name(),
            kernel: String::new(),
            message: format!("the pass cannot run on {:?} IR", form),
            user: None,
        });
    }
    pass.run(program)?;
    let form = pass.output(form);
    if opts.validate {
        validate_program(program, form).map_err(|e| PassError {
            pass: pass.name(),
            kernel: e.kernel.clone(),
            message: e.to_string(),
            user: None,
        })?;
    }
    Ok(form)
}

#[derive(Debug, Clone, PartialEq)]
pub struct PassError {
    pub pass: &'static str,
    pub kernel: String,
    pub message: String,
    /// `Some(code position)` for an error in the user's graph (a kernel the
    /// autodiff pass cannot differentiate); `None` for an internal error.
    pub user: Option<Span>,
}

impl std::fmt::Display for PassError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.user {
            Some(sp) if sp.line > 0 => {
                return write!(f, "node '{}', code {}: {}", self.kernel, sp, self.message)
            }
            Some(_) => return write!(f, "node '{}': {}", self.kernel, self.message),
            None => {}
        }
        write!(
            f,
            "node '{}': internal compiler error after pass {}: {}",
            self.kernel, self.pass, self.message
        )
    }
}

/// Runs the pipeline from the front end's output; stops after `stop_after`
/// when given. Without it the result is legalized IR, ready for a backend.
///
/// The validator checks the result in every build; with
/// `PassOptions::validate` it also checks the front end's output and the
/// IR after every pass, naming the pass that broke it (a release build
/// skips that: its cost is in docs/performance.md).
pub fn run_pipeline(
    program: &mut Program,
    opts: &PassOptions,
    stop_after: Option<Stage>,
) -> Result<(), PassError> {
    let check = |p: &Program, pass: &'static str, form: IrForm| -> Result<(), PassError> {
        if opts.validate {
            validate_program(p, form).map_err(|e| PassError {
                pass,
                kernel: e.kernel.clone(),
                message: e.to_string(),
                user: None,
            })?;
        }
        Ok(())
    };
    let mut form = IrForm::Abstract;
    check(program, "front", form)?;
    for stage in Stage::ALL {
        for pass in stage.passes(opts) {
            if !pass.accepts(form) {
                return Err(PassError {
                    pass: pass.name(),
                    kernel: String::new(),
                    message: format!("the pass cannot run on {:?} IR", form),
                    user: None,
                });
            }
            pass.run(program)?;
            form = pass.output(form);
            check(program, pass.name(), form)?;
        }
        if stop_after == Some(stage) {
            break;
        }
    }
    if !opts.validate {
        validate_program(program, form).map_err(|e| PassError {
            pass: "the pipeline (validated once, on its result)",
            kernel: e.kernel.clone(),
            message: e.to_string(),
            user: None,
        })?;
    }
    Ok(())
}
