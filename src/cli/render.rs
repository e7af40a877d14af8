//! Text for the commands' tables: aligned columns, resource lists, amounts and ages.

use std::collections::BTreeMap;

use gangplank_core::model::quantity::{self, Scale};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// `rows` under `headers`, each column as wide as its widest cell, two spaces apart.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let last = cells.len().saturating_sub(1);
        let mut out = String::new();
        for (i, (cell, width)) in cells.iter().zip(&widths).enumerate() {
            out.push_str(cell);
            if i < last {
                out.push_str(&" ".repeat(width - cell.chars().count() + 2));
            }
        }
        out.trim_end().to_owned() + "\n"
    };
    let mut out = line(headers.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

/// The amounts of `list` as written (`cpu:16 memory:64Gi`), `pods` left out; `-` when none.
pub fn resources(list: &BTreeMap<String, String>) -> String {
    let text: Vec<String> = list
        .iter()
        .filter(|(name, _)| name.as_str() != "pods")
        .map(|(name, amount)| format!("{name}:{amount}"))
        .collect();
    if text.is_empty() {
        "-".to_owned()
    } else {
        text.join(" ")
    }
}

/// A resource list as name to the amount as written.
pub fn written(list: &BTreeMap<String, Quantity>) -> BTreeMap<String, String> {
    list.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect()
}

/// The amount of `resource` in `list` as the cache holds it (CPU in millicores, the rest in
/// units); 0 when absent or unreadable.
pub fn held(list: &BTreeMap<String, Quantity>, resource: &str) -> i64 {
    list.get(resource)
        .and_then(|q| quantity::parse(&q.0, Scale::for_resource(resource)).ok())
        .unwrap_or(0)
}

/// What `used` holds above `share`, per resource, where it holds more.
pub fn above(
    used: &BTreeMap<String, Quantity>,
    share: &BTreeMap<String, Quantity>,
) -> BTreeMap<String, String> {
    used.keys()
        .filter_map(|name| {
            let over = held(used, name).saturating_sub(held(share, name));
            (over > 0).then(|| (name.clone(), amount(name, over)))
        })
        .collect()
}

/// An amount as the cache holds it (CPU in millicores, the rest in units), written as
/// Kubernetes would: `1500m`, `2`, `64Gi`.
pub fn amount(resource: &str, value: i64) -> String {
    match Scale::for_resource(resource) {
        Scale::Milli if value % 1000 == 0 => (value / 1000).to_string(),
        Scale::Milli => format!("{value}m"),
        Scale::Units => {
            for (suffix, power) in [("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)] {
                let unit = 1i64 << power;
                if value != 0 && value % unit == 0 {
                    return format!("{}{suffix}", value / unit);
                }
            }
            value.to_string()
        }
    }
}

/// An age as kubectl writes it: `40s`, `12m`, `5h`, `3d`.
pub fn age(seconds: i64) -> String {
    let s = seconds.max(0);
    match s {
        0..120 => format!("{s}s"),
        120..7_200 => format!("{}m", s / 60),
        7_200..172_800 => format!("{}h", s / 3_600),
        _ => format!("{}d", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up_and_lines_end_without_spaces() {
        let text = table(
            &["NAME", "WEIGHT"],
            &[
                vec!["research".into(), "2".into()],
                vec!["ml".into(), "".into()],
            ],
        );
        assert_eq!(text, "NAME      WEIGHT\nresearch  2\nml\n");
    }

    #[test]
    fn borrowing_is_use_above_share_written_in_the_resource_s_unit() {
        let q = |s: &str| Quantity(s.into());
        let used = BTreeMap::from([
            ("cpu".to_owned(), q("10500m")),
            ("memory".to_owned(), q("96Gi")),
            ("nvidia.com/gpu".to_owned(), q("1")),
        ]);
        let share = BTreeMap::from([
            ("cpu".to_owned(), q("8")),
            ("memory".to_owned(), q("64Gi")),
            ("nvidia.com/gpu".to_owned(), q("2")),
        ]);
        let over = above(&used, &share);
        assert_eq!(resources(&over), "cpu:2500m memory:32Gi");
        assert_eq!(resources(&BTreeMap::new()), "-");
    }

    #[test]
    fn ages_read_like_kubectl_s() {
        assert_eq!(
            [age(40), age(600), age(18_000), age(400_000)],
            ["40s", "10m", "5h", "4d"]
        );
    }
}
