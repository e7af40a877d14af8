//! Every import of both crates runs one way, down the layers `docs/DESIGN.md` names ("Layers"),
//! and no files import each other in a circle. The check reads the sources, not the compiler:
//! each file's `use` trees and inline `crate::`, `super::` and `self::` paths, without comments
//! and without its test code (its `#[cfg(test)] mod … { }` and the files declared under
//! `#[cfg(test)]`). Run it alone with `cargo test --test layers_run_one_way`.
//!
//! [`LAYERS`] is the table, bottom layer first, as DESIGN.md shows it (the test checks the page
//! holds it word for word): a module may import the layers listed before its own; modules of
//! the same layer, separated by `|`, import nothing of each other, except in a layer marked
//! "(one layer)", whose modules may (still without a circle).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers of each crate, bottom first (a copy of DESIGN.md's "Layers" block).
const LAYERS: &str = "\
gangplank-core (core/src):
  limits
  model
  policy
  admit | claims
  simulate
  <root>
gangplank (src):
  runtime
  api
  cache | events
  admission_loop
  controller
  batch
  webhooks
  cli | extender | multikueue | simulate
  process (one layer): <root> | config | crdgen | dashboard | server
";

/// A module path inside a crate (`["cache", "ledger"]`); the crate root is empty.
type Module = Vec<String>;

