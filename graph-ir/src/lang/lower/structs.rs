//! `struct` items and the front end's aggregate types.
//!
//! Pre: the `struct` items of one kernel's code (a struct belongs to the
//! code it is declared in, like its helpers and consts). Post: a table of
//! structs whose fields have types (`Ty`): plain IR types, local arrays,
//! other structs or tuples, with no struct holding itself. Nothing here
//! reaches the IR: `aggregates.rs` scalarises every struct, tuple and array
//! value into one IR value (or local) per leaf.

use super::*;

/// A type as the front end sees it. Only `Plain` exists in the IR; the
/// others are split into their leaves while lowering.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Ty {
    Plain(Type),
    /// A local array `[T; N]` (elements are plain).
    Array(Type, u32),
    /// A struct: an index into `Structs::defs`.
    Struct(usize),
    /// A tuple of two or more values (helpers return them).
    Tuple(Vec<Ty>),
}

impl Ty {
    pub fn is_plain(&self) -> bool {
        matches!(self, Ty::Plain(_))
    }
}

pub(super) struct StructDef {
    pub name: String,
    pub fields: Vec<(String, Ty)>,
}

#[derive(Default)]
pub(super) struct Structs {
    pub defs: Vec<StructDef>,
    pub by_name: HashMap<String, usize>,
}

impl Structs {
    /// The type's leaves in order (depth first, fields in declaration order).
    pub fn leaves(&self, t: &Ty, out: &mut Vec<Type>) {
        match t {
            Ty::Plain(p) => out.push(*p),
            Ty::Array(e, n) => out.extend(std::iter::repeat_n(*e, *n as usize)),
            Ty::Struct(s) => {
                for (_, f) in &self.defs[*s].fields {
                    self.leaves(f, out);
                }
            }
            Ty::Tuple(ts) => ts.iter().for_each(|t| self.leaves(t, out)),
        }
    }

