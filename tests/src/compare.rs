//! Comparing device results with float64 references.

use std::fmt;

/// How far a device result is from its reference.
#[derive(Clone, Copy, Debug)]
pub struct Deviation {
    /// `||out - ref|| / ||ref||` (absolute when the reference is all zeros).
    pub rel_l2: f64,
    pub max_abs: f64,
    /// Elements that are NaN or infinite where the reference is finite: an
    /// unwritten (poisoned) output or a broken computation.
    pub non_finite: usize,
}

impl fmt::Display for Deviation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "rel_l2 {:.2e}, max_abs {:.2e}",
            self.rel_l2, self.max_abs
        )?;
        if self.non_finite > 0 {
            write!(f, ", {} non-finite", self.non_finite)?;
        }
        Ok(())
    }
}

pub fn deviation(out: &[f32], reference: &[f64]) -> Deviation {
    assert_eq!(
        out.len(),
        reference.len(),
        "result and reference lengths differ"
    );
    let (mut diff2, mut ref2, mut max_abs, mut non_finite) = (0.0f64, 0.0f64, 0.0f64, 0usize);
    for (&o, &r) in out.iter().zip(reference) {
        let o = o as f64;
        if !o.is_finite() && r.is_finite() {
            non_finite += 1;
            continue;
        }
        let d = (o - r).abs();
        diff2 += d * d;
        ref2 += r * r;
        max_abs = max_abs.max(d);
    }
    let rel_l2 = if ref2 > 0.0 {
        (diff2 / ref2).sqrt()
    } else {
        diff2.sqrt()
    };
    Deviation {
        rel_l2,
        max_abs,
        non_finite,
    }
}

impl Deviation {
    /// Within `tolerance` (relative L2) and no unwritten or non-finite element.
    pub fn passes(&self, tolerance: f64) -> bool {
        self.non_finite == 0 && self.rel_l2 <= tolerance
    }
}
