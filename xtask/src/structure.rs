//! `cargo xtask structure [--check] [--dot FILE]`: the module structure of every crate, and the
//! import circles in it.
//!
//! Every crate under `crates/` and `crates/sys/` is read from its `src/**/*.rs` files (not
//! `src/bin/`). A module is a file: `a/b.rs` and `a/b/mod.rs` are module `a::b`, `lib.rs` and
//! `main.rs` the crate root. Each file's references to other modules of its crate are read
//! from its `use` trees and from inline `crate::…`, `super::…` and `self::…` paths, outside
//! comments and literals (see `refs`); test code does not count, and a file declared
//! `#[cfg(test)] mod name;` is left out. A reference lands in the longest module prefix of its
//! path, and counts as an edge between the two children of the deepest module both ends share
//! (see `graph`): a file deep in `executor/` naming `crate::source::…` is the edge
//! `executor -> source` in the crate root.
//!
//! The output is, per crate, the module tree with each module's outgoing sibling edges, then
//! every circle (strongly connected set of siblings) with the file, line and path of each
//! reference inside it, which are the places to cut. `--dot FILE` also writes the graph for
//! Graphviz, circles in red. `--check` fails when there is any circle.
//!
//! Files reached only through `#[path]` keep the module their location gives them, and modules
//! brought in by a `use` alias are not followed: both are rare here, and neither hides a circle
//! between folders.

mod draw;
mod graph;
mod refs;
mod tokens;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use graph::ModPath;

/// A reference from one file that crosses between two sibling modules.
#[derive(Debug, Clone)]
pub struct FileEdge {
    /// Repository-relative path of the file that holds the reference.
    pub file: String,
    pub line: usize,
    /// The path as written (`crate::source::Kernel`).
    pub written: String,
}

/// One crate's modules and the sibling edges between them.
#[derive(Debug, Default)]
pub struct Crate {
    pub name: String,
    pub modules: BTreeSet<ModPath>,
    /// Per parent module: `(from child, to child)` and the references behind that edge.
    pub edges: BTreeMap<ModPath, BTreeMap<(String, String), Vec<FileEdge>>>,
}

impl Crate {
    /// Per parent module, its circles.
    pub fn cycles(&self) -> Vec<(ModPath, Vec<String>)> {
        self.edges
            .iter()
            .flat_map(|(parent, edges)| {
                let pairs = edges.keys().cloned().collect();
                graph::cycles(&pairs)
                    .into_iter()
                    .map(move |members| (parent.clone(), members))
            })
            .collect()
    }
}

pub fn run(args: &[String]) -> Result<(), String> {
    let mut check = false;
    let mut dot = None;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--check" => check = true,
            "--dot" => dot = Some(rest.next().ok_or("--dot needs a file")?),
            other => return Err(format!("structure: unknown argument `{other}`")),
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("cannot find the workspace root above xtask/")?;
    let crates = crate_dirs(root)?
        .iter()
        .map(|dir| load_crate(root, dir))
        .collect::<Result<Vec<_>, _>>()?;
    print!("{}", draw::text(&crates));
    if let Some(file) = dot {
        std::fs::write(file, draw::dot(&crates))
            .map_err(|e| format!("cannot write {file}: {e}"))?;
        println!("structure: wrote {file}");
    }
    let circles: usize = crates.iter().map(|c| c.cycles().len()).sum();
    if check && circles > 0 {
        return Err(format!(
            "{circles} import circle(s) between sibling modules"
        ));
    }
    Ok(())
}

/// `crates/*` and `crates/sys/*` that have a `src/`.
fn crate_dirs(root: &Path) -> Result<Vec<PathBuf>, String> {
    let mut dirs = Vec::new();
    for parent in [root.join("crates"), root.join("crates/sys")] {
        for entry in read_dir(&parent)? {
            if entry.join("src").is_dir() {
                dirs.push(entry);
            }
        }
    }
    dirs.sort();
    Ok(dirs)
}

fn read_dir(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    entries
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("cannot read {}: {e}", dir.display()))
}

fn load_crate(root: &Path, dir: &Path) -> Result<Crate, String> {
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap_or_default();
    let name = manifest
        .lines()
        .find_map(|l| l.strip_prefix("name = \""))
        .and_then(|l| l.strip_suffix('"'))
        .map_or_else(|| dir.display().to_string(), str::to_string);
    let src = dir.join("src");
    let mut files = Vec::new();
    let mut pending = vec![src.clone()];
    while let Some(folder) = pending.pop() {
        for path in read_dir(&folder)? {
            if path.is_dir() && path != src.join("bin") {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                let module = module_of(path.strip_prefix(&src).unwrap_or(&path));
                let found = refs::references(&tokens::tokenize(&text), &module);
                let shown = path
                    .strip_prefix(root)
                    .unwrap_or(&path)
                    .display()
                    .to_string();
                files.push((shown, module, found));
            }
        }
    }
    let tests: Vec<ModPath> = files
        .iter()
        .flat_map(|(_, module, found)| {
            found.test_children.iter().map(|child| {
                let mut path = module.clone();
                path.push(child.clone());
                path
            })
        })
        .collect();
    files.retain(|(_, module, _)| !tests.iter().any(|t| module.starts_with(t)));
    let mut krate = Crate {
        name,
        modules: files.iter().map(|(_, module, _)| module.clone()).collect(),
        edges: BTreeMap::new(),
    };
    // A folder whose files are `include!`d has no module file; it still holds them in the tree.
    let folders: Vec<ModPath> = krate
        .modules
        .iter()
        .flat_map(|m| (0..m.len()).map(|n| m[..n].to_vec()))
        .collect();
    krate.modules.extend(folders);
    for (file, from, found) in &files {
        for reference in &found.references {
            let to = graph::owning_module(&krate.modules, &reference.target);
            if let Some((parent, a, b)) = graph::sibling_edge(from, &to) {
                let edge = FileEdge {
                    file: file.clone(),
                    line: reference.line,
                    written: reference.written.clone(),
                };
                let by_pair = krate.edges.entry(parent).or_default();
                by_pair.entry((a, b)).or_default().push(edge);
            }
        }
    }
    for edges in krate.edges.values_mut().flat_map(|m| m.values_mut()) {
        edges.sort_by(|x, y| (&x.file, x.line).cmp(&(&y.file, y.line)));
    }
    Ok(krate)
}

/// `a/b.rs` and `a/b/mod.rs` are `a::b`; `lib.rs` and `main.rs` are the root.
fn module_of(relative: &Path) -> ModPath {
    let mut path: ModPath = relative
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if path.last().is_some_and(|l| l == "mod")
        || matches!(path.as_slice(), [l] if l == "lib" || l == "main")
    {
        path.pop();
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_modules() {
        assert_eq!(module_of(Path::new("lib.rs")), ModPath::new());
        assert_eq!(module_of(Path::new("main.rs")), ModPath::new());
        assert_eq!(module_of(Path::new("a/mod.rs")), ["a"]);
        assert_eq!(module_of(Path::new("a/b.rs")), ["a", "b"]);
        assert_eq!(module_of(Path::new("a/lib.rs")), ["a", "lib"]);
    }
}
