//! The backend chooser's entries, shared by the app's viewport toolbar and
//! the web page's: one entry per backend in the runtime's registry
//! (`weft_runtime::backend::all`), in its order, each offered, shown
//! disabled with the reason, or left out. Nothing here names a backend.

use std::sync::Mutex;
use weft_runtime::backend;
use weft_runtime::Backend;

/// One entry of the chooser.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    pub backend: Backend,
    /// Hover text of an entry that can be chosen.
    pub summary: &'static str,
    /// Why it cannot be chosen here (shown disabled); `None`: it can.
    pub disabled: Option<String>,
}

/// What the window's GPU is to the chooser: `Ok` when the window has a
/// wgpu device to share, `Err(Some(why))` when it has none and says why,
/// `Err(None)` when it has none and nothing to say (the entry is left out).
pub type WindowGpu<'a> = Result<(), Option<&'a str>>;

/// The entries for a window whose GPU is `window_gpu`: a backend that
/// cannot exist on this platform is disabled with its reason; one that
/// runs on the window's device follows `window_gpu`; one whose driver this
/// machine lacks (`BackendSpec::probe`, asked once per process) is left out.
pub fn choices(window_gpu: WindowGpu) -> Vec<Choice> {
    let mut out = Vec::new();
    for spec in backend::all() {
        let disabled = if let Some(why) = spec.unavailable() {
            Some(why.to_string())
        } else if spec.shares_window_gpu() {
            match window_gpu {
                Ok(()) => None,
                Err(Some(why)) => Some(why.to_string()),
                Err(None) => continue,
            }
        } else if !probed(spec) {
            continue;
        } else {
            None
        };
        out.push(Choice {
            backend: Backend::of(spec),
            summary: spec.summary(),
            disabled,
        });
    }
    out
}

/// Whether `spec`'s probe succeeded (asked the first time only).
fn probed(spec: &'static dyn weft_runtime::BackendSpec) -> bool {
    static PROBES: Mutex<Vec<(&str, bool)>> = Mutex::new(Vec::new());
    let Ok(mut probes) = PROBES.lock() else {
        return spec.probe().is_ok();
    };
    if let Some((_, ok)) = probes.iter().find(|(n, _)| *n == spec.name()) {
        return *ok;
    }
    let ok = spec.probe().is_ok();
    probes.push((spec.name(), ok));
    ok
}

/// The entries inside a chooser's popup: `selected` changes when one is picked.
pub fn show(ui: &mut egui::Ui, selected: &mut Backend, choices: &[Choice]) {
    for c in choices {
        let name = c.backend.name();
        match &c.disabled {
            Some(why) => {
                ui.add_enabled(false, egui::Button::selectable(false, name))
                    .on_disabled_hover_text(why);
            }
            None => {
                ui.selectable_value(selected, c.backend, name)
                    .on_hover_text(c.summary);
            }
        }
    }
}
