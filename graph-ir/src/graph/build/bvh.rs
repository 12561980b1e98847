//! The bounding volume hierarchy of a mesh, as the queries walk it: nodes
//! in depth-first order, each with its box, the node after its subtree
//! (its *escape*) and, for a leaf, its one triangle. A walk needs no
//! stack: a node whose box may hold an answer goes on to the next node
//! (its first child, or for a leaf its escape after testing the
//! triangle); any other node jumps to its escape; -1 ends the walk. That
//! keeps the queries plain loops over fields, the same on every backend
//! (`lang::lower::mesh_query`).
//!
//! Built here, on the host, when the graph is built: the mesh is static
//! for now. Each split is at the median of the triangles' centroids along
//! the longest axis of their bounds, ties broken by triangle index, so
//! the tree is the same on every machine and its depth is at most
//! ⌈log₂ n⌉ + 1.

/// One node of the tree.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BvhNode {
    pub lo: [f32; 3],
    pub hi: [f32; 3],
    /// The node after this one's subtree, or -1 at the end.
    pub escape: i32,
    /// The triangle of a leaf, or -1 for an inner node (whose first child
    /// is the next node).
    pub triangle: i32,
}

/// The tree over `triangles` (2n − 1 nodes for n triangles).
pub fn build(points: &[[f32; 3]], triangles: &[[u32; 3]]) -> Vec<BvhNode> {
    let bounds: Vec<([f32; 3], [f32; 3])> = triangles
        .iter()
        .map(|t| {
            let mut lo = [f32::INFINITY; 3];
            let mut hi = [f32::NEG_INFINITY; 3];
            for &v in t {
                for a in 0..3 {
                    lo[a] = lo[a].min(points[v as usize][a]);
                    hi[a] = hi[a].max(points[v as usize][a]);
                }
            }
            (lo, hi)
        })
        .collect();
    let mut order: Vec<u32> = (0..triangles.len() as u32).collect();
    let mut nodes = Vec::with_capacity(2 * triangles.len());
    // Iterative, with an explicit list of (range, parent slot to patch).
    let mut todo: Vec<(usize, usize)> = vec![(0, order.len())];
    // Each entry is a subtree to emit next; escapes are filled once the
    // subtree's size is known: 2 × triangles − 1 nodes.
    while let Some((start, end)) = todo.pop() {
        let here = nodes.len();
        let count = end - start;
        let escape = here + 2 * count - 1;
        let mut lo = [f32::INFINITY; 3];
        let mut hi = [f32::NEG_INFINITY; 3];
        for &t in &order[start..end] {
            let (l, h) = bounds[t as usize];
            for a in 0..3 {
                lo[a] = lo[a].min(l[a]);
                hi[a] = hi[a].max(h[a]);
            }
        }
        let escape = if escape >= 2 * triangles.len() - 1 {
            -1
        } else {
            escape as i32
        };
        if count == 1 {
            nodes.push(BvhNode {
                lo,
                hi,
                escape,
                triangle: order[start] as i32,
            });
            continue;
        }
        nodes.push(BvhNode {
            lo,
            hi,
            escape,
            triangle: -1,
        });
        // The longest axis of the centroids' bounds.
        let centroid = |t: u32| {
            let (l, h) = bounds[t as usize];
            [l[0] + h[0], l[1] + h[1], l[2] + h[2]]
        };
        let mut clo = [f32::INFINITY; 3];
        let mut chi = [f32::NEG_INFINITY; 3];
        for &t in &order[start..end] {
            let c = centroid(t);
            for a in 0..3 {
                clo[a] = clo[a].min(c[a]);
                chi[a] = chi[a].max(c[a]);
            }
        }
        let axis = (0..3)
            .max_by(|&a, &b| {
                (chi[a] - clo[a])
                    .total_cmp(&(chi[b] - clo[b]))
                    .then(b.cmp(&a))
            })
            .unwrap_or(0);
        let mid = start + count / 2;
        order[start..end].select_nth_unstable_by(count / 2, |&a, &b| {
            centroid(a)[axis]
                .total_cmp(&centroid(b)[axis])
                .then(a.cmp(&b))
        });
        // The left child is emitted next (it is the next node), so it is
        // pushed last.
        todo.push((mid, end));
        todo.push((start, mid));
    }
    nodes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid(n: usize) -> (Vec<[f32; 3]>, Vec<[u32; 3]>) {
        let mut p = Vec::new();
        let mut t = Vec::new();
        for i in 0..n {
            let x = i as f32;
            let b = p.len() as u32;
            p.extend([[x, 0.0, 0.0], [x + 1.0, 0.0, 0.0], [x, 1.0, 0.5]]);
            t.push([b, b + 1, b + 2]);
        }
        (p, t)
    }

    #[test]
    fn every_triangle_is_one_leaf_and_boxes_hold_their_subtrees() {
        for n in [1, 2, 3, 7, 64, 100] {
            let (p, t) = grid(n);
            let nodes = build(&p, &t);
            assert_eq!(nodes.len(), 2 * n - 1);
            let mut seen: Vec<i32> = nodes
                .iter()
                .map(|x| x.triangle)
                .filter(|&x| x >= 0)
                .collect();
            seen.sort();
            assert_eq!(seen, (0..n as i32).collect::<Vec<_>>());
            for (i, nd) in nodes.iter().enumerate() {
                let end = if nd.escape < 0 {
                    nodes.len()
                } else {
                    nd.escape as usize
                };
                assert!(end > i);
                for c in &nodes[i..end] {
                    for a in 0..3 {
                        assert!(nd.lo[a] <= c.lo[a] && c.hi[a] <= nd.hi[a]);
                    }
                }
                // A leaf's subtree is itself; an inner node's has two or more nodes.
                assert_eq!(end - i == 1, nd.triangle >= 0);
            }
        }
    }

    #[test]
    fn a_walk_that_enters_every_node_visits_each_once_in_order() {
        let (p, t) = grid(37);
        let nodes = build(&p, &t);
        let mut n = 0i32;
        let mut visited = 0;
        while n >= 0 {
            visited += 1;
            let nd = nodes[n as usize];
            n = if nd.triangle >= 0 { nd.escape } else { n + 1 };
        }
        assert_eq!(visited, nodes.len());
    }
}
