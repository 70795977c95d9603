//! A QR code as SVG: the ticket link the board and the kiosk show, for a phone's camera.
//! Encoded by `qrcodegen` (error correction level M: a code on a screen or paper may be
//! partly glared or creased), drawn as one path of black runs on white, with the quiet zone
//! of four modules the standard asks for.

use std::fmt::Write as _;

use qrcodegen::{QrCode, QrCodeEcc};

/// The quiet zone around the code, in modules.
const QUIET: i32 = 4;

/// `text` as a QR code in SVG (scalable: the page sizes it), or `None` when it is too long
/// for any QR code.
pub(super) fn svg(text: &str) -> Option<String> {
    let qr = QrCode::encode_text(text, QrCodeEcc::Medium).ok()?;
    let size = qr.size();
    let side = size + 2 * QUIET;
    let mut path = String::new();
    for y in 0..size {
        let mut x = 0;
        while x < size {
            if !qr.get_module(x, y) {
                x += 1;
                continue;
            }
            let start = x;
            while x < size && qr.get_module(x, y) {
                x += 1;
            }
            let _ = write!(
                path,
                "M{},{}h{}v1h-{}z",
                start + QUIET,
                y + QUIET,
                x - start,
                x - start
            );
        }
    }
    Some(format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {side} {side}" shape-rendering="crispEdges"><rect width="{side}" height="{side}" fill="#fff"/><path fill="#000" d="{path}"/></svg>"##
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SVG draws exactly the code's dark modules, inside a quiet zone of four.
    #[test]
    fn the_svg_draws_every_dark_module_of_the_code_and_nothing_else() {
        let text = "https://example.org/ui/queues/lobby/ticket#token=a-long-random-secret-444";
        let svg = svg(text).unwrap();
        let qr = QrCode::encode_text(text, QrCodeEcc::Medium).unwrap();
        let n = qr.size();
        let side = n + 8;
        assert!(
            svg.contains(&format!("viewBox=\"0 0 {side} {side}\"")),
            "{svg}"
        );
        let d = svg
            .split(" d=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        let mut drawn = vec![vec![false; side as usize]; side as usize];
        for run in d.split('M').filter(|r| !r.is_empty()) {
            let (at, rest) = run.split_once('h').unwrap();
            let (x, y) = at.split_once(',').unwrap();
            let (x, y): (usize, usize) = (x.parse().unwrap(), y.parse().unwrap());
            let len: usize = rest.split('v').next().unwrap().parse().unwrap();
            for cell in &mut drawn[y][x..x + len] {
                assert!(!*cell, "drawn twice");
                *cell = true;
            }
        }
        for y in 0..side {
            for x in 0..side {
                let dark = (4..n + 4).contains(&x)
                    && (4..n + 4).contains(&y)
                    && qr.get_module(x - 4, y - 4);
                assert_eq!(drawn[y as usize][x as usize], dark, "({x}, {y})");
            }
        }
        assert_eq!(super::svg(&"x".repeat(4000)), None);
    }
}
