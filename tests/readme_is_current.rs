//! The README's flag and metric tables are generated from the code (clap's definitions of
//! `gangplank serve` and the metric catalogue), so they cannot drift. When this test fails, run
//! `UPDATE_README=1 cargo test --test readme_is_current` and commit the README.

use clap::CommandFactory;
use gangplank::config::Cli;

const README: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/README.md");

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

/// Replaces the text between `<!-- NAME:begin -->` and `<!-- NAME:end -->`.
fn splice(readme: &str, name: &str, body: &str) -> String {
    let begin = format!("<!-- {name}:begin (generated, see tests/readme_is_current.rs) -->\n");
    let end = format!("<!-- {name}:end -->");
    let start = readme
        .find(&begin)
        .unwrap_or_else(|| panic!("README.md has no {begin:?} marker"))
        + begin.len();
    let stop = readme[start..]
        .find(&end)
        .unwrap_or_else(|| panic!("README.md has no {end:?} marker"))
        + start;
    format!("{}{}{}", &readme[..start], body, &readme[stop..])
}

#[test]
fn readme_flag_and_metric_tables_match_the_code() {
    let readme = std::fs::read_to_string(README).expect("failed to read README.md");
    let expected = splice(
        &splice(&readme, "flags", &flags_table()),
        "metrics",
        &gangplank::metrics::markdown_table(),
    );
    if readme != expected {
        if std::env::var_os("UPDATE_README").is_some() {
            std::fs::write(README, &expected).expect("failed to write README.md");
        } else {
            panic!(
                "README.md's flag or metric table is stale: run `UPDATE_README=1 cargo test --test readme_is_current` and commit README.md"
            );
        }
    }
}
