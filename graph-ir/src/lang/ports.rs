//! Finds the field ports a kernel's code uses: every name indexed as
//! `name[...]` where `name` is not, at that point, a local variable or
//! function argument in scope, nor a kernel scalar. Ports are listed in
//! order of first use.

use super::{parse, CodeError};
use syn::visit::Visit;

pub fn field_ports(code: &str, params: &[String]) -> Result<Vec<String>, CodeError> {
    let file = parse(code)?;
    let mut v = Collector {
        ports: Vec::new(),
        scopes: vec![params.to_vec()],
    };
    v.visit_file(&file);
    Ok(v.ports)
}

struct Collector {
    ports: Vec<String>,
    scopes: Vec<Vec<String>>,
}

fn ident_of(e: &syn::Expr) -> Option<String> {
    match e {
        syn::Expr::Path(p) if p.path.segments.len() == 1 && p.qself.is_none() => {
            Some(p.path.segments[0].ident.to_string())
        }
        syn::Expr::Paren(p) => ident_of(&p.expr),
        // `x.grad[i]` uses the field wired to port `x` (its gradient field).
        syn::Expr::Field(f) if matches!(&f.member, syn::Member::Named(m) if m == "grad") => {
            ident_of(&f.base)
        }
        _ => None,
    }
}

fn names(p: &syn::Pat, out: &mut Vec<String>) {
    match p {
        syn::Pat::Ident(i) => out.push(i.ident.to_string()),
        syn::Pat::Type(t) => names(&t.pat, out),
        syn::Pat::Tuple(t) => t.elems.iter().for_each(|e| names(e, out)),
        _ => {}
    }
}

impl Collector {
    fn declared(&self, n: &str) -> bool {
        self.scopes.iter().any(|s| s.iter().any(|x| x == n))
    }
    fn declare(&mut self, p: &syn::Pat) {
        let mut v = Vec::new();
        names(p, &mut v);
        self.scopes.last_mut().expect("a scope is open").extend(v);
    }
}

impl<'ast> Visit<'ast> for Collector {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.scopes.push(Vec::new());
        for input in &f.sig.inputs {
            if let syn::FnArg::Typed(t) = input {
                self.declare(&t.pat);
            }
        }
        self.visit_block(&f.block);
        self.scopes.pop();
    }
    fn visit_block(&mut self, b: &'ast syn::Block) {
        self.scopes.push(Vec::new());
        syn::visit::visit_block(self, b);
        self.scopes.pop();
    }
    fn visit_local(&mut self, l: &'ast syn::Local) {
        // The initializer is evaluated before the new names exist.
        if let Some(init) = &l.init {
            self.visit_expr(&init.expr);
        }
        self.declare(&l.pat);
    }
    fn visit_expr_for_loop(&mut self, f: &'ast syn::ExprForLoop) {
        self.visit_expr(&f.expr);
        self.scopes.push(Vec::new());
        self.declare(&f.pat);
        self.visit_block(&f.body);
        self.scopes.pop();
    }
    fn visit_expr_index(&mut self, e: &'ast syn::ExprIndex) {
        if let Some(n) = ident_of(&e.expr) {
            if !self.declared(&n) && !self.ports.contains(&n) {
                self.ports.push(n);
            }
        }
        syn::visit::visit_expr_index(self, e);
    }
    fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
        // `append(x, list, value)` and `length(x, list)` name a field port
        // without indexing it.
        if let syn::Expr::Path(f) = &*c.func {
            // `mesh_closest(m, ..)` and `mesh_ray(m, ..)` name a mesh port.
            let is_list_op = f.path.get_ident().is_some_and(|i| {
                (i == "append" && c.args.len() == 3)
                    || (i == "length" && c.args.len() == 2)
                    || super::mesh_query::QUERIES.iter().any(|(q, _)| i == q)
            });
            if let Some(n) = c.args.first().filter(|_| is_list_op).and_then(ident_of) {
                if !self.declared(&n) && !self.ports.contains(&n) {
                    self.ports.push(n);
                }
            }
        }
        syn::visit::visit_expr_call(self, c);
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
    #[test]
    fn scoping_is_respected() {
        // `x` is a helper argument inside `f` but a field in `kernel`; `v` is a
        // field until the `let` that shadows it.
        let code = "fn f(x: vec2) -> f32 { x[0] }\nfn kernel(i: i32) { let a = v[i]; let v = vec2(1.0, 2.0); x[i] = f(v) + v[1] + a; }";
        assert_eq!(
            field_ports(code, &[]).unwrap(),
            vec!["v".to_string(), "x".to_string()]
        );
    }
}
