//! `cargo xtask doc-links [<book dir>]`: checks the relative links of the mdBook and the
//! repository paths the book and the README name.
//!
//! mdBook fails on a missing chapter in `SUMMARY.md` but not on a broken link inside a chapter.
//! This walks every `.md` file under `<book>/src` and checks each inline link `[text](target)`
//! that is not an absolute URL: the file must exist, and a `#fragment` must name a heading of the
//! target file, as mdBook derives heading ids (lower case; letters, digits, `-` and `_` kept;
//! spaces become `-`; everything else dropped). Links inside code blocks and code spans are not
//! links and are skipped.
//!
//! Code moves, and prose that names a file in backticks goes stale without any link breaking.
//! So every word of a code span, in the book and in the repository's `README.md`, that looks
//! like a repository path is checked too (see `repo_path`): it contains a `/` and either ends in
//! a source or configuration extension or starts with a top-level folder of the repository. It
//! must exist relative to the repository root, or be the tail of an existing file's path
//! (`executor/block.rs` for a path inside some crate's `src/`), component by component. Words
//! with placeholders (`<`, `*`, `{`, `...`, `$`), absolute paths and URLs are skipped; fenced
//! code blocks are commands and output, not prose, and are skipped too. A stale path is reported
//! as `FILE:LINE: `path``.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

/// Checks the book in `args[0]` (default `docs`) and the README; `Err` lists every broken link
/// and every stale path.
pub fn run(args: &[String]) -> Result<(), String> {
    let book = args.first().map_or("docs", String::as_str);
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("cannot find the workspace root above xtask/")?;
    let root = repo.join(book).join("src");
    let pages = read_pages(&root)?;
    if pages.is_empty() {
        return Err(format!("no .md files under {}", root.display()));
    }
    let mut broken = Vec::new();
    let mut count = 0;
    for (path, text) in &pages {
        for (line, target) in links(text) {
            count += 1;
            if let Err(why) = check_link(&pages, path, &target) {
                broken.push(format!("{}:{line}: ({target}) {why}", path.display()));
            }
        }
    }
    let files = repo_files(repo)?;
    let mut prose: Vec<(PathBuf, &str)> = pages
        .iter()
        .map(|(path, text)| (Path::new(book).join("src").join(path), text.as_str()))
        .collect();
    let readme = std::fs::read_to_string(repo.join("README.md")).unwrap_or_default();
    prose.push((PathBuf::from("README.md"), &readme));
    let mut paths = 0;
    for (file, text) in &prose {
        for (line, path) in backticked_paths(text) {
            paths += 1;
            if !path_exists(repo, &files, &path) {
                broken.push(format!("{}:{line}: `{path}`", file.display()));
            }
        }
    }
    if broken.is_empty() {
        println!(
            "doc-links: {count} relative links in {} pages and {paths} repository paths, all resolve",
            pages.len()
        );
        Ok(())
    } else {
        Err(format!(
            "broken links and stale paths:\n  {}",
            broken.join("\n  ")
        ))
    }
}

/// Every `.md` file under `root`, keyed by its path relative to `root`.
fn read_pages(root: &Path) -> Result<BTreeMap<PathBuf, String>, String> {
    let mut pages = BTreeMap::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let entries =
            std::fs::read_dir(&dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        for entry in entries {
            let path = entry
                .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
                .path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                let relative = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
                pages.insert(relative, text);
            }
        }
    }
    Ok(pages)
}

/// `(line number, target)` of every inline link outside code.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut in_fence = false;
    for (index, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        let prose = strip_code_spans(line);
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            let target = after[..end].trim();
            // `[text](target "title")`: the title is not part of the target.
            let target = target.split_whitespace().next().unwrap_or_default();
            if !target.is_empty() && !is_external(target) {
                found.push((index + 1, target.to_string()));
            }
            rest = &after[end..];
        }
    }
    found
}

