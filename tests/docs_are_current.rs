//! The docs stay true to the code and to themselves. The flag table of `docs/install.md` and the
//! metric table of `docs/metrics.md` are generated from the code (clap's definitions of
//! `gangplank serve` and the metric catalogue), so they cannot drift: when that test fails, run
//! `UPDATE_DOCS=1 cargo test --test docs_are_current` and commit the pages. And every relative
//! link of README.md and the pages under docs/ names a file that exists (and, with a `#`, a
//! heading of it), so that moving a page cannot leave a dead link behind. DESIGN.md's API
//! section names every spec and status field of the Queue and PodGroup CRDs.

mod checked_in;

use std::path::PathBuf;

use clap::CommandFactory;
use gangplank::config::Cli;

fn flags_table() -> String {
    let cli = Cli::command();
    let serve = cli
        .find_subcommand("serve")
        .expect("gangplank has a serve subcommand");
    let mut out = String::from("| flag | environment | default | meaning |\n|---|---|---|---|\n");
    for arg in serve.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        if long == "help" || long == "version" {
            continue;
        }
        let value = arg
            .get_value_names()
            .map(|names| format!(" {}", names.join(" ")))
            .unwrap_or_default();
        let env = arg
            .get_env()
            .map(|e| format!("`{}`", e.to_string_lossy()))
            .unwrap_or_default();
        let default = arg
            .get_default_values()
            .iter()
            .map(|v| format!("`{}`", v.to_string_lossy()))
            .collect::<Vec<_>>()
            .join(", ");
        let help = arg
            .get_long_help()
            .or(arg.get_help())
            .map(|h| h.to_string())
            .unwrap_or_default();
        let mut help = help.replace('\n', " ").replace('|', "\\|");
        if !help.ends_with('.') {
            help.push('.');
        }
        let choices: Vec<String> = arg
            .get_possible_values()
            .iter()
            .map(|v| format!("`{}`", v.get_name()))
            .collect();
        if !choices.is_empty() && !arg.is_hide_possible_values_set() {
            help += &format!(" One of {}.", choices.join(", "));
        }
        out += &format!("| `--{long}{value}` | {env} | {default} | {help} |\n");
    }
    out
}

/// Replaces the text between `<!-- NAME:begin ... -->` and `<!-- NAME:end -->` of `page`.
fn splice(page: &str, name: &str, body: &str, path: &str) -> String {
    let begin = format!("<!-- {name}:begin (generated, see tests/docs_are_current.rs) -->\n");
    let end = format!("<!-- {name}:end -->");
    let start = page
        .find(&begin)
        .unwrap_or_else(|| panic!("{path} has no {begin:?} marker"))
        + begin.len();
    let stop = page[start..]
        .find(&end)
        .unwrap_or_else(|| panic!("{path} has no {end:?} marker"))
        + start;
    format!("{}{}{}", &page[..start], body, &page[stop..])
}

/// Checks (or, with `UPDATE_DOCS=1`, rewrites) the generated table `name` of the page at `path`.
fn assert_table_current(path: &str, name: &str, table: &str) {
    let page = std::fs::read_to_string(root().join(path))
        .unwrap_or_else(|e| panic!("failed to read {path}: {e}"));
    checked_in::assert_current(
        path,
        &splice(&page, name, table, path),
        "UPDATE_DOCS",
        "UPDATE_DOCS=1 cargo test --test docs_are_current",
    );
}

#[test]
fn the_flag_table_of_the_install_page_matches_the_code() {
    assert_table_current("docs/install.md", "flags", &flags_table());
}

