//! The house's layers, checked: a file imports (by a `crate::` path) only modules of its own
//! layer or below, except for the upward imports listed in `KNOWN_UP`, which are the
//! core's remaining knot and may only shrink. A new upward import fails this test: reach
//! the higher layer through a trait or hook defined in the lower one instead (see
//! `agentbox::guide::architecture`).
//!
//! Paths are read as written: a lower layer names the leaf module it uses
//! (`crate::agent::id::AgentId`, not the re-export `crate::agent::AgentId`), so that what a
//! file depends on is visible in its imports. Test files (`*tests*.rs`) are not layers.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// Module path prefixes and their layer, lowest first; the longest matching prefix wins.
const LAYERS: &[(&str, u8, &str)] = &[
    // 0: the ground: no state of the runtime, only values every layer passes around.
    ("sync", 0, "ground"),
    ("small_map", 0, "ground"),
    ("message", 0, "ground"),
    ("drops", 0, "ground"),
    ("exception", 0, "ground"),
    ("agent::id", 0, "ground"),
    ("agent::name", 0, "ground"),
    ("mbox::id", 0, "ground"),
    ("mbox::error", 0, "ground"),
    ("environment::handle", 0, "ground"),
    ("stats::source", 0, "ground"),
    ("trace", 0, "ground"),
    // 1: mboxes and sinks, and the timers that deliver into them.
    ("mbox", 1, "mboxes and sinks"),
    ("timer", 1, "mboxes and sinks"),
    // 2: agents (with what an agent's core holds: its limits).
    ("agent", 2, "agents"),
    ("limits", 2, "agents"),
    // 3: dispatchers and coops, and what runs on them.
    ("dispatcher", 3, "dispatchers and coops"),
    ("coop", 3, "dispatchers and coops"),
    ("request", 3, "dispatchers and coops"),
    ("mchain", 3, "dispatchers and coops"),
    ("stats", 3, "dispatchers and coops"),
    // 4: the environment.
    ("environment", 4, "the environment"),
    // 5: on top, through what the core offers (publicly or by a hook made for them).
    ("actors", 5, "on top"),
    ("interconnect", 6, "on top"),
    ("bridge", 7, "on top"),
    ("harmonizer", 5, "on top"),
    ("tokio_interop", 7, "on top"),
    ("monitor", 8, "on top"),
    ("prelude", 9, "the crate's face"),
    ("guide", 9, "the crate's face"),
    ("compile_checks", 9, "the crate's face"),
    ("test_support", 9, "the crate's face"),
    ("lib", 9, "the crate's face"),
];

/// The upward imports that stand today: `file -> module`. The core's knot (see
/// `guide::architecture`): an mbox holds an agent's block for its direct kind and hands
/// messages to agents' sinks; an agent's core holds its environment, coop and queue; the
/// timers and limits send through mboxes to agents. Only ever remove lines here.
const KNOWN_UP: &[&str] = &[
    "agent -> environment",
    "agent::context -> coop",
    "agent::context -> environment",
    "agent::core -> coop",
    "agent::core -> dispatcher",
    "agent::core -> environment",
    "agent::exec -> coop",
    "agent::exec -> dispatcher",
    "agent::failure -> coop",
    "coop -> environment",
    "coop::protocol -> environment",
    "dispatcher::unwind -> environment",
    "mchain -> environment",
];

fn layer_of(module: &str) -> Option<(u8, &'static str, &'static str)> {
    LAYERS
        .iter()
        .filter(|(p, _, _)| module == *p || module.starts_with(&format!("{p}::")))
        .max_by_key(|(p, _, _)| p.len())
        .map(|&(p, l, name)| (l, p, name))
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs")
            && !p.file_name().unwrap().to_string_lossy().contains("tests")
        {
            out.push(p);
        }
    }
}

/// The file's module path, `agent::core` for `src/agent/core.rs`.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|l| l == "mod") {
        parts.pop();
    }
    parts.join("::")
}

