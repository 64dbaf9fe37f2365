use warpforge::prelude::*;

// Sixty nested blocks: past the nesting limit, refused before syn parses
// them (thousands crashed the compiler with a stack overflow).
#[kernel]
pub fn deep(y: &mut [f32]) {
    { { { { { { { { { {
    { { { { { { { { { {
    { { { { { { { { { {
    { { { { { { { { { {
    { { { { { { { { { {
    { { { { { { { { { {
    y[0] = 1.0;
    } } } } } } } } } }
    } } } } } } } } } }
    } } } } } } } } } }
    } } } } } } } } } }
    } } } } } } } } } }
    } } } } } } } } } }
}

fn main() {}
