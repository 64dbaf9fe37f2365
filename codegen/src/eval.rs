//! Evaluation of expressions whose inputs are known. STUB: interface only.

use crate::ir::{Expr, Literal};
use crate::Error;

/// What the host knows about one run-time parameter at launch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum HostValue {
    Scalar(Literal),
    Slice { len: u64 },
}

/// Evaluates an expression over const params and (for launch-time checks)
/// parameter values and slice lengths. Integer overflow is an error, not a wrap.
pub fn eval(expr: &Expr, consts: &[i64], params: &[HostValue]) -> Result<Literal, Error> {
    let _ = (expr, consts, params);
    todo!("eval")
}