/// Every module path the file names outside comments and its in-file test modules:
/// `crate::a::b…` as `a::b…`, a `use crate::{x, y::z}` group as `x` and `y::z`, and
/// `super::…` resolved against `module` (the file's own module path).
fn crate_paths(text: &str, module: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut code = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        let test_module_next = lines
            .peek()
            .is_some_and(|n| n.trim_start().starts_with("mod ") && n.trim_end().ends_with('{'));
        if t.starts_with("#[cfg(") && t.contains("test") && test_module_next {
            break;
        }
        code.push_str(line.split("//").next().unwrap_or(""));
        code.push('\n');
    }
    let word = |c: char| c.is_alphanumeric() || c == '_' || c == ':';
    for (prefix, base) in [("crate::", String::new()), ("super::", parent(module))] {
        let mut rest = code.as_str();
        while let Some(i) = rest.find(prefix) {
            let before = rest[..i].chars().last();
            rest = &rest[i + prefix.len()..];
            if before.is_some_and(word) {
                continue;
            }
            // `super::super::x`: one more level up per `super::`.
            let mut base = base.clone();
            while let Some(r) = rest.strip_prefix("super::") {
                base = parent(&base);
                rest = r;
            }
            let join = |p: &str| {
                let p = p.trim_end_matches(':');
                if base.is_empty() {
                    p.to_owned()
                } else {
                    format!("{base}::{p}")
                }
            };
            if let Some(group) = rest.strip_prefix('{') {
                let mut depth = 0;
                let mut item = String::new();
                for c in group.chars() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            out.insert(join(item.trim()));
                            item.clear();
                            continue;
                        }
                        _ => {}
                    }
                    if depth == 0 && (word(c) || c.is_whitespace()) {
                        item.push(c);
                    }
                }
                if !item.trim().is_empty() {
                    out.insert(join(item.trim()));
                }
                continue;
            }
            let path: String = rest.chars().take_while(|&c| word(c)).collect();
            if !path.trim_end_matches(':').is_empty() {
                out.insert(join(&path));
            }
        }
    }
    out.retain(|p| !p.is_empty() && !p.starts_with("self"));
    out
}

fn parent(module: &str) -> String {
    module
        .rsplit_once("::")
        .map_or(String::new(), |(p, _)| p.to_owned())
}

#[test]
fn no_file_imports_a_layer_above_its_own_beyond_the_known_knot() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    files.sort();
    assert!(files.len() > 100, "src/ not found whole: {}", files.len());
    let mut found = BTreeSet::new();
    for file in &files {
        let module = module_of(&src, file);
        let Some((mine, _, _)) = layer_of(if module.is_empty() { "lib" } else { &module }) else {
            panic!("src/{module}: in no layer; add it to LAYERS (and to guide::architecture)");
        };
        let text = fs::read_to_string(file).unwrap();
        for path in crate_paths(&text, &module) {
            // The longest prefix that is a layer entry decides; names at the crate root
            // (re-exports) are the crate's face.
            let Some((theirs, entry, _)) = layer_of(&path) else {
                continue;
            };
            if theirs > mine {
                found.insert(format!("{module} -> {entry}"));
            }
        }
    }
    let known: BTreeSet<String> = KNOWN_UP.iter().map(|s| s.to_string()).collect();
    let new: Vec<_> = found.difference(&known).collect();
    let gone: Vec<_> = known.difference(&found).collect();
    assert!(
        new.is_empty(),
        "new upward imports (reach the higher layer through a hook the lower one defines):\n{}",
        new.iter()
            .map(|s| format!("    \"{s}\","))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        gone.is_empty(),
        "upward imports that are gone: remove them from KNOWN_UP:\n{}",
        gone.iter()
            .map(|s| format!("    \"{s}\","))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn the_path_reader_sees_use_groups_and_inline_paths_but_not_comments() {
    let text = "use crate::agent::id::AgentId;\nuse crate::{mbox::Mbox, trace};\n\
                // crate::monitor::x\nfn f() { crate::timer::deadline(); }\n";
    let paths = crate_paths(text, "stats::source");
    assert!(paths.contains("agent::id::AgentId"), "{paths:?}");
    assert!(paths.contains("timer::deadline"), "{paths:?}");
    assert!(
        paths.contains("mbox::Mbox") && paths.contains("trace"),
        "{paths:?}"
    );
    let up = crate_paths(
        "use super::Quantity;\nuse super::super::agent::id::AgentId;\n",
        "stats::source",
    );
    assert!(
        up.contains("stats::Quantity") && up.contains("agent::id::AgentId"),
        "{up:?}"
    );
    assert!(!paths.iter().any(|p| p.starts_with("monitor")), "{paths:?}");
    assert_eq!(layer_of("agent::id::AgentId").unwrap().0, 0);
    assert_eq!(layer_of("agent::core").unwrap().0, 2);
    assert_eq!(layer_of("mbox::id").unwrap().0, 0);
}
