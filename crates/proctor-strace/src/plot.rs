//! Per-syscall wall-time histograms as an SVG document. Pure: returns bytes.
//!
//! Drawn by hand rather than with a plotting crate: a handful of rectangles and labels do
//! not justify a font stack and an image pipeline. No PNG here (see the CLI for why).