    /// The type as written in code, for messages.
    pub fn name(&self, t: &Ty) -> String {
        match t {
            Ty::Plain(p) => p.to_string(),
            Ty::Array(e, n) => format!("[{}; {}]", e, n),
            Ty::Struct(s) => self.defs[*s].name.clone(),
            Ty::Tuple(ts) => format!(
                "({})",
                ts.iter()
                    .map(|t| self.name(t))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    pub fn field_list(&self, s: usize) -> String {
        self.defs[s]
            .fields
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Parses a type that may be an aggregate: a struct name, a tuple, an
    /// array or a plain type.
    pub fn parse(&self, t: &syn::Type, consts: &HashMap<String, Const>) -> R<Ty> {
        match t {
            syn::Type::Paren(p) => self.parse(&p.elem, consts),
            syn::Type::Tuple(tt) if tt.elems.is_empty() => Ok(Ty::Plain(Type::Void)),
            syn::Type::Tuple(tt) if tt.elems.len() == 1 => self.parse(&tt.elems[0], consts),
            syn::Type::Tuple(tt) => Ok(Ty::Tuple(
                tt.elems
                    .iter()
                    .map(|e| self.parse(e, consts))
                    .collect::<R<_>>()?,
            )),
            syn::Type::Array(a) => {
                if let Some(s) = self.struct_named(&a.elem) {
                    return Err(err(
                        &a.elem,
                        format!(
                            "arrays of structs are not supported; give `{}` array fields instead",
                            self.defs[s].name
                        ),
                    ));
                }
                if matches!(&*a.elem, syn::Type::Tuple(e) if !e.elems.is_empty()) {
                    return Err(err(&a.elem, "arrays of tuples are not supported"));
                }
                let (e, n) = arrays::parse_array_type(t, consts)?.expect("an array type");
                Ok(Ty::Array(e, n))
            }
            _ => {
                if let Some(s) = self.struct_named(t) {
                    return Ok(Ty::Struct(s));
                }
                match parse_type(t) {
                    Ok(p) => Ok(Ty::Plain(p)),
                    Err(e) => match t {
                        // `u8` and friends: parse_type's own explanation.
                        syn::Type::Path(_) if super::expr::narrow_int(t).is_some() => Err(e),
                        syn::Type::Path(p) if p.path.get_ident().is_some() => Err(CodeError {
                            message: format!(
                                "unknown type `{}`; use i32, u32, f32, f16, bool, vecN, ivecN, uvecN, bvecN, matN (N = 2..4), vecN<f16>, [T; N], a tuple or a struct declared in this code",
                                p.path.get_ident().expect("an ident")
                            ),
                            ..e
                        }),
                        _ => Err(e),
                    },
                }
            }
        }
    }

    fn struct_named(&self, t: &syn::Type) -> Option<usize> {
        match t {
            syn::Type::Path(p) if p.qself.is_none() => p
                .path
                .get_ident()
                .and_then(|i| self.by_name.get(&i.to_string()).copied()),
            _ => None,
        }
    }
}

/// Reads the `struct` items: names first (fields may name structs declared
/// later), then field types, then a check that no struct holds itself.
pub(super) fn declare_structs(
    items: &[&syn::ItemStruct],
    consts: &HashMap<String, Const>,
) -> R<Structs> {
    let mut structs = Structs::default();
    for s in items {
        let name = s.ident.to_string();
        if Type::parse(&name).is_some() || matches!(name.as_str(), "Self" | "self") {
            return Err(err(
                &s.ident,
                format!("`{}` is a built-in type and cannot be redefined", name),
            ));
        }
        if !s.generics.params.is_empty() {
            return Err(err(&s.generics, "structs cannot be generic"));
        }
        if let Some(a) = s.attrs.iter().find(|a| !a.path().is_ident("derive")) {
            return Err(err(
                a,
                "attributes are not supported on structs (a `#[derive(...)]` is accepted and ignored: structs are always copied by value)",
            ));
        }
        if structs.by_name.contains_key(&name) {
            return Err(err(&s.ident, format!("struct `{}` is defined twice", name)));
        }
        structs.by_name.insert(name.clone(), structs.defs.len());
        structs.defs.push(StructDef {
            name,
            fields: Vec::new(),
        });
    }
    for (k, s) in items.iter().enumerate() {
        let syn::Fields::Named(named) = &s.fields else {
            return Err(err(
                s,
                format!(
                    "struct `{}` needs named fields: `struct {} {{ x: f32, v: vec2 }}`",
                    s.ident, s.ident
                ),
            ));
        };
        if named.named.is_empty() {
            return Err(err(
                s,
                format!("struct `{}` needs at least one field", s.ident),
            ));
        }
        let mut fields: Vec<(String, Ty)> = Vec::new();
        for f in &named.named {
            let fname = f.ident.as_ref().expect("named field").to_string();
            if fields.iter().any(|(n, _)| *n == fname) {
                return Err(err(
                    f,
                    format!("field `{}` is declared twice in `{}`", fname, s.ident),
                ));
            }
            let t = structs.parse(&f.ty, consts)?;
            if t == Ty::Plain(Type::Void) {
                return Err(err(&f.ty, "a field needs a type with a value"));
            }
            fields.push((fname, t));
        }
        structs.defs[k].fields = fields;
    }
    // A struct that holds itself (directly or through others) has no size.
    fn holds(t: &Ty, out: &mut Vec<usize>) {
        match t {
            Ty::Struct(s) => out.push(*s),
            Ty::Tuple(ts) => ts.iter().for_each(|t| holds(t, out)),
            _ => {}
        }
    }
    fn visit(
        s: usize,
        structs: &Structs,
        items: &[&syn::ItemStruct],
        stack: &mut Vec<usize>,
        done: &mut Vec<bool>,
    ) -> R<()> {
        if done[s] {
            return Ok(());
        }
        stack.push(s);
        let declared: Vec<&syn::Type> = items[s].fields.iter().map(|f| &f.ty).collect();
        for (fty, (_, t)) in declared.into_iter().zip(&structs.defs[s].fields) {
            let mut inner = Vec::new();
            holds(t, &mut inner);
            for c in inner {
                if let Some(pos) = stack.iter().position(|&x| x == c) {
                    let mut cycle: Vec<&str> = stack[pos..]
                        .iter()
                        .map(|&x| structs.defs[x].name.as_str())
                        .collect();
                    cycle.push(&structs.defs[c].name);
                    return Err(err(
                        fty,
                        format!(
                            "struct `{}` contains itself ({}); a struct cannot hold a value of its own type",
                            structs.defs[c].name,
                            cycle.join(" holds ")
                        ),
                    ));
                }
                visit(c, structs, items, stack, done)?;
            }
        }
        stack.pop();
        done[s] = true;
        Ok(())
    }
    let mut done = vec![false; items.len()];
    for s in 0..items.len() {
        visit(s, &structs, items, &mut Vec::new(), &mut done)?;
    }
    Ok(structs)
}
