//! Helpers shared by the tests that open a page in headless Chromium (Debian's package;
//! `GANGPLANK_CHROMIUM` names another binary): `report_in_a_browser` and
//! `simulate_in_a_browser`.

use std::path::Path;
use std::process::Command;

/// Chromium run headless on `args`, with a profile of its own under `dir` and nothing
/// fetched from the network.
pub fn chromium(dir: &Path, args: &[&str]) -> std::process::Output {
    let binary = std::env::var("GANGPLANK_CHROMIUM").unwrap_or_else(|_| "chromium".into());
    Command::new(&binary)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!("failed to run {binary} ({e}): install chromium (scripts/install-deps.sh)")
        })
}

/// The DOM of the page at `path` once its script has run; panics when Chromium drew no chart.
pub fn dom(dir: &Path, path: &Path) -> String {
    let shown = chromium(dir, &["--dump-dom", &format!("file://{}", path.display())]);
    let dom = String::from_utf8_lossy(&shown.stdout).into_owned();
    assert!(
        shown.status.success() && dom.contains("data-chart"),
        "Chromium drew no chart: {}",
        String::from_utf8_lossy(&shown.stderr)
    );
    dom
}

/// A screenshot of the page at `path`, `window` (`"1280,1600"`) wide and high, into `dir`
/// as `name`; panics with Chromium's words when it takes none.
pub fn screenshot(dir: &Path, path: &Path, name: &str, window: &str) -> std::path::PathBuf {
    let shot = dir.join(name);
    let taken = chromium(
        dir,
        &[
            &format!("--screenshot={}", shot.display()),
            &format!("--window-size={window}"),
            &format!("file://{}", path.display()),
        ],
    );
    assert!(
        shot.exists(),
        "no screenshot: {}",
        String::from_utf8_lossy(&taken.stderr)
    );
    shot
}

/// The PNG `shot`'s width, height and the share of its pixels that are coloured, not grey:
/// text, grid lines and borders are grey; series, bars and swatches are coloured.
pub fn coloured_share(shot: &Path) -> (u32, u32, f64) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(shot).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut pixels).unwrap();
    let channels = info.color_type.samples();
    let coloured = pixels[..info.buffer_size()]
        .chunks(channels)
        .filter(|p| {
            let (r, g, b) = (i32::from(p[0]), i32::from(p[1]), i32::from(p[2]));
            (r - g).abs() > 40 || (g - b).abs() > 40 || (r - b).abs() > 40
        })
        .count();
    let share = coloured as f64 / (f64::from(info.width) * f64::from(info.height));
    (info.width, info.height, share)
}