fn strip_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
        } else if !in_code {
            out.push(c);
        }
    }
    out
}

fn is_external(target: &str) -> bool {
    target.contains("://") || target.starts_with("mailto:")
}

fn check_link(pages: &BTreeMap<PathBuf, String>, from: &Path, target: &str) -> Result<(), String> {
    let (file, fragment) = match target.split_once('#') {
        Some((file, fragment)) => (file, Some(fragment)),
        None => (target, None),
    };
    let resolved = if file.is_empty() {
        from.to_path_buf()
    } else {
        normalize(&from.parent().unwrap_or(Path::new("")).join(file))
            .ok_or("points outside the book")?
    };
    let Some(text) = pages.get(&resolved) else {
        return Err(format!("no page {}", resolved.display()));
    };
    match fragment {
        Some(fragment) if !heading_ids(text).iter().any(|id| id == fragment) => {
            Err(format!("no heading #{fragment} in {}", resolved.display()))
        }
        _ => Ok(()),
    }
}

/// Resolves `.` and `..` without touching the file system; `None` if it climbs out.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            other => out.push(other),
        }
    }
    Some(out)
}

/// `(line number, word)` of every word in a code span outside fenced blocks that names a
/// repository path (see [`repo_path`]).
fn backticked_paths(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut in_fence = false;
    for (index, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        // Odd pieces between backticks are the code spans.
        for span in line.split('`').skip(1).step_by(2) {
            found.extend(
                span.split_whitespace()
                    .filter_map(repo_path)
                    .map(|p| (index + 1, p)),
            );
        }
    }
    found
}

/// The repository path a word names, if it names one: trailing punctuation, a `:line` and a
/// `#fragment` are dropped.
fn repo_path(word: &str) -> Option<String> {
    const EXTENSIONS: &[&str] = &[
        "rs", "md", "toml", "sh", "h", "hpp", "c", "cpp", "cu", "cuh", "yml", "yaml", "json", "py",
        "lock", "txt",
    ];
    const FOLDERS: &[&str] = &["crates/", "docs/", "xtask/", "tests/", ".ci/", ".github/"];
    let placeholder = ["<", "*", "{", "...", "$"].iter().any(|p| word.contains(p));
    if placeholder || word.contains("://") {
        return None;
    }
    let word = word
        .trim_start_matches('(')
        .trim_end_matches([',', '.', ';', ')']);
    let word = word.split(['#', ':']).next().unwrap_or_default();
    if word.starts_with(['/', '~']) || !word.contains('/') {
        return None;
    }
    let extension = word.rsplit_once('.').map(|(_, e)| e);
    let known = extension.is_some_and(|e| EXTENSIONS.contains(&e));
    (known || FOLDERS.iter().any(|f| word.starts_with(f))).then(|| word.to_string())
}

/// Every file of the repository (build output and `.git` excepted), relative to it.
fn repo_files(repo: &Path) -> Result<BTreeSet<PathBuf>, String> {
    let mut files = BTreeSet::new();
    let mut dirs = vec![repo.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let entries =
            std::fs::read_dir(&dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            if path.is_dir() {
                if name != ".git" && name != "target" {
                    dirs.push(path);
                }
            } else {
                files.insert(path.strip_prefix(repo).unwrap_or(&path).to_path_buf());
            }
        }
    }
    Ok(files)
}

/// `path` exists under the repository root, or is the tail of a file's path there (or of a
/// folder's: `tests/native` inside a crate).
fn path_exists(repo: &Path, files: &BTreeSet<PathBuf>, path: &str) -> bool {
    let path = Path::new(path.trim_start_matches("./"));
    repo.join(path).exists()
        || files
            .iter()
            .any(|file| file.ancestors().any(|tail| tail.ends_with(path)))
}

/// The ids mdBook gives the headings of a page.
fn heading_ids(text: &str) -> Vec<String> {
    let mut ids = Vec::new();
    let mut in_fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#').trim();
        ids.push(heading_id(title));
    }
    ids
}

