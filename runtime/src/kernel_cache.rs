//! The one cache of compiled kernels that every engine uses (the JIT's
//! native code, wgpu's pipelines, CUDA's PTX): compiled code is keyed by
//! everything it depends on — the program's target capabilities, the
//! kernel's lowered IR (its code, spans, bindings and fault sites), its
//! iteration shape, the field names its fault messages mention, the roots'
//! sizes and the engine's own options — hashed once with a 128-bit XXH3,
//! so an unchanged kernel in an edited or reopened graph is not compiled
//! again, whichever backend runs it.
//!
//! A cache either keeps an entry only while some simulation holds it
//! ([`Keep::WhileUsed`]: process-wide caches, whose code would otherwise
//! outlive every graph) or for as long as the cache lives
//! ([`Keep::Always`]: a device's pipelines, which die with the device).

use std::collections::HashMap;
use std::fmt::{Debug, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use weft_ir::ir::layout::root_words;
use weft_ir::ir::{Kernel, Program};
use xxhash_rust::xxh3::Xxh3;

/// What a compiled kernel depends on, hashed (128 bits: a collision would
/// run another kernel's code, so the key is wide enough never to meet one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelKey(u128);

/// Feeds formatted text to the hash without building the string.
struct HashWriter(Xxh3);

impl Write for HashWriter {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.update(s.as_bytes());
        Ok(())
    }
}

impl KernelKey {
    /// The key of `kernel` of `program` compiled with the engine's
    /// `options` (anything else its code depends on: a device's
    /// architecture, workgroup size, binding sizes).
    pub fn of_kernel(program: &Program, kernel: &Kernel, options: &impl Debug) -> KernelKey {
        let mut w = HashWriter(Xxh3::new());
        // Writing to a HashWriter cannot fail.
        let _ = write!(
            w,
            "{:?}\u{1}{:?}\u{1}{:?}\u{1}{:?}\u{1}",
            program.target,
            kernel,
            kernel.iteration_shape(program),
            options
        );
        for (_, f) in program.fields.iter() {
            let _ = write!(w, "{}\u{2}", f.name);
        }
        for r in program.roots() {
            let _ = write!(w, "{}\u{3}", root_words(program, r));
        }
        KernelKey(w.0.digest128())
    }

    /// The key of generated source text compiled with `options` (NVRTC's
    /// PTX of a kernel's CUDA C, which `weft check` also builds).
    pub fn of_source(source: &str, options: &impl Debug) -> KernelKey {
        let mut w = HashWriter(Xxh3::new());
        let _ = write!(w, "{}\u{1}{:?}", source, options);
        KernelKey(w.0.digest128())
    }
}

/// How long a cache keeps what it compiled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keep {
    /// While anything outside the cache holds the entry.
    WhileUsed,
    /// As long as the cache.
    Always,
}

/// Compiled kernels by [`KernelKey`].
pub struct KernelCache<T> {
    keep: Keep,
    entries: Mutex<Entries<T>>,
    /// Cache misses compiled so far (tests and diagnostics).
    compiled: AtomicUsize,
}

struct Entries<T> {
    map: HashMap<KernelKey, Arc<T>>,
    /// Size after the last sweep of unused entries (`Keep::WhileUsed`
    /// sweeps when the map has doubled: linear in the kernels inserted).
    swept: usize,
}

impl<T> KernelCache<T> {
    pub fn new(keep: Keep) -> KernelCache<T> {
        KernelCache {
            keep,
            entries: Mutex::new(Entries {
                map: HashMap::new(),
                swept: 0,
            }),
            compiled: AtomicUsize::new(0),
        }
    }

    /// The compiled kernel for `key`, if any.
    pub fn get(&self, key: &KernelKey) -> Option<Arc<T>> {
        self.entries.lock().ok()?.map.get(key).cloned()
    }

    /// Stores a kernel compiled for `key` (counted as a miss).
    pub fn insert(&self, key: KernelKey, value: Arc<T>) {
        self.compiled.fetch_add(1, Ordering::Relaxed);
        let Ok(mut e) = self.entries.lock() else {
            return;
        };
        if self.keep == Keep::WhileUsed && e.map.len() >= 2 * e.swept.max(32) {
            e.map.retain(|_, v| Arc::strong_count(v) > 1);
            e.swept = e.map.len();
        }
        e.map.insert(key, value);
    }

    /// The kernel for `key`, compiled by `compile` on a miss.
    pub fn get_or_compile<E>(
        &self,
        key: KernelKey,
        compile: impl FnOnce() -> Result<T, E>,
    ) -> Result<Arc<T>, E> {
        if let Some(v) = self.get(&key) {
            return Ok(v);
        }
        let v = Arc::new(compile()?);
        self.insert(key, v.clone());
        Ok(v)
    }

    /// Kernels this cache compiled (its misses).
    pub fn compiled(&self) -> usize {
        self.compiled.load(Ordering::Relaxed)
    }
}
