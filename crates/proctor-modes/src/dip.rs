//! Hartigan's dip statistic for a continuous, piecewise-linear distribution function.
//!
//! The dip is the largest distance between a distribution function and the closest unimodal
//! one. We compute it with Hartigan & Hartigan's (1985) iteration: take the greatest convex
//! minorant (GCM) and least concave majorant (LCM) on the current candidate modal interval,
//! shrink the interval to where they are farthest apart, and keep the worst fit seen outside
//! it. The input is the vertices of a piecewise-linear CDF (histogram mass spread evenly over
//! each bucket), which has no jumps, so only vertices need checking. This module does not
//! decide anything; the gate lives in the caller.

/// A vertex of the distribution function: position (log scale) and cumulative fraction.
pub(crate) type Vertex = (f64, f64);

/// The dip of the piecewise-linear CDF through `vertices` (x strictly increasing,
/// cumulative fraction non-decreasing from 0 to 1). Ranges from 0 (unimodal) to 0.25.
pub(crate) fn dip(vertices: &[Vertex]) -> f64 {
    if vertices.len() < 3 {
        return 0.0;
    }
    let (mut low, mut high) = (0usize, vertices.len() - 1);
    let mut twice_dip = 0.0f64;
    let mut convex = Vec::new();
    let mut concave = Vec::new();
    loop {
        hull(vertices, low, high, Side::Below, &mut convex);
        hull(vertices, low, high, Side::Above, &mut concave);

        // Where are the two hulls farthest apart? The answer bounds the new modal interval by
        // a GCM vertex on the left and an LCM vertex on the right.
        let mut widest = (0.0f64, low, high);
        for &index in &convex {
            let (x, y) = vertices[index];
            let gap = evaluate(vertices, &concave, x) - y;
            if gap > widest.0 {
                let right = concave.iter().copied().find(|&j| vertices[j].0 >= x).unwrap_or(high);
                widest = (gap, index, right);
            }
        }
        for &index in &concave {
            let (x, y) = vertices[index];
            let gap = y - evaluate(vertices, &convex, x);
            if gap > widest.0 {
                let left = convex.iter().rev().copied().find(|&i| vertices[i].0 <= x).unwrap_or(low);
                widest = (gap, left, index);
            }
        }
        let (gap, new_low, new_high) = widest;
        if gap <= twice_dip || new_low >= new_high || (new_low == low && new_high == high) {
            break;
        }
        // Outside the new modal interval the unimodal fit must be convex (left) and concave
        // (right); the hulls are the best such fits, so their distance from the CDF counts.
        for &(x, y) in &vertices[low..=new_low] {
            twice_dip = twice_dip.max(y - evaluate(vertices, &convex, x));
        }
        for &(x, y) in &vertices[new_high..=high] {
            twice_dip = twice_dip.max(evaluate(vertices, &concave, x) - y);
        }
        low = new_low;
        high = new_high;
    }
    twice_dip / 2.0
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Below,
    Above,
}

/// Indices of the lower (convex) or upper (concave) hull of `vertices[low..=high]`.
fn hull(vertices: &[Vertex], low: usize, high: usize, side: Side, out: &mut Vec<usize>) {
    out.clear();
    for index in low..=high {
        while out.len() >= 2 {
            let (ax, ay) = vertices[out[out.len() - 2]];
            let (bx, by) = vertices[out[out.len() - 1]];
            let (cx, cy) = vertices[index];
            let cross = (bx - ax) * (cy - ay) - (by - ay) * (cx - ax);
            // Below: keep only left turns (convex); above: only right turns (concave).
            let keep = match side {
                Side::Below => cross > 0.0,
                Side::Above => cross < 0.0,
            };
            if keep {
                break;
            }
            out.pop();
        }
        out.push(index);
    }
}

/// The hull's value at `x` by linear interpolation between its vertices.
fn evaluate(vertices: &[Vertex], hull: &[usize], x: f64) -> f64 {
    let after = hull.partition_point(|&i| vertices[i].0 < x);
    if after == 0 {
        return vertices[hull[0]].1;
    }
    if after == hull.len() {
        return vertices[hull[hull.len() - 1]].1;
    }
    let (ax, ay) = vertices[hull[after - 1]];
    let (bx, by) = vertices[hull[after]];
    if bx <= ax {
        return by;
    }
    ay + (by - ay) * (x - ax) / (bx - ax)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_has_no_dip() {
        let vertices: Vec<Vertex> = (0..=10).map(|i| (f64::from(i), f64::from(i) / 10.0)).collect();
        assert!(dip(&vertices) < 1e-12);
    }

    #[test]
    fn two_separated_equal_lumps_dip_a_quarter() {
        // Half the mass on [0, 1], half on [9, 10], nothing between.
        let vertices = [(0.0, 0.0), (1.0, 0.5), (9.0, 0.5), (10.0, 1.0)];
        let value = dip(&vertices);
        // Not quite ¼: a unimodal fit may cover part of each lump.
        assert!(value > 0.2 && value <= 0.25, "{value}");
    }

    #[test]
    fn unequal_lumps_dip_less() {
        let vertices = [(0.0, 0.0), (1.0, 0.9), (9.0, 0.9), (10.0, 1.0)];
        let value = dip(&vertices);
        assert!(value > 0.02 && value < 0.1, "{value}");
    }
}
