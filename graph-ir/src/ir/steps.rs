//! The one visitor of schedule `Step` trees: a repeat, tape or optimize
//! step holds a body of steps, and every pass that looks at or rewrites a
//! schedule goes through these functions instead of matching the nesting
//! by hand. They live beside `Step` (in the IR, not in `schedule/`) because
//! the validator walks schedules too, and the IR imports nothing above it.
//!
//! - [`walk`] / [`try_walk`] / [`walk_mut`]: every step, a step before its
//!   body, in order; [`walk_pruned`] / [`walk_pruned_mut`]: the same into
//!   the bodies the caller asks for;
//! - [`walk_lists_mut`]: every step list, the bodies inside a list before
//!   the list itself (for passes that rewrite one list at a time);
//! - [`rewrite`] / [`try_rewrite`]: a list rebuilt step by step, each step
//!   kept (its body then rewritten the same way) or replaced by a list of
//!   steps that is not visited again.
//!
//! All of them visit steps in schedule order, so a pass that appends
//! kernels while it walks appends them in the order it always did.

use super::{Schedule, Step};

impl Step {
    /// The body of a repeat, tape or optimize step.
    pub fn body(&self) -> Option<&Vec<Step>> {
        match self {
            Step::Repeat { body, .. } | Step::Tape { body, .. } | Step::Optimize { body, .. } => {
                Some(body)
            }
            Step::Launch(_) | Step::Clear { .. } | Step::ListGen { .. } => None,
        }
    }

    /// The body of a repeat, tape or optimize step, to change in place.
    pub fn body_mut(&mut self) -> Option<&mut Vec<Step>> {
        match self {
            Step::Repeat { body, .. } | Step::Tape { body, .. } | Step::Optimize { body, .. } => {
                Some(body)
            }
            Step::Launch(_) | Step::Clear { .. } | Step::ListGen { .. } => None,
        }
    }
}

impl Schedule {
    /// Both step lists, `on_start` first.
    pub fn lists(&self) -> [&Vec<Step>; 2] {
        [&self.on_start, &self.on_frame]
    }

    /// Both step lists, `on_start` first, to change in place.
    pub fn lists_mut(&mut self) -> [&mut Vec<Step>; 2] {
        [&mut self.on_start, &mut self.on_frame]
    }
}

/// Calls `f` on every step of `steps` and of the bodies inside them, in
/// schedule order: a step before the steps of its body.
pub fn walk<'a>(steps: &'a [Step], f: &mut impl FnMut(&'a Step)) {
    for s in steps {
        f(s);
        if let Some(body) = s.body() {
            walk(body, f);
        }
    }
}

/// [`walk`] into the bodies that `f` asks for: `f` returns whether to
/// visit the body of the step it saw (a pass that looks for the outermost
/// tapes stops at each).
pub fn walk_pruned<'a>(steps: &'a [Step], f: &mut impl FnMut(&'a Step) -> bool) {
    for s in steps {
        if f(s) {
            if let Some(body) = s.body() {
                walk_pruned(body, f);
            }
        }
    }
}

/// [`walk_pruned`], with each step changeable.
pub fn walk_pruned_mut(steps: &mut [Step], f: &mut impl FnMut(&mut Step) -> bool) {
    for s in steps {
        if f(s) {
            if let Some(body) = s.body_mut() {
                walk_pruned_mut(body, f);
            }
        }
    }
}

/// [`walk`] with an `f` that may fail: the first error stops the walk.
pub fn try_walk<'a, E>(
    steps: &'a [Step],
    f: &mut impl FnMut(&'a Step) -> Result<(), E>,
) -> Result<(), E> {
    for s in steps {
        f(s)?;
        if let Some(body) = s.body() {
            try_walk(body, f)?;
        }
    }
    Ok(())
}

/// [`walk`], with each step changeable: `f` sees a step before its body
/// (the body as `f` left it).
pub fn walk_mut(steps: &mut [Step], f: &mut impl FnMut(&mut Step)) {
    for s in steps {
        f(s);
        if let Some(body) = s.body_mut() {
            walk_mut(body, f);
        }
    }
}

