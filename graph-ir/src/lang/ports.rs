//! Finds the field ports a kernel's code uses: every name indexed as
//! `name[...]` (or passed whole to an `atomic_*` call) that is not a local
//! variable, a function argument, or a kernel parameter anywhere in the code.
//! Ports are listed in order of first use.

use super::{parse, CodeError};
use syn::visit::Visit;

pub fn field_ports(code: &str, params: &[String]) -> Result<Vec<String>, CodeError> {
    let file = parse(code)?;
    let mut v = Collector::default();
    v.visit_file(&file);
    Ok(v
        .indexed
        .into_iter()
        .filter(|n| !v.declared.contains(n) && !params.contains(n))
        .fold(Vec::new(), |mut acc, n| {
            if !acc.contains(&n) {
                acc.push(n);
            }
            acc
        }))
}

#[derive(Default)]
struct Collector {
    indexed: Vec<String>,
    declared: Vec<String>,
}

fn ident_of(e: &syn::Expr) -> Option<String> {
    match e {
        syn::Expr::Path(p) if p.path.segments.len() == 1 && p.qself.is_none() => {
            Some(p.path.segments[0].ident.to_string())
        }
        syn::Expr::Paren(p) => ident_of(&p.expr),
        _ => None,
    }
}

impl<'ast> Visit<'ast> for Collector {
    fn visit_expr_index(&mut self, e: &'ast syn::ExprIndex) {
        if let Some(n) = ident_of(&e.expr) {
            self.indexed.push(n);
        }
        syn::visit::visit_expr_index(self, e);
    }
    fn visit_pat_ident(&mut self, p: &'ast syn::PatIdent) {
        self.declared.push(p.ident.to_string());
        syn::visit::visit_pat_ident(self, p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn finds_indexed_names_but_not_locals_or_params() {
        let code = "fn kernel(i: i32) { let mut v = vec2(0.0, 1.0); v[0] = x[i] + y[(i, 0)]; x[i] = v[1] * dt[0]; }";
        let ports = field_ports(code, &["dt".to_string()]).unwrap();
        assert_eq!(ports, vec!["x".to_string(), "y".to_string()]);
    }
}
