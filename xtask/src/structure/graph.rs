//! Sibling edges between modules and the circles among them.
//!
//! A reference from module `a::b::c` to module `a::d::e` counts as the edge `b -> d` among the
//! children of `a`, their deepest common ancestor: that is how a folder that imports another
//! folder which imports it back shows up, however deep the files are. A reference between a
//! module and its own ancestor or descendant is no sibling edge.

use std::collections::{BTreeMap, BTreeSet};

/// A module's path inside its crate; the crate root is empty.
pub type ModPath = Vec<String>;

/// The edge a reference from `from` to `to` counts as: `(parent, from child, to child)`.
pub fn sibling_edge(from: &[String], to: &[String]) -> Option<(ModPath, String, String)> {
    let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
    let (a, b) = (from.get(common)?, to.get(common)?);
    Some((from[..common].to_vec(), a.clone(), b.clone()))
}

/// The module a path lands in: its longest prefix that is a module (the rest names items).
pub fn owning_module(modules: &BTreeSet<ModPath>, target: &[String]) -> ModPath {
    (0..=target.len())
        .rev()
        .map(|n| &target[..n])
        .find(|prefix| modules.contains(*prefix))
        .unwrap_or_default()
        .to_vec()
}

/// The strongly connected components with more than one member, members sorted, components in
/// order of their first member.
pub fn cycles(edges: &BTreeSet<(String, String)>) -> Vec<Vec<String>> {
    let names: Vec<&String> = edges
        .iter()
        .flat_map(|(a, b)| [a, b])
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let id: BTreeMap<&String, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let mut adjacent = vec![Vec::new(); names.len()];
    for (a, b) in edges {
        adjacent[id[a]].push(id[b]);
    }
    let mut tarjan = Tarjan {
        adjacent,
        index: vec![None; names.len()],
        low: vec![0; names.len()],
        on_stack: vec![false; names.len()],
        stack: Vec::new(),
        next: 0,
        components: Vec::new(),
    };
    for v in 0..names.len() {
        if tarjan.index[v].is_none() {
            tarjan.visit(v);
        }
    }
    let mut found: Vec<Vec<String>> = tarjan
        .components
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|c| {
            let mut members: Vec<String> = c.into_iter().map(|v| names[v].clone()).collect();
            members.sort();
            members
        })
        .collect();
    found.sort();
    found
}

/// Tarjan's algorithm; module graphs are small, so recursion depth is no concern.
struct Tarjan {
    adjacent: Vec<Vec<usize>>,
    index: Vec<Option<usize>>,
    low: Vec<usize>,
    on_stack: Vec<bool>,
    stack: Vec<usize>,
    next: usize,
    components: Vec<Vec<usize>>,
}

impl Tarjan {
    fn visit(&mut self, v: usize) {
        self.index[v] = Some(self.next);
        self.low[v] = self.next;
        self.next += 1;
        self.stack.push(v);
        self.on_stack[v] = true;
        for w in self.adjacent[v].clone() {
            match self.index[w] {
                None => {
                    self.visit(w);
                    self.low[v] = self.low[v].min(self.low[w]);
                }
                Some(index) if self.on_stack[w] => self.low[v] = self.low[v].min(index),
                Some(_) => {}
            }
        }
        if self.index[v] == Some(self.low[v]) {
            let mut component = Vec::new();
            while let Some(w) = self.stack.pop() {
                self.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            self.components.push(component);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(s: &str) -> ModPath {
        s.split("::")
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect()
    }

    fn edges(list: &[(&str, &str)]) -> BTreeSet<(String, String)> {
        list.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn edges_count_between_children_of_the_common_ancestor() {
        let edge = sibling_edge(&path("a::b::c"), &path("a::d::e"));
        assert_eq!(edge, Some((path("a"), "b".to_string(), "d".to_string())));
        assert_eq!(sibling_edge(&path("a::b"), &path("a")), None);
        assert_eq!(sibling_edge(&path("a"), &path("a::b")), None);
        assert_eq!(sibling_edge(&path("a"), &path("a")), None);
        let top = sibling_edge(&path("x"), &path("y::z"));
        assert_eq!(top, Some((path(""), "x".to_string(), "y".to_string())));
    }

    #[test]
    fn paths_land_in_their_longest_module() {
        let modules: BTreeSet<ModPath> = [path(""), path("a"), path("a::b")].into();
        assert_eq!(
            owning_module(&modules, &path("a::b::Item::new")),
            path("a::b")
        );
        assert_eq!(owning_module(&modules, &path("a::Item")), path("a"));
        assert_eq!(owning_module(&modules, &path("Item")), path(""));
    }

    #[test]
    fn finds_every_circle_and_nothing_else() {
        let graph = edges(&[
            ("a", "b"),
            ("b", "c"),
            ("c", "a"),
            ("c", "d"),
            ("d", "e"),
            ("e", "d"),
            ("f", "a"),
        ]);
        let expected = [vec!["a", "b", "c"], vec!["d", "e"]];
        assert_eq!(cycles(&graph), expected);
        assert!(cycles(&edges(&[("a", "b"), ("b", "c"), ("a", "c")])).is_empty());
    }
}