/// Calls `f` on every step list: first the bodies of the steps of
/// `steps` (each after the bodies inside it), then `steps` itself.
pub fn walk_lists_mut(steps: &mut Vec<Step>, f: &mut impl FnMut(&mut Vec<Step>)) {
    for s in steps.iter_mut() {
        if let Some(body) = s.body_mut() {
            walk_lists_mut(body, f);
        }
    }
    f(steps);
}

/// What [`rewrite`] does with one step.
pub enum Rewrite {
    /// The step stays; the body of a repeat, tape or optimize step is
    /// rewritten the same way (before the steps after it).
    Keep(Step),
    /// These steps take its place, as they are (not rewritten again).
    Into(Vec<Step>),
}

/// `steps` rebuilt in order by `f`, which may fail: each step is handed to
/// `f` by value and kept or replaced (see [`Rewrite`]). The first error
/// stops the rewrite.
pub fn try_rewrite<E>(
    steps: Vec<Step>,
    f: &mut impl FnMut(Step) -> Result<Rewrite, E>,
) -> Result<Vec<Step>, E> {
    let mut out = Vec::with_capacity(steps.len());
    for s in steps {
        match f(s)? {
            Rewrite::Keep(mut s) => {
                if let Some(body) = s.body_mut() {
                    *body = try_rewrite(std::mem::take(body), f)?;
                }
                out.push(s);
            }
            Rewrite::Into(v) => out.extend(v),
        }
    }
    Ok(out)
}

/// [`try_rewrite`] with an `f` that cannot fail.
pub fn rewrite(steps: Vec<Step>, f: &mut impl FnMut(Step) -> Rewrite) -> Vec<Step> {
    match try_rewrite(steps, &mut |s| Ok::<_, std::convert::Infallible>(f(s))) {
        Ok(v) => v,
        Err(e) => match e {},
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arena::Handle;

    fn launch(i: usize) -> Step {
        Step::Launch(Handle::new(i))
    }

    fn repeat(body: Vec<Step>) -> Step {
        Step::Repeat {
            node_id: "r".into(),
            count: 2,
            index: None,
            reverse: false,
            start: 0,
            body,
        }
    }

    fn ids(steps: &[Step]) -> Vec<usize> {
        let mut out = Vec::new();
        walk(steps, &mut |s| match s {
            Step::Launch(k) => out.push(k.index()),
            _ => out.push(usize::MAX),
        });
        out
    }

    #[test]
    fn walk_visits_a_step_before_its_body_in_order() {
        let steps = vec![
            launch(0),
            repeat(vec![launch(1), repeat(vec![launch(2)])]),
            launch(3),
        ];
        assert_eq!(ids(&steps), [0, usize::MAX, 1, usize::MAX, 2, 3]);
    }

    #[test]
    fn walk_lists_mut_visits_bodies_first() {
        let mut steps = vec![repeat(vec![launch(1), repeat(vec![launch(2)])]), launch(3)];
        let mut lens = Vec::new();
        walk_lists_mut(&mut steps, &mut |l| lens.push(l.len()));
        assert_eq!(lens, [1, 2, 2]);
    }

    #[test]
    fn rewrite_keeps_recurses_and_replaces_without_revisiting() {
        let steps = vec![launch(0), repeat(vec![launch(1)]), launch(2)];
        let out = rewrite(steps, &mut |s| match s {
            // Each launch of k becomes launches of k + 10 and k + 20; the
            // replacements are not rewritten again.
            Step::Launch(k) => Rewrite::Into(vec![launch(k.index() + 10), launch(k.index() + 20)]),
            s => Rewrite::Keep(s),
        });
        assert_eq!(ids(&out), [10, 20, usize::MAX, 11, 21, 12, 22]);
        let err = try_rewrite(out, &mut |s| match s {
            Step::Repeat { .. } => Err("repeat"),
            s => Ok(Rewrite::Keep(s)),
        });
        assert_eq!(err.err(), Some("repeat"));
    }
}