struct Crate {
    /// The module of each non-test source file, and its code without comments and tests.
    files: BTreeMap<Module, String>,
    /// Modules the crate root re-exports under their own name (`pub use runtime::metrics`).
    aliases: BTreeMap<String, Module>,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read_crate(src: &Path) -> Crate {
    let mut paths = Vec::new();
    walk(src, &mut paths);
    let mut raw: BTreeMap<Module, String> = BTreeMap::new();
    for path in paths {
        let rel = path.strip_prefix(src).unwrap().with_extension("");
        let mut module: Module = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if module.last().is_some_and(|m| m == "mod") {
            module.pop();
        }
        // `main.rs` is a crate of its own, over the library.
        if module == ["main"] {
            continue;
        }
        if module == ["lib"] {
            module.clear();
        }
        raw.insert(module, std::fs::read_to_string(&path).unwrap());
    }
    let test_only: BTreeSet<Module> = raw
        .keys()
        .filter(|m| declared_for_tests(&raw, m))
        .cloned()
        .collect();
    let files: BTreeMap<Module, String> = raw
        .iter()
        .filter(|(m, _)| !test_only.iter().any(|t| m.starts_with(t)))
        .map(|(m, text)| (m.clone(), code(text)))
        .collect();
    let aliases = files
        .get(&Module::new())
        .map(|root| use_leaves(root))
        .unwrap_or_default()
        .into_iter()
        .filter(|leaf| leaf.len() > 1 && files.contains_key(leaf))
        .map(|leaf| (leaf.last().unwrap().clone(), leaf))
        .collect();
    Crate { files, aliases }
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            walk(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Whether `module`'s parent declares it under `#[cfg(test)]`.
fn declared_for_tests(raw: &BTreeMap<Module, String>, module: &Module) -> bool {
    let Some((name, parent)) = module.split_last() else {
        return false;
    };
    let Some(text) = raw.get(parent) else {
        return false;
    };
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    lines.windows(2).any(|w| {
        w[0] == "#[cfg(test)]"
            && w[1]
                .trim_start_matches("pub ")
                .trim_start_matches("pub(crate) ")
                .strip_prefix("mod ")
                == Some(&format!("{name};"))
    })
}

/// `text` without comments and without its inline test module.
fn code(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim() == "#[cfg(test)]"
            && lines
                .peek()
                .is_some_and(|next| next.trim_start().starts_with("mod ") && next.ends_with('{'))
        {
            break;
        }
        let code = match line.find("//") {
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        };
        out.push_str(code);
        out.push('\n');
    }
    out
}

/// Every path a file names that may point into its own crate: each leaf of each `use` tree,
/// and each inline path starting with `crate`, `super` or `self`.
fn paths(code: &str) -> Vec<Vec<String>> {
    let mut out = use_leaves(code);
    let bytes = code.as_bytes();
    let word =
        |at: usize| at == 0 || !(bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_');
    for (start, _) in code.char_indices() {
        if !word(start) || code[..start].ends_with("::") {
            continue;
        }
        let rest = &code[start..];
        if ["crate::", "super::", "self::"]
            .iter()
            .any(|p| rest.starts_with(p))
        {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            out.push(segments(&rest[..end]));
        }
    }
    out
}

fn segments(path: &str) -> Vec<String> {
    path.split("::")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The leaves of every `use` tree of `code`.
fn use_leaves(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let word =
        |at: usize| at == 0 || !(bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_');
    let mut at = 0;
    while let Some(found) = code[at..].find("use ") {
        let start = at + found;
        at = start + 4;
        if !word(start) {
            continue;
        }
        let Some(end) = code[at..].find(';') else {
            break;
        };
        // Only a path tree: "use" in a string or a message is none.
        let tree = &code[at..at + end];
        if tree
            .chars()
            .all(|c| c.is_alphanumeric() || "_:{},* \n\t".contains(c))
        {
            expand(tree, &[], &mut out);
        }
    }
    out
}

/// The leaves of the `use` tree `tree`, each with `prefix` before it.
fn expand(tree: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    if tree.is_empty() {
        return;
    }
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap();
        out.push([prefix, &segments(path)].concat());
        return;
    };
    let head = [prefix, &segments(&tree[..open])].concat();
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let (mut depth, mut from) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                expand(&inner[from..i], &head, out);
                from = i + 1;
            }
            _ => {}
        }
    }
    expand(&inner[from..], &head, out);
}

/// The file `path`, named in `from`, points into (`None`: another crate, or the file itself).
fn resolve(krate: &Crate, from: &Module, path: &[String]) -> Option<Module> {
    let first = path.first()?;
    let mut full: Module = match first.as_str() {
        "crate" => match path.get(1).and_then(|m| krate.aliases.get(m)) {
            Some(module) => [module.clone(), path[2..].to_vec()].concat(),
            None => path[1..].to_vec(),
        },
        "super" | "self" => {
            let mut base = from.clone();
            let mut rest = path;
            while let Some(s) = rest.first() {
                match s.as_str() {
                    "super" => {
                        base.pop();
                    }
                    "self" => {}
                    _ => break,
                }
                rest = &rest[1..];
            }
            [base, rest.to_vec()].concat()
        }
        // A child module named without `self::`.
        _ if krate
            .files
            .contains_key(&[from.clone(), vec![first.clone()]].concat()) =>
        {
            [from.clone(), path.to_vec()].concat()
        }
        _ => return None,
    };
    while !krate.files.contains_key(&full) {
        full.pop()?;
    }
    (full != *from && !from.starts_with(&full)).then_some(full)
}

/// The file-level import graph of a crate.
fn graph(krate: &Crate) -> BTreeMap<Module, BTreeSet<Module>> {
    krate
        .files
        .iter()
        .map(|(m, code)| {
            let to = paths(code)
                .iter()
                .filter_map(|p| resolve(krate, m, p))
                .collect();
            (m.clone(), to)
        })
        .collect()
}

struct Layer {
    name: String,
    shared: bool,
    modules: Vec<String>,
}

/// The layers of the crate whose heading starts with `name`.
fn layers(name: &str) -> Vec<Layer> {
    let block: Vec<&str> = LAYERS
        .lines()
        .skip_while(|l| !l.starts_with(name))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
    block
        .iter()
        .map(|line| {
            let (head, modules) = line.trim().split_once(": ").unwrap_or(("", line.trim()));
            let modules: Vec<String> = modules.split(" | ").map(str::to_owned).collect();
            Layer {
                name: head.split(' ').next().unwrap_or("").to_owned(),
                shared: head.ends_with("(one layer)"),
                modules,
            }
        })
        .collect()
}

/// The top-level module a file belongs to (`<root>` for the crate root).
fn top(module: &Module) -> &str {
    module.first().map_or("<root>", String::as_str)
}

/// What breaks the layers of the crate under `src` (named `name` in [`LAYERS`]).
fn violations(name: &str, src: &str) -> Vec<String> {
    let krate = read_crate(&root().join(src));
    let layers = layers(name);
    let layer_of = |m: &Module| {
        layers
            .iter()
            .position(|l| l.modules.iter().any(|n| n == top(m)))
    };
    let mut found = Vec::new();
    for (from, to) in graph(&krate) {
        let Some(a) = layer_of(&from) else {
            found.push(format!("{src}: {} is in no layer", top(&from)));
            continue;
        };
        for target in to.iter().filter(|t| top(t) != top(&from)) {
            let b = layer_of(target).unwrap_or(usize::MAX);
            if b > a || (b == a && !layers[a].shared) {
                found.push(format!(
                    "{src}: {} imports {} ({} over {})",
                    from.join("::"),
                    target.join("::"),
                    layer_name(&layers, a, &from),
                    layer_name(&layers, b, target),
                ));
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

fn layer_name(layers: &[Layer], at: usize, m: &Module) -> String {
    match layers.get(at) {
        Some(l) if !l.name.is_empty() => l.name.clone(),
        _ => top(m).to_owned(),
    }
}

/// The import circles of the crate under `src`: sets of files that import each other.
fn circles(src: &str) -> Vec<String> {
    let graph = graph(&read_crate(&root().join(src)));
    // Files that reach each other, by a fixpoint of reachability (a few hundred files).
    let names: Vec<&Module> = graph.keys().collect();
    let index: BTreeMap<&Module, usize> = names.iter().enumerate().map(|(i, m)| (*m, i)).collect();
    let n = names.len();
    let mut reach = vec![vec![false; n]; n];
    for (m, to) in &graph {
        for t in to {
            reach[index[m]][index[t]] = true;
        }
    }
    for k in 0..n {
        let via = reach[k].clone();
        for row in reach.iter_mut().filter(|row| row[k]) {
            row.iter_mut().zip(&via).for_each(|(r, v)| *r |= *v);
        }
    }
    let mut seen = vec![false; n];
    let mut out = Vec::new();
    for i in 0..n {
        if seen[i] || !reach[i][i] {
            continue;
        }
        let circle: Vec<String> = (0..n)
            .filter(|&j| reach[i][j] && reach[j][i])
            .inspect(|&j| seen[j] = true)
            .map(|j| names[j].join("::"))
            .collect();
        out.push(format!("{src}: {}", circle.join(" <-> ")));
    }
    out
}

#[test]
fn design_shows_the_layers_this_test_checks() {
    let design = std::fs::read_to_string(root().join("docs/DESIGN.md")).unwrap();
    assert!(
        design.contains(LAYERS),
        "docs/DESIGN.md's \"Layers\" block differs from tests/layers_run_one_way.rs:\n{LAYERS}"
    );
}

#[test]
fn the_core_imports_only_down_its_layers() {
    let found = violations("gangplank-core", "core/src");
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn the_service_imports_only_down_its_layers() {
    let found = violations("gangplank (src)", "src");
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn no_files_import_each_other_in_a_circle() {
    let found: Vec<String> = ["core/src", "src"].into_iter().flat_map(circles).collect();
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn the_check_sees_an_import_up_and_a_circle() {
    let text = "use crate::a::{b, c::D};\nfn f() { super::e::g(); }\n// use crate::x;\n";
    let krate = Crate {
        aliases: BTreeMap::new(),
        files: BTreeMap::from([
            (vec!["h".to_owned()], code(text)),
            (vec!["a".to_owned()], String::new()),
            (
                vec!["a".to_owned(), "c".to_owned()],
                "use crate::h::Z;".to_owned(),
            ),
            (vec!["e".to_owned()], String::new()),
        ]),
    };
    let graph = graph(&krate);
    let to: Vec<String> = graph[&vec!["h".to_owned()]]
        .iter()
        .map(|m| m.join("::"))
        .collect();
    assert_eq!(to, ["a", "a::c", "e"]);
    assert!(graph[&vec!["a".to_owned(), "c".to_owned()]].contains(&vec!["h".to_owned()]));
}
