//! The one shader of the wgpu backend that is not a kernel: it turns a
//! `count_from` launch's row count (a word of a root buffer that earlier
//! launches wrote, e.g. a sparse element list's length) into the workgroup
//! counts of an indirect dispatch, laid out as the runtime lays out a direct
//! one (`wgpu_backend::grid`: rows of at most `gx_max` workgroups), so that
//! the launch record's threads per row stay valid. Nothing layout-specific:
//! any `count_from` launch uses it. It lives with the code generators so that
//! the runtime holds no shader text.
//!
//! Bindings (group 0): 0 = the root buffer holding the count (read), 1 = the
//! indirect arguments (three words per launch, written), 2 = a uniform
//! `vec4<u32>`: x = word of the row count, y = invocations per row, z =
//! workgroups per dispatch row (`gx_max`), w = first word of this launch's
//! arguments. Entry point `main`, one invocation.

/// The WGSL source for `workgroup_size` invocations per workgroup of the
/// launches it dispatches.
pub fn args_wgsl(workgroup_size: u32) -> String {
    ARGS_WGSL.replace("WG", &format!("{}u", workgroup_size))
}

const ARGS_WGSL: &str = r#"
@group(0) @binding(0) var<storage, read> root: array<u32>;
@group(0) @binding(1) var<storage, read_write> args: array<u32>;
// x: word of the row count, y: invocations per row, z: workgroups per
// dispatch row (gx_max), w: first word of this launch's arguments.
@group(0) @binding(2) var<uniform> p: vec4<u32>;

@compute @workgroup_size(1)
fn main() {
    let total = root[p.x] * p.y;
    let groups = (total + WG - 1u) / WG;
    var gx = groups;
    var gy = 1u;
    if (groups > p.z) {
        gx = p.z;
        gy = (groups + p.z - 1u) / p.z;
    }
    args[p.w] = gx;
    args[p.w + 1u] = gy;
    args[p.w + 2u] = 1u;
}
"#;

#[cfg(test)]
mod tests {
    #[test]
    fn the_workgroup_size_is_a_u32_literal() {
        let s = super::args_wgsl(64);
        assert!(s.contains("(total + 64u - 1u) / 64u"), "{}", s);
        assert!(!s.contains("WG"));
    }
}