#[test]
fn the_metric_table_of_the_metrics_page_matches_the_code() {
    assert_table_current(
        "docs/metrics.md",
        "metrics",
        &gangplank::metrics::markdown_table(),
    );
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every Markdown file under docs/, as paths from the crate root.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![PathBuf::from("README.md")];
    let mut dirs = vec![PathBuf::from("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(root().join(&dir)).expect("docs/ is readable") {
            let name = entry.expect("docs/ is readable").file_name();
            let path = dir.join(&name);
            if root().join(&path).is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    pages.sort();
    pages
}

/// The lines of `text` outside fenced code blocks.
fn prose(text: &str) -> impl Iterator<Item = &str> {
    let mut fenced = false;
    text.lines().filter(move |line| {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            return false;
        }
        !fenced
    })
}

/// The targets of the inline links `[text](target)` of a line.
fn link_targets(line: &str) -> Vec<&str> {
    line.match_indices("](")
        .filter_map(|(at, _)| {
            let rest = &line[at + 2..];
            rest.find(')').map(|end| &rest[..end])
        })
        .collect()
}

/// The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(text: &str) -> Vec<String> {
    prose(text)
        .filter_map(|line| line.strip_prefix('#'))
        .map(|heading| anchor(heading.trim_start_matches('#')))
        .collect()
}

#[test]
fn every_relative_link_of_the_readme_and_the_docs_names_a_file_and_heading_that_exist() {
    let mut dead = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(root().join(&page)).expect("page is readable");
        let dir = page.parent().expect("a page is in a folder").to_path_buf();
        for line in prose(&text) {
            for target in link_targets(line) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let (file, heading) = match target.split_once('#') {
                    Some((file, heading)) => (file, Some(heading)),
                    None => (target, None),
                };
                let linked = if file.is_empty() {
                    page.clone()
                } else {
                    dir.join(file)
                };
                let Ok(linked_text) = std::fs::read_to_string(root().join(&linked)) else {
                    if !root().join(&linked).exists() {
                        dead.push(format!("{}: {target} (no such file)", page.display()));
                    }
                    continue;
                };
                if let Some(heading) = heading
                    && !anchors(&linked_text).iter().any(|a| a == heading)
                {
                    dead.push(format!("{}: {target} (no such heading)", page.display()));
                }
            }
        }
    }
    assert!(dead.is_empty(), "dead relative links:\n{}", dead.join("\n"));
}

#[test]
fn the_link_check_sees_dead_links_and_github_anchors() {
    assert_eq!(
        link_targets("see [a](docs/a.md#b-c) and [d](https://x/y)"),
        ["docs/a.md#b-c", "https://x/y"]
    );
    assert_eq!(
        anchor(" Asking why: `gangplank queues`, `groups`"),
        "asking-why-gangplank-queues-groups"
    );
    assert_eq!(
        anchors("# Top\n```\n# not a heading\n```\n## Gangs, step by step\n"),
        ["top", "gangs-step-by-step"]
    );
}

