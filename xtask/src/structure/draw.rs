//! The two drawings of the module graph: compact text for the terminal, and Graphviz dot.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::graph::ModPath;
use super::{Crate, FileEdge};

/// Per crate, the module tree with each module's outgoing sibling edges (a target in a circle
/// with its source is starred), then every circle with the references that make it up.
pub fn text(crates: &[Crate]) -> String {
    let mut out = String::from("module structure (`a -> b*`: a and b are in an import circle)\n");
    for krate in crates {
        let circle = circle_of(krate);
        let _ = writeln!(out, "{}", krate.name);
        for module in krate.modules.iter().skip(1) {
            let (name, parent) = split(module);
            let targets: Vec<String> = outgoing(krate, parent, name)
                .map(|to| {
                    let starred = in_circle(&circle, parent, name, to);
                    format!("{to}{}", if starred { "*" } else { "" })
                })
                .collect();
            let indent = "  ".repeat(module.len());
            let arrow = if targets.is_empty() {
                String::new()
            } else {
                format!(" -> {}", targets.join(", "))
            };
            let _ = writeln!(out, "{indent}{name}{arrow}");
        }
    }
    let cycles: Vec<(&Crate, ModPath, Vec<String>)> = crates
        .iter()
        .flat_map(|k| k.cycles().into_iter().map(move |(p, m)| (k, p, m)))
        .collect();
    let _ = writeln!(out, "\nimport circles: {}", cycles.len());
    for (krate, parent, members) in &cycles {
        let place = if parent.is_empty() {
            "the crate root".to_string()
        } else {
            parent.join("::")
        };
        let _ = writeln!(out, "  {}, in {place}: {}", krate.name, members.join(", "));
        for ((a, b), edges) in &krate.edges[parent] {
            if members.contains(a) && members.contains(b) {
                // The number of references says how much a cut there costs.
                let plural = if edges.len() == 1 { "" } else { "s" };
                let _ = writeln!(out, "    {a} -> {b} ({} reference{plural})", edges.len());
                // One line per place: the paths written there, grouped as a `use` would.
                for (at, paths) in by_place(edges) {
                    let _ = writeln!(out, "      {at}: {}", grouped(&paths));
                }
            }
        }
    }
    out
}

/// `(file:line, paths written there)`, in order.
fn by_place(edges: &[FileEdge]) -> Vec<(String, Vec<&str>)> {
    let mut places: Vec<(String, Vec<&str>)> = Vec::new();
    for edge in edges {
        let at = format!("{}:{}", edge.file, edge.line);
        match places.last_mut() {
            Some((last, paths)) if *last == at => paths.push(&edge.written),
            _ => places.push((at, vec![&edge.written])),
        }
    }
    places
}

/// `a::b::{C, D}` for `a::b::C` and `a::b::D`; a single path as it is.
fn grouped(paths: &[&str]) -> String {
    let split: Vec<Vec<&str>> = paths.iter().map(|p| p.split("::").collect()).collect();
    let first = &split[0];
    let common = (0..first.len())
        .take_while(|&i| split.iter().all(|p| p.len() > i + 1 && p[i] == first[i]))
        .count();
    if paths.len() == 1 || common == 0 {
        return paths.join(", ");
    }
    let tails: Vec<String> = split.iter().map(|p| p[common..].join("::")).collect();
    format!("{}::{{{}}}", first[..common].join("::"), tails.join(", "))
}

/// A Graphviz digraph: one cluster per crate and per module with children, nested as the
/// folders are; edges labelled with their number of references, red inside a circle.
pub fn dot(crates: &[Crate]) -> String {
    let mut out = String::from(
        "digraph structure {\n  rankdir=LR;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n",
    );
    for krate in crates {
        cluster(&mut out, krate, &[], 1);
        let circle = circle_of(krate);
        for (parent, edges) in &krate.edges {
            for ((a, b), refs) in edges {
                let red = in_circle(&circle, parent, a, b);
                let color = if red {
                    ", color=red, fontcolor=red"
                } else {
                    ""
                };
                let _ = writeln!(
                    out,
                    "  \"{}\" -> \"{}\" [label=\"{}\"{color}];",
                    node_id(krate, parent, a),
                    node_id(krate, parent, b),
                    refs.len()
                );
            }
        }
    }
    out.push_str("}\n");
    out
}

fn cluster(out: &mut String, krate: &Crate, parent: &[String], depth: usize) {
    let indent = "  ".repeat(depth);
    let label = parent
        .last()
        .map_or(krate.name.clone(), |l| format!("{l}/"));
    let _ = writeln!(
        out,
        "{indent}subgraph \"cluster_{}\" {{",
        node_id(krate, parent, "")
    );
    let _ = writeln!(out, "{indent}  label=\"{label}\";");
    let children = krate
        .modules
        .iter()
        .filter(|m| !m.is_empty() && split(m).1 == parent);
    for child in children {
        let (name, _) = split(child);
        let _ = writeln!(
            out,
            "{indent}  \"{}\" [label=\"{name}\"];",
            node_id(krate, parent, name)
        );
        if krate
            .modules
            .iter()
            .any(|m| m.len() > child.len() && m.starts_with(child))
        {
            cluster(out, krate, child, depth + 1);
        }
    }
    let _ = writeln!(out, "{indent}}}");
}

fn node_id(krate: &Crate, parent: &[String], name: &str) -> String {
    let mut id = krate.name.clone();
    for segment in parent.iter().map(String::as_str).chain([name]) {
        if !segment.is_empty() {
            id.push_str("::");
            id.push_str(segment);
        }
    }
    id
}

/// `(name, parent)` of a module other than the root.
fn split(module: &[String]) -> (&str, &[String]) {
    match module.split_last() {
        Some((name, parent)) => (name, parent),
        None => ("", module),
    }
}

fn outgoing<'a>(
    krate: &'a Crate,
    parent: &[String],
    name: &'a str,
) -> impl Iterator<Item = &'a str> {
    krate
        .edges
        .get(parent)
        .into_iter()
        .flat_map(|edges| edges.keys())
        .filter(move |(a, _)| a == name)
        .map(|(_, b)| b.as_str())
}

/// Which circle (by number) each `(parent, child)` is in.
fn circle_of(krate: &Crate) -> BTreeMap<(ModPath, String), usize> {
    let mut found = BTreeMap::new();
    for (number, (parent, members)) in krate.cycles().into_iter().enumerate() {
        for member in members {
            found.insert((parent.clone(), member), number);
        }
    }
    found
}

/// Whether the sibling edge `a -> b` under `parent` lies inside a circle.
fn in_circle(
    circle: &BTreeMap<(ModPath, String), usize>,
    parent: &[String],
    a: &str,
    b: &str,
) -> bool {
    let of = |name: &str| circle.get(&(parent.to_vec(), name.to_string()));
    of(a).is_some() && of(a) == of(b)
}
