//! Types as written in the source: scalar names, slices, arrays, and the
//! ranges of integer literals.

use proc_macro2::Ident;
use quote::ToTokens;

use crate::ir::Scalar;

/// What a type parameter (`T: Float`) admits: a small fixed set of bounds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Bound {
    /// No bound: every scalar type.
    Any,
    /// `f16`, `bf16`, `f32`, `f64`.
    Float,
    /// `i8`, `u8`, `i32`, `u32`, `i64`, `u64`.
    Int,
    /// A float or an integer.
    Number,
    /// The 16-bit floats, the operands of `mma_m16n8k16`: `f16`, `bf16`.
    Half,
}

/// The bounds, for messages.
pub const BOUNDS: &str = "`Float` (f16, bf16, f32, f64), `Int` (i8, u8, i32, u32, i64, u64), \
     `Number` (either) and `Half` (f16, bf16)";

impl Bound {
    pub fn from_name(name: &str) -> Option<Bound> {
        Some(match name {
            "Float" => Bound::Float,
            "Int" => Bound::Int,
            "Number" => Bound::Number,
            "Half" => Bound::Half,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Bound::Any => "any scalar",
            Bound::Float => "Float",
            Bound::Int => "Int",
            Bound::Number => "Number",
            Bound::Half => "Half",
        }
    }

    pub fn admits(self, ty: Scalar) -> bool {
        match self {
            Bound::Any => true,
            Bound::Float => ty.is_float(),
            Bound::Int => ty.is_int(),
            Bound::Number => ty.is_float() || ty.is_int(),
            Bound::Half => matches!(ty, Scalar::F16 | Scalar::Bf16),
        }
    }

    /// The type a device function's body is checked with at its definition.
    pub fn representative(self) -> Scalar {
        match self {
            Bound::Any | Bound::Float | Bound::Number => Scalar::F32,
            Bound::Int => Scalar::U32,
            Bound::Half => Scalar::F16,
        }
    }
}

/// The scalar each type parameter in scope stands for.
pub type TypeArgs = [(Ident, Scalar)];

/// The scalar `ty` names, a type parameter of `args` or a scalar type.
pub fn scalar_in(ty: &syn::Type, args: &TypeArgs) -> Result<Scalar, String> {
    if let syn::Type::Path(path) = ty {
        if let Some(ident) = path.path.get_ident() {
            if let Some((_, s)) = args.iter().find(|(a, _)| a == ident) {
                return Ok(*s);
            }
        }
    }
    scalar(ty)
}

const SCALARS: &str = "bool, i8, u8, i32, u32, i64, u64, f16, bf16, f32, f64";

/// The scalar named by `ty`, or a message saying what to write instead.
pub fn scalar(ty: &syn::Type) -> Result<Scalar, String> {
    if let syn::Type::Path(path) = ty {
        if let Some(ident) = path.path.get_ident() {
            let name = ident.to_string();
            if let Some(s) = Scalar::from_name(&name) {
                return Ok(s);
            }
            return Err(match name.as_str() {
                "usize" | "isize" => format!(
                    "`{name}` is not supported in kernels: use `u32` for sizes and indices (or `u64`/`i64` for 64-bit values)"
                ),
                "i16" | "u16" | "i128" | "u128" | "f128" | "char" => {
                    format!("`{name}` is not supported in kernels: the scalar types are {SCALARS}")
                }
                "String" | "str" => {
                    "strings are not supported in kernels: kernels take scalars (`f32`, `u32`, ..) and slices (`&[T]`, `&mut [T]`)".to_string()
                }
                _ => format!("unknown type `{name}`: the scalar types of kernels are {SCALARS}"),
            });
        }
        if let Some(last) = path.path.segments.last() {
            let name = last.ident.to_string();
            if name == "Vec" {
                return Err("`Vec` is not supported in kernels: use a slice parameter `&[T]` or a shared array `let s: [T; N] = shared();`".to_string());
            }
            if matches!(name.as_str(), "f16" | "bf16") {
                return Err(format!(
                    "write the type as plain `{name}` (the kernel language has no paths)"
                ));
            }
        }
    }
    Err(format!(
        "the type `{}` is not supported here: use one of the scalar types {SCALARS}",
        ty.to_token_stream()
    ))
}

/// Whether `value` (the mathematical value of a literal) fits in integer type `ty`.
pub fn int_fits(value: i128, ty: Scalar) -> bool {
    let (min, max): (i128, i128) = match ty {
        Scalar::I8 => (i8::MIN.into(), i8::MAX.into()),
        Scalar::U8 => (0, u8::MAX.into()),
        Scalar::I32 => (i32::MIN.into(), i32::MAX.into()),
        Scalar::U32 => (0, u32::MAX.into()),
        Scalar::I64 => (i64::MIN.into(), i64::MAX.into()),
        Scalar::U64 => (0, u64::MAX.into()),
        _ => return false,
    };
    (min..=max).contains(&value)
}

/// The value of one `tune(..)` entry for a const param of type `ty`.
pub fn const_value(expr: &syn::Expr, ty: Scalar) -> Result<i64, String> {
    let wanted = format!("a `{}` literal", ty.name());
    let (negative, lit) = match expr {
        syn::Expr::Unary(syn::ExprUnary {
            op: syn::UnOp::Neg(_),
            expr,
            ..
        }) => (true, &**expr),
        other => (false, other),
    };
    match lit {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Bool(b),
            ..
        }) if ty == Scalar::Bool && !negative => Ok(b.value as i64),
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(int),
            ..
        }) if ty != Scalar::Bool => {
            let magnitude: u64 = int.base10_parse().map_err(|e| e.to_string())?;
            let value = if negative {
                -i128::from(magnitude)
            } else {
                i128::from(magnitude)
            };
            if !int.suffix().is_empty() && int.suffix() != ty.name() {
                return Err(format!(
                    "this value is typed `{}` but the const parameter is `{}`",
                    int.suffix(),
                    ty.name()
                ));
            }
            if int_fits(value, ty) {
                Ok(value as i64)
            } else {
                Err(format!(
                    "{value} does not fit in `{}`, the type of the const parameter",
                    ty.name()
                ))
            }
        }
        _ => Err(format!("tune values must be literals: expected {wanted}")),
    }
}