/// The text of DESIGN.md's "## APIs" section.
fn design_apis() -> String {
    let design = std::fs::read_to_string(root().join("docs/DESIGN.md")).expect("read DESIGN.md");
    let start = design
        .find("\n## APIs\n")
        .expect("DESIGN.md has an APIs section");
    let rest = &design[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    rest[..end].to_owned()
}

/// The names of the top-level `spec` and `status` fields of `kind`'s CRD, as `spec.x`/`status.x`.
fn crd_fields(kind: &str) -> Vec<String> {
    let crd = gangplank::crdgen::crds()
        .into_iter()
        .find(|c| c.spec.names.kind == kind && c.spec.group.ends_with("gangplank.dev"))
        .unwrap_or_else(|| panic!("a CRD of kind {kind}"));
    let schema = crd.spec.versions[0]
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .expect("the CRD has a schema");
    let mut fields = Vec::new();
    for part in ["spec", "status"] {
        let properties = schema
            .properties
            .as_ref()
            .and_then(|p| p.get(part))
            .and_then(|p| p.properties.as_ref());
        for name in properties.into_iter().flat_map(|p| p.keys()) {
            fields.push(format!("{part}.{name}"));
        }
    }
    fields
}

#[test]
fn designs_api_section_names_every_spec_and_status_field_of_the_queue_and_pod_group() {
    let apis = design_apis();
    let mut missing = Vec::new();
    for kind in ["Queue", "PodGroup"] {
        for field in crd_fields(kind) {
            let name = field.split_once('.').map_or(field.as_str(), |(_, n)| n);
            if !apis.contains(&format!("`{name}`")) {
                missing.push(format!("{kind} {field}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/DESIGN.md's APIs section does not name these fields (add them, in backticks, \
         with what they do): {missing:?}"
    );
}

#[test]
fn the_api_check_reads_real_fields() {
    let fields = crd_fields("PodGroup");
    assert!(fields.contains(&"spec.minMember".to_owned()), "{fields:?}");
    assert!(fields.contains(&"status.phase".to_owned()), "{fields:?}");
}

// ---- the reliability page names tests that exist

/// The last cell (the test column) of each row of the Markdown tables in `page`, header and
/// separator rows left out.
fn test_cells(page: &str) -> Vec<&str> {
    prose(page)
        .filter(|line| line.starts_with("| ") && !line.starts_with("|---"))
        .filter_map(|line| line.trim_end().strip_suffix(" |")?.rsplit(" | ").next())
        .filter(|cell| *cell != "test")
        .collect()
}

/// The code spans of `cell`, each with the text between it and the span before.
fn code_spans(cell: &str) -> Vec<(&str, &str)> {
    let parts: Vec<&str> = cell.split('`').collect();
    parts
        .chunks(2)
        .filter_map(|pair| Some((pair[0], *pair.get(1)?)))
        .collect()
}

/// The `.rs` files at `path`: the file itself, or every one under the folder.
fn rust_files(path: &std::path::Path) -> Vec<PathBuf> {
    if path.is_file() {
        return vec![path.to_path_buf()];
    }
    let mut files = Vec::new();
    for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

/// The files of the module named by `segments` (`gangplank_core::…` in core/src, else in src/
/// or, for a test crate, tests/; `tests` is a module inline in the file before), and the last
/// segment when it names no module: a function in them.
fn module<'a>(segments: &[&'a str]) -> Option<(Vec<PathBuf>, Option<&'a str>)> {
    let (bases, segments) = match segments {
        ["gangplank_core", rest @ ..] => (vec![root().join("core/src")], rest),
        // The runtime's modules are also named at the crate's root (`leader`, `fence`, ...).
        _ => (
            vec![
                root().join("src"),
                root().join("src/runtime"),
                root().join("tests"),
            ],
            segments,
        ),
    };
    bases.into_iter().find_map(|mut dir| {
        let mut files: Option<Vec<PathBuf>> = None;
        for (i, segment) in segments.iter().enumerate() {
            let file = dir.join(format!("{segment}.rs"));
            let folder = dir.join(segment);
            if *segment == "tests" && files.is_some() {
                continue;
            }
            if file.is_file() || folder.is_dir() {
                let mut found = rust_files(&file);
                if folder.is_dir() {
                    found.extend(rust_files(&folder));
                }
                files = Some(found);
                dir = folder;
            } else if i + 1 == segments.len() {
                return Some((files?, Some(*segment)));
            } else {
                return None;
            }
        }
        Some((files?, None))
    })
}

/// Whether one of `files` defines a test `name` (with `prefix`, one whose name starts so): a
/// `fn` under an attribute naming `test`.
fn defines_test(files: &[PathBuf], name: &str, prefix: bool) -> bool {
    files.iter().any(|file| {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines.iter().enumerate().any(|(i, line)| {
            let Some((_, after)) = line.split_once("fn ") else {
                return false;
            };
            let named =
                after.starts_with(name) && (prefix || after[name.len()..].starts_with(['(', '<']));
            let attributes = lines[..i]
                .iter()
                .rev()
                .take_while(|l| l.trim_start().starts_with("#[") || l.trim().starts_with("///"));
            named && attributes.into_iter().any(|l| l.contains("test"))
        })
    })
}

/// Whether one of `files` has a test.
fn has_tests(files: &[PathBuf]) -> bool {
    files.iter().any(|file| {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        text.contains("#[test]") || text.contains("#[tokio::test")
    })
}

/// What the test cells of `page` name that does not exist: an e2e test `module::name` not in
/// tests/e2e/module.rs; a path; a module (with a test), or a test in one (`module::name`); a
/// test named alone, in the file or module named just before it in its cell (after `core`, in
/// core/; first in its cell, anywhere). Spans that are no such name (an environment variable)
/// are passed over.
fn unknown_names(page: &str) -> Vec<String> {
    let mut unknown = Vec::new();
    for cell in test_cells(page) {
        let mut scope: Vec<PathBuf> = Vec::new();
        for (before, span) in code_spans(cell) {
            let prefix = span.ends_with(['…', '*']);
            let name = span.trim_end_matches(['…', '*']).trim_end_matches("::");
            let mut missing = |what: &str| unknown.push(format!("{span}: {what} (in: {cell})"));
            if name.contains('/') {
                let path = root().join(name.trim_start_matches("./"));
                if !path.exists() {
                    missing("no such file or folder");
                }
                scope = rust_files(&path);
                continue;
            }
            let is_path =
                |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "_:".contains(c);
            if name.is_empty() || !name.chars().all(is_path) {
                continue;
            }
            let segments: Vec<&str> = name.split("::").collect();
            if before.trim_end().ends_with("e2e") {
                let file = root().join(format!("tests/e2e/{}.rs", segments[0]));
                match segments[1..] {
                    _ if !file.is_file() => missing("no such e2e module"),
                    [test] if !defines_test(std::slice::from_ref(&file), test, prefix) => {
                        missing("no such e2e test")
                    }
                    _ => {}
                }
                scope = vec![file];
            } else if let Some((files, test)) = module(&segments) {
                match test {
                    Some(test) if !defines_test(&files, test, prefix) => {
                        missing("no such test (or module) there")
                    }
                    None if !has_tests(&files) => missing("the module has no test"),
                    _ => {}
                }
                scope = files;
            } else if segments.len() == 1 {
                let within = if before.trim_end().ends_with("core") {
                    rust_files(&root().join("core"))
                } else if scope.is_empty() {
                    ["src", "core", "tests", "examples"]
                        .iter()
                        .flat_map(|dir| rust_files(&root().join(dir)))
                        .collect()
                } else {
                    scope.clone()
                };
                if !defines_test(&within, name, prefix) {
                    missing("no such test where the cell points");
                }
            } else {
                missing("no such module");
            }
        }
    }
    unknown
}

#[test]
fn every_test_the_reliability_page_names_exists() {
    let page = std::fs::read_to_string(root().join("docs/reliability.md")).unwrap();
    let unknown = unknown_names(&page);
    assert!(
        unknown.is_empty(),
        "docs/reliability.md names tests, modules or files that do not exist (renamed or \
         removed? name what holds the row now):\n{}",
        unknown.join("\n")
    );
}

#[test]
fn the_test_name_check_sees_names_that_do_not_exist() {
    let page = "| fault | result | test |\n|---|---|---|\n\
        | a | b | e2e `leader::killing_the_leader_during_a_stream_of_gangs_leaves_every_gang_whole_and_counted`, `tests/extender_port.rs` `headers_over_16_kib…`, `fence::tests::*`, `gangplank_core::claims` unit test `bind_refuses_a_pod_still_at_the_gate`, `GANGPLANK_FUZZ_SEED` |\n\
        | c | d | e2e `leader::no_such_test`, e2e `no_such_module::x`, `tests/no_such_file.rs`, `tests/extender_port.rs` `bind_refuses_a_pod_still_at_the_gate`, `gangplank_core::claims::no_such_test`, `no_such_module::x`, `cache::dra` unit tests |\n";
    let unknown: Vec<String> = unknown_names(page)
        .iter()
        .map(|u| u.split(": ").next().unwrap().to_owned())
        .collect();
    assert_eq!(
        unknown,
        [
            "leader::no_such_test",
            "no_such_module::x",
            "tests/no_such_file.rs",
            "bind_refuses_a_pod_still_at_the_gate",
            "gangplank_core::claims::no_such_test",
            "no_such_module::x",
        ]
    );
}