/// mdBook's heading id: `normalize_id` in its HTML renderer.
fn heading_id(title: &str) -> String {
    title
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c.to_ascii_lowercase())
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heading_ids_follow_mdbook() {
        assert_eq!(heading_id("Streams and events"), "streams-and-events");
        assert_eq!(heading_id("`Backend` trait (core)"), "backend-trait-core");
        assert_eq!(
            heading_id("1. Layers: sys → driver"),
            "1-layers-sys--driver"
        );
    }

    #[test]
    fn finds_links_outside_code_only() {
        let text = "see [a](a.md) and [b](b.md#x \"title\") and `[c](c.md)`\n\
                    ```\n[d](d.md)\n```\n[web](https://example.com) [e](#local)\n";
        let found: Vec<String> = links(text).into_iter().map(|(_, t)| t).collect();
        assert_eq!(found, ["a.md", "b.md#x", "#local"]);
    }

    #[test]
    fn finds_repository_paths_in_code_spans() {
        let text = "see `crates/a/src/lib.rs` and `bash .ci/run`, `executor/block.rs:12`\n\
                    `docs/` `tests/native` `source/x.rs#L4`. `cuda.grid(1/2/3)` `a/b` `x.rs`\n\
                    ```\ncrates/in/fence.rs `crates/in/fence.rs`\n```\n\
                    `crates/sys/*` `gpu-mem/<kind>.rs` `$HOME/x.toml` `/usr/include/hip.h`\n\
                    `~/.cache/x.json` `https://example.com/a.md` `a/.../b.rs` `{a,b}/c.rs`\n";
        let found: Vec<(usize, String)> = backticked_paths(text);
        let expected = [
            (1, "crates/a/src/lib.rs"),
            (1, ".ci/run"),
            (1, "executor/block.rs"),
            (2, "docs/"),
            (2, "tests/native"),
            (2, "source/x.rs"),
        ];
        let expected: Vec<(usize, String)> =
            expected.iter().map(|(l, p)| (*l, p.to_string())).collect();
        assert_eq!(found, expected);
    }

    #[test]
    fn paths_exist_or_end_an_existing_path() {
        let files: BTreeSet<PathBuf> = ["crates/sim/src/executor/block.rs", "README.md"]
            .iter()
            .map(PathBuf::from)
            .collect();
        let nowhere = Path::new("/nonexistent-repository-root");
        assert!(path_exists(nowhere, &files, "executor/block.rs"));
        assert!(path_exists(
            nowhere,
            &files,
            "crates/sim/src/executor/block.rs"
        ));
        assert!(path_exists(nowhere, &files, "./README.md"));
        assert!(path_exists(nowhere, &files, "src/executor"));
        assert!(path_exists(nowhere, &files, "src/executor/"));
        // Whole components only: `ecutor/block.rs` is no tail of `executor/block.rs`.
        assert!(!path_exists(nowhere, &files, "ecutor/block.rs"));
        assert!(!path_exists(nowhere, &files, "executor/body.rs"));
    }

    #[test]
    fn checks_files_and_fragments() {
        let mut pages = BTreeMap::new();
        pages.insert(
            PathBuf::from("guide/a.md"),
            "# Alpha\n## Sub part\n".to_string(),
        );
        pages.insert(PathBuf::from("b.md"), "# Beta\n".to_string());
        let from = Path::new("guide/a.md");
        assert!(check_link(&pages, from, "../b.md").is_ok());
        assert!(check_link(&pages, from, "../b.md#beta").is_ok());
        assert!(check_link(&pages, from, "#sub-part").is_ok());
        assert!(check_link(&pages, from, "a.md#alpha").is_ok());
        assert!(check_link(&pages, from, "../b.md#gamma").is_err());
        assert!(check_link(&pages, from, "c.md").is_err());
        assert!(check_link(&pages, from, "../../outside.md").is_err());
    }
}
